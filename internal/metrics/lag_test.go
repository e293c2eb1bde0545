package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/metrics"
)

// TestBranchLag counts what the tailer still has to process, as its
// pending does: down to the cursor, exclusive; with no cursor (the first
// commit's cursor never written) down to From or the root, inclusive.
func TestBranchLag(t *testing.T) {
	repo := gittest.New(t)
	var commits []string // oldest first
	for _, msg := range []string{"root", "second", "third", "fourth"} {
		commits = append(commits, repo.Commit(msg))
	}
	empty := gittest.New(t)
	main := plumbing.NewBranchReferenceName("main")
	for _, c := range []struct {
		name, dir, cursor, from string
		want                    int
		err                     string
	}{
		{name: "cursor at the tip", cursor: commits[3], want: 0},
		{name: "cursor behind", cursor: commits[1], want: 2},
		{name: "cursor at the root", cursor: commits[0], want: 3},
		{name: "no cursor: every commit, the root too", want: 4},
		{name: "no cursor, from a commit: it too", from: commits[2], want: 2},
		{name: "no cursor, from the tip", from: commits[3], want: 1},
		{name: "cursor off the branch (a force push)", cursor: strings.Repeat("ab", 20), err: "not on the branch's first-parent history"},
		{name: "no branch yet, nothing processed", dir: empty.Dir, want: 0},
		{name: "no branch, a cursor", dir: empty.Dir, cursor: commits[0], err: "reference not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir
			if dir == "" {
				dir = repo.Dir
			}
			got, err := metrics.BranchLag(context.Background(), dir, main, c.cursor, c.from)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("BranchLag = %d, %v; want an error containing %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("BranchLag = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}
