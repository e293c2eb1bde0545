package compiler

import (
	"context"

	"cuelang.org/go/cue"

	"github.com/cuecast/cuecast"
)

// ExplainWalk is Explain without the retry over the whole repo: scoped
// chooses the walk of what the config can read (scopeFor) or of the whole
// repo, so a test can hold the two to the same answer.
func ExplainWalk(ctx context.Context, repoDir string, cfg cuecast.ConfigPath, opts ExplainOptions, scoped bool) (*Explanation, error) {
	var p cue.Path
	if opts.Path != "" {
		p = cue.ParsePath(opts.Path)
	}
	opts = opts.withDefaults()
	xp, err := newExplainPlan(ctx, repoDir, []cuecast.ConfigPath{cfg}, opts, scoped)
	if err != nil {
		return nil, err
	}
	defer xp.cleanup()
	return xp.explain(ctx, cfg, p, opts)
}
