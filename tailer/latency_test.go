package tailer_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/tailer"
)

// BenchmarkCommitToPublished measures the time from a commit landing in a
// local repository to its version arriving on the core subject subscribers
// listen on: woken by a signed GitHub webhook (through the real handler over
// loopback HTTP), and found by polling at the default 1 s interval.
// `go test -run '^$' -bench CommitToPublished -benchtime 20x ./tailer/`.
func BenchmarkCommitToPublished(b *testing.B) {
	for _, mode := range []string{"webhook", "poll-1s"} {
		b.Run(mode, func(b *testing.B) {
			e := &env{t: b, ctx: b.Context(), log: slog.New(slog.DiscardHandler), repo: gittest.New(b)}
			e.connect(natstest.Start(b))
			r := e.repo
			r.CommitFiles("initial", baseRepo())
			sub, err := e.nc.SubscribeSync("ccr.pay.v.b")
			if err != nil {
				b.Fatal(err)
			}
			tl := e.tailer(tailer.Config{Interval: map[string]time.Duration{"webhook": time.Hour, "poll-1s": time.Second}[mode]})
			go tl.Run(b.Context())
			nextVersion(b, sub, 1)

			const secret = "bench"
			srv := httptest.NewServer(tailer.WebhookHandler(secret, tl))
			b.Cleanup(srv.Close)
			body := `{"ref":"refs/heads/main"}`

			var lat []time.Duration
			b.ResetTimer()
			for i := range b.N {
				r.CommitFiles("b", map[string]string{"pay/b/b.cue": config("b", false, i+2)})
				start := time.Now()
				if mode == "webhook" {
					req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
					req.Header.Set("X-GitHub-Event", "push")
					req.Header.Set("X-Hub-Signature-256", sign(secret, body))
					resp, err := http.DefaultClient.Do(req)
					if err != nil || resp.StatusCode != http.StatusAccepted {
						b.Fatalf("webhook: %v %v", resp, err)
					}
					resp.Body.Close()
				}
				nextVersion(b, sub, uint64(i+2))
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
			b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
		})
	}
}
