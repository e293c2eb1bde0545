package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/metrics"
	"github.com/cuecast/cuecast/tailer"
)

// fixedTailer is a tailer whose stored state is st; the zero one also
// stands where only a configured tailer matters (tailerView reads the
// state from the snapshot).
type fixedTailer struct{ st tailer.State }

func (f fixedTailer) State(context.Context) (tailer.State, error) { return f.st, nil }

// TestLagCountsCommitsBeforeTheFirstCursor: the commits waiting show in
// cuecast_tailer_lag_commits even while the tailer has no cursor, because
// it never finished its first commit (the store refused the cursor's
// write, or the serve stopped before it). The gauge was left out then, so
// an alert on it never fired for a pipeline stuck on its first commit
// (TestSoakCombinedFaults, when the disk filled before the first cursor).
func TestLagCountsCommitsBeforeTheFirstCursor(t *testing.T) {
	repo := gittest.New(t)
	var commits []string
	for i := range 3 {
		commits = append(commits, repo.Commit(fmt.Sprint("commit ", i)))
	}
	lag := func(ctx context.Context, cursor, from string) (int, error) {
		return metrics.BranchLag(ctx, repo.Dir, plumbing.NewBranchReferenceName("main"), cursor, from)
	}
	for _, c := range []struct {
		name string
		st   tailer.State
		want string
	}{
		{"no cursor", tailer.State{}, "cuecast_tailer_lag_commits 3"},
		{"no cursor, from the second commit", tailer.State{From: commits[1]}, "cuecast_tailer_lag_commits 2"},
		{"a cursor", tailer.State{Cursor: commits[1]}, "cuecast_tailer_lag_commits 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Options{Fleet: fakeFleet{}, Tailer: fixedTailer{c.st}, Lag: lag})
			if err != nil {
				t.Fatal(err)
			}
			s.Sample(t.Context())
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if !strings.Contains(rec.Body.String(), c.want+"\n") {
				t.Errorf("/metrics lacks %q:\n%s", c.want, grepLines(rec.Body.String(), "cuecast_tailer"))
			}
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
