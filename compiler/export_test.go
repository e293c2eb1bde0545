package compiler

import "context"

// CompileUnify compiles with namespace schemas applied by Value.Unify on
// the evaluated config instead of through wrapper packages, for
// differential tests.
func CompileUnify(ctx context.Context, repoDir string, opts Options) (*Result, error) {
	opts.forceUnify = true
	return Compile(ctx, repoDir, opts)
}
