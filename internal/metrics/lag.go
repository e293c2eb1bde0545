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
// tailer still has to process. With no cursor (the tailer has not finished
// its first commit: it was stopped, or its store refused the write) they are
// the commits down to from, or to the root when from is empty, inclusive,
// as the tailer will process them (tailer.State.From). It stops at 10,000.
// When the commit it walks to is not on the tip's first-parent history (a
// force push) it returns an error: the tailer is halted then, and lag means
// nothing. ctx is checked between commits.
func BranchLag(ctx context.Context, dir string, ref plumbing.ReferenceName, cursor, from string) (int, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return 0, fmt.Errorf("measure lag: open %s: %w", dir, err)
	}
	tip, err := r.Reference(ref, true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) && cursor == "" {
		return 0, nil // no branch yet, and nothing processed: nothing waits
	}
	if err != nil {
		return 0, fmt.Errorf("measure lag: read %s: %w", ref, err)
	}
	stop, inclusive := cursor, false
	if stop == "" {
		stop, inclusive = from, true
	}
	want := plumbing.NewHash(stop)
	h := tip.Hash()
	for n := 0; n < maxLag; n++ {
		if h == want {
			if inclusive {
				n++
			}
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
			if stop == "" {
				return n + 1, nil // the root: every commit waits
			}
			return 0, fmt.Errorf("measure lag: commit %s is not on the branch's first-parent history", stop)
		}
		h = c.ParentHashes[0]
	}
	return maxLag, nil
}
