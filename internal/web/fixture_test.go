package web_test

import (
	"bufio"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/web"
)

const checkout = cuecast.ConfigPath("payments/checkout")

// fixture is a running pipeline with its operations server, over a copy of
// configs-example in a real Git repository; under natstest.BothModes' tree
// mode, on a tree's hub whose region summarises the instances' reports.
type fixture struct {
	t    *testing.T
	repo *gittest.Repo
	p    *pipeline.Pipeline
	fl   *natstest.Fleet
	base string // http://host:port
}

type fixtureOptions struct {
	policies rollout.Policies
	token    string
	// log, when set, receives the pipeline's logs instead of the test's
	// output (warnings only there).
	log slog.Handler
	// interval is the tailer's poll interval; default pipelinetest.Interval.
	interval      time.Duration
	webhookSecret string
	// sampleInterval is the dashboard's sampling interval; default 50ms.
	sampleInterval time.Duration
	// ofrepTokens serves OFREP (web.Options.OFREPTokens).
	ofrepTokens *ofrep.Tokens
	// httpHosts are serve's --http-host names.
	httpHosts []string
}

// inBothModes runs test in parallel in each of natstest.BothModes' modes,
// on a fixture of that mode started with o.
func inBothModes(t *testing.T, o fixtureOptions, test func(t *testing.T, f *fixture)) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		test(t, start(t, o))
	})
}

func start(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	repo := gittest.New(t)
	repo.CopyDir(filepath.Join("..", "..", "configs-example"))
	repo.Commit("initial configs")
	if o.policies == nil {
		o.policies = rollout.Static{}
	}
	if o.sampleInterval == 0 {
		o.sampleInterval = 50 * time.Millisecond
	}
	if o.log == nil {
		o.log = slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})
	}
	// Instances report every second on a tree; a single server keeps
	// serve's 15 s.
	p, fl := pipelinetest.RunInMode(t, pipeline.Config{
		Repo:           repo.Dir,
		Interval:       o.interval,
		WebhookSecret:  o.webhookSecret,
		HTTP:           "127.0.0.1:0",
		HTTPHosts:      o.httpHosts,
		OperatorToken:  o.token,
		SampleInterval: o.sampleInterval,
		OFREPTokens:    o.ofrepTokens,
		Policies:       o.policies,
		Logger:         slog.New(o.log),
	}, natstest.FleetOptions{Namespaces: []string{"payments", "search", "growth"}, Heartbeat: time.Second, Logger: slog.New(o.log)})
	return &fixture{t: t, repo: repo, p: p, fl: fl, base: "http://" + p.HTTPAddr()}
}

// watch starts a service instance watching cfg.
func (f *fixture) watch(cfg cuecast.ConfigPath, id string, opts ...client.Option) *client.Watcher {
	f.t.Helper()
	nc := f.fl.Instance(f.t, cfg.Namespace())
	opts = append(f.fl.ClientOptions(cfg.Namespace()), opts...)
	w := natstest.Watch(f.t, nc, cfg, append([]client.Option{client.WithInstance(id), client.WithTrustedKeys(f.p.PublicKey)}, opts...), client.LastKnownGood(filepath.Join(f.t.TempDir(), id+".lkg")))
	return w
}

// setAmount commits a new max_amount_minor for payments/checkout.
func (f *fixture) setAmount(amount string) string {
	f.t.Helper()
	path := filepath.Join(f.repo.Dir, "payments", "checkout", "checkout.cue")
	b, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "max_amount_minor:") {
			line = "max_amount_minor: " + amount
		}
		out = append(out, line)
	}
	return f.repo.CommitFiles("checkout: max amount "+amount, map[string]string{
		"payments/checkout/checkout.cue": strings.Join(out, "\n"),
	})
}

// scrape reads /metrics in the text format into "name{labels}" ▶ value.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %s", res.Status)
	}
	return parseMetrics(t, res.Body)
}

// scrapeServer reads srv's /metrics, as scrape does.
func scrapeServer(t *testing.T, srv *web.Server) map[string]float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d", rec.Code)
	}
	return parseMetrics(t, rec.Body)
}

// parseMetrics reads the text format into "name{labels}" ▶ value.
func parseMetrics(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape: bad line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
