package compiler

import "context"

// CompileUnify compiles with namespace schemas applied by Value.Unify on
// the evaluated config instead of through wrapper packages, for
// differential tests.
func CompileUnify(ctx context.Context, repoDir string, opts Options) (*Result, error) {
	opts.forceUnify = true
	return Compile(ctx, repoDir, opts)
}

// CompileLoads compiles and calls onLoad with the number of files the
// loader was offered for each batch of configs (see runJobs).
func CompileLoads(ctx context.Context, repoDir string, opts Options, onLoad func(files int)) (*Result, error) {
	opts.onBatchLoad = onLoad
	return Compile(ctx, repoDir, opts)
}
