package metrics

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// maxLag bounds how far BranchLag walks: a tailer further behind than this
// reports this many.
const maxLag = 10000

// BranchLag counts the first-parent commits from the commit ref names in the
// repository at dir down to cursor, cursor excluded: how many commits the
// tailer still has to process. It stops at 10,000. When cursor is not on the
// tip's first-parent history (a force push) it returns an error: the tailer
// is halted then, and lag means nothing. ctx is checked between commits.
func BranchLag(ctx context.Context, dir string, ref plumbing.ReferenceName, cursor string) (int, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return 0, fmt.Errorf("measure lag: open %s: %w", dir, err)
	}
	tip, err := r.Reference(ref, true)
	if err != nil {
		return 0, fmt.Errorf("measure lag: read %s: %w", ref, err)
	}
	want := plumbing.NewHash(cursor)
	h := tip.Hash()
	for n := 0; n < maxLag; n++ {
		if h == want {
			return n, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		c, err := r.CommitObject(h)
		if err != nil {
			return 0, fmt.Errorf("measure lag: read commit %s: %w", h, err)
		}
		if len(c.ParentHashes) == 0 {
			return 0, errors.New("measure lag: the cursor is not on the branch's first-parent history")
		}
		h = c.ParentHashes[0]
	}
	return maxLag, nil
}
