// Package web is the operations server of `cuecast serve`: Prometheus metrics
// at /metrics, /healthz and /readyz for the process itself, GitHub webhooks at
// /hooks/github, and a dashboard at / that shows every config's version,
// rollout and coverage, and updates itself with server-sent events. Its
// per-instance page, /instances/<config>, asks the summarised regions for
// their instances' reports when opened (Options.Regions, drilldown.go), as a
// config page asks for the instances its rollout's stages name: one
// drill-down at a time per config and page, its answer shared until the next
// sample, and at most Options.MaxDrillDowns in flight over the whole server.
//
//	ln, err := net.Listen("tcp", "127.0.0.1:8080")
//	front := web.NewFront(log, hostcheck.LoopbackOnly())
//	go front.Serve(ctx, ln)                    // answers at once: 503 "starting"
//	srv, err := web.New(web.Options{Fleet: dist, Rollouts: ctrl, Metrics: m, Logger: log})
//	front.Open(srv)                            // srv answers from now on
//	go srv.Run(ctx)                            // samples the fleet every Interval
//
// The dashboard is read-only unless Options.OperatorToken is set; then the
// rollout actions (advance, halt, resume, rollback) accept requests carrying
// "Authorization: Bearer <token>", and the rollout controller audits each one.
// Without a token, or with a wrong one, they answer 401 and change nothing.
//
// Everything the pages show comes from one sampler: every Interval it reads
// the distributor's Status and reports, the tailer's State and the rollout
// records once, feeds the metrics, and wakes the open event streams. The
// pages, styles and script are embedded in the binary and load nothing from
// elsewhere, so the dashboard works offline. A Server is safe for concurrent
// use.
package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/metrics"
	"github.com/cuecast/cuecast/tailer"
)

//go:embed static
var static embed.FS

// Fleet is what the server reads of the distributor.
type Fleet interface {
	// StatusAndReports, not StatusWith and Reports: a sample's counts
	// and its lists of instances come from one read of the fleet.
	StatusAndReports(ctx context.Context, intents distributor.Intents, cfgs ...cuecast.ConfigPath) ([]distributor.ConfigStatus, []cuecast.Report, error)
	Reports(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Report, error)
	Versions(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Version, error)
}

// Regions is what the server asks of the regions that summarise their
// instances' reports (docs/SCALING.md): each instance's own report, on
// demand, for the per-instance page (distributor.Distributor.DetailByRegion,
// as `cuecast status --instances` asks it).
type Regions interface {
	DetailByRegion(ctx context.Context, cfg cuecast.ConfigPath, req distributor.DetailRequest) ([]distributor.RegionDetail, error)
}

// Tailer is what the server reads of the tailer.
type Tailer interface {
	State(ctx context.Context) (tailer.State, error)
}

// Rollouts is what the server reads of the rollout controller.
type Rollouts interface {
	Records(ctx context.Context) ([]rollout.Record, error)
	Audit(ctx context.Context, cfg cuecast.ConfigPath) ([]rollout.AuditEntry, error)
}

// Options configures a Server. Fleet is required; every other part is
// optional and its panel is left out without it.
type Options struct {
	Fleet    Fleet
	Tailer   Tailer
	Rollouts Rollouts
	// Regions, when set, serves the per-instance page /instances/<config>,
	// which asks the summarised regions for their instances' reports;
	// without it the page lists the reports held here only.
	Regions Regions
	// DetailTimeout is how long that page waits for the regions to
	// answer; default 5s (as status --instances).
	DetailTimeout time.Duration
	// StagesTimeout is how long a config page waits for the regions to
	// count the instances its rollout's stages name or select, at most
	// DetailTimeout; default 2s: a live page, redrawn every sample, is
	// not held up as long as the per-instance page may be.
	StagesTimeout time.Duration
	// MaxDrillDowns caps the drill-downs into the regions this server
	// has in flight at once, over every page and config (the
	// per-instance pages and the config pages' named stages); one past
	// the cap waits for one to end, at most as long as it would wait for
	// the regions, and says so if none does. Default 4.
	MaxDrillDowns int
	// Operator performs the rollout actions; without it (or without
	// OperatorToken) the action endpoints answer 401.
	Operator Operator
	// OperatorToken enables the operator actions for requests that carry it
	// as a bearer token.
	OperatorToken string
	// ReportFeed, when set, calls f with the subject and body of every
	// report as instances publish it (NATSReports), until ctx is done:
	// propagation is then timed by report arrival instead of by sample.
	// Without it, by sample. A report whose body disagrees with its
	// subject is dropped and counted (distributor.DecodeReport).
	ReportFeed func(ctx context.Context, f func(subject string, data []byte)) error
	// Lag counts the commits the tailer has still to process: the
	// first-parent commits from the branch tip down to cursor, or with no
	// cursor yet down to from or the root, inclusive (metrics.BranchLag);
	// nil leaves the tailer lag unknown.
	Lag func(ctx context.Context, cursor, from string) (int, error)
	// Metrics receives the samples; nil creates one.
	Metrics *metrics.Metrics
	// Webhook is mounted at /hooks/github when set.
	Webhook http.Handler
	// Ready reports whether the process can serve (NATS connected,
	// JetStream answering); nil means ready once the first sample succeeded.
	Ready func(ctx context.Context) error
	// CommitURL links a commit to its page (GitHub); nil: no links.
	CommitURL func(sha string) string
	// OFREPTokens, when set, serves OFREP at /ofrep/v1/ (flags/ofrep) over
	// the version of every flag set the fleet is meant to run (the newest
	// published, unless a rollback or a halt moves it back), to requests
	// carrying a token that reads the flag's namespace; nil serves no
	// OFREP. The sets follow within a sample (Interval).
	OFREPTokens *ofrep.Tokens
	// OFREPListener serves OFREP only on a listener of its own (NewOFREPFront)
	// and leaves /ofrep/ out of the operations server: OFREP's callers
	// then reach the flags their tokens allow without reaching the
	// dashboard's reads, which take no token.
	OFREPListener bool
	// Mutator, with OperatorToken or Tokens, serves the API changing
	// values (POST /api/set, /api/flags/set; set.go, docs/CHANGING.md).
	Mutator Setter
	// Tokens may change the configs of their namespaces through that API.
	Tokens []Token
	// Interval is how often the fleet is sampled; default 1s.
	Interval time.Duration
	Logger   *slog.Logger
}

// Server is the operations server.
type Server struct {
	o       Options
	log     *slog.Logger
	metrics *metrics.Metrics
	mux     *http.ServeMux
	token   [32]byte // SHA-256 of the operator token, compared in constant time

	sampling sync.Mutex
	mu       sync.Mutex
	snap     *snapshot
	changed  chan struct{} // closed and replaced on every new snapshot
	vcache   map[cuecast.ConfigPath]versionList
	poke     chan struct{} // asks Run for a sample now
	live     *liveFleet
	acache   map[cuecast.ConfigPath]auditCache
	flags    *publishedFlags // nil without Options.OFREPTokens
	// drills holds a token per drill-down in flight (Options.MaxDrillDowns).
	drills chan struct{}
	// insts and staged are each config's drill-downs: its per-instance
	// page's, and its config page's for the named stages.
	insts  *drillTurns[instancesView]
	staged *drillTurns[stagedReports]
	// haltsPrimed: the halts found by the first rollout sample were
	// remembered without being counted (sampling is serialized).
	haltsPrimed bool
	// limit is the next sample's time limit (Sample; sampling guards it).
	limit time.Duration
}

// New checks o and builds the server's routes. It starts nothing: call Run to
// sample and Serve (or Handler) to serve.
func New(o Options) (*Server, error) {
	if o.Fleet == nil {
		return nil, errors.New("new web server: a Fleet is required")
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.DetailTimeout <= 0 {
		o.DetailTimeout = 5 * time.Second
	}
	if o.StagesTimeout <= 0 {
		o.StagesTimeout = stagedTimeout
	}
	if o.MaxDrillDowns <= 0 {
		o.MaxDrillDowns = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(metrics.Options{})
	}
	s := &Server{o: o, log: o.Logger, metrics: o.Metrics, changed: make(chan struct{}),
		vcache: map[cuecast.ConfigPath]versionList{}, poke: make(chan struct{}, 1), live: newLiveFleet(),
		acache: map[cuecast.ConfigPath]auditCache{}, drills: make(chan struct{}, o.MaxDrillDowns)}
	s.insts, s.staged = newDrillTurns[instancesView](s), newDrillTurns[stagedReports](s)
	if o.OperatorToken != "" {
		s.token = sha256.Sum256([]byte(o.OperatorToken))
	}
	o.Metrics.OnPublish(func(v cuecast.Version) {
		// The fleet at the moment of publication starts the version's series.
		s.observePropagation(time.Now(), v.Config, v)
	})
	sub, err := fs.Sub(static, "static")
	if err != nil {
		return nil, fmt.Errorf("new web server: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.Metrics.Handler())
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(sub)))
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /configs/{path...}", s.page)
	mux.HandleFunc("GET /instances/{path...}", s.instancesPage)
	mux.HandleFunc("GET /api/overview", s.apiOverview)
	mux.HandleFunc("GET /api/configs/{path...}", s.apiConfig)
	mux.HandleFunc("GET /api/chart/{path...}", s.apiChart)
	mux.HandleFunc("GET /api/versions/{path...}", s.apiVersion)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("POST /api/rollouts/{action}/{path...}", s.action)
	mux.HandleFunc("POST /api/set", s.apiSet)
	mux.HandleFunc("POST /api/flags/set", s.apiFlagSet)
	if o.Webhook != nil {
		mux.Handle("/hooks/github", o.Webhook)
	}
	if o.OFREPTokens != nil {
		if s.flags, err = newPublishedFlags(o.OFREPTokens); err != nil {
			return nil, fmt.Errorf("new web server: %w", err)
		}
		if !o.OFREPListener {
			mux.Handle("/ofrep/", s.flags.handler)
		}
	}
	s.mux = mux
	return s, nil
}

// Handler serves every route.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		s.mux.ServeHTTP(w, r)
	})
}

// frameAncestors ends every Content-Security-Policy the server sends: no
// other site may frame a page, so none can lay the operator actions and edit
// panels under its own buttons (clickjacking).
const frameAncestors = "frame-ancestors 'none'"

// setSecurityHeaders puts on every response, before any handler runs, what
// no route may go without: no framing (X-Frame-Options for the browsers
// that ignore frame-ancestors) and no sniffing of a JSON or text body into
// HTML or script. The pages replace the policy with their own, which ends
// with frameAncestors too.
func setSecurityHeaders(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", frameAncestors)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz is 200 when Options.Ready passes and a fleet sample succeeded
// recently (staleAfter); 503 with the reason otherwise.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.o.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.o.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	snap, _ := s.current()
	switch {
	case snap == nil:
		http.Error(w, "not ready: no fleet sample yet", http.StatusServiceUnavailable)
		return
	case snap.err != "":
		http.Error(w, "not ready: "+snap.err, http.StatusServiceUnavailable)
		return
	case time.Since(snap.ok) > s.staleAfter(snap):
		http.Error(w, fmt.Sprintf("not ready: last good fleet sample %s ago", time.Since(snap.ok).Round(time.Millisecond)),
			http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// staleAfter is how old the last good sample may be, after snap, before
// readyz says the fleet is not being sampled: five intervals and 5 s, and
// three times as long as snap took more, since Run waits twice as long as
// a sample took before the next, which takes as long again. Samples slower
// than the first rule allows (a large fleet, a loaded box) are not the
// sampler stuck (TestSampleOutlastsItsLimit).
func (s *Server) staleAfter(snap *snapshot) time.Duration {
	return 5*s.o.Interval + 5*time.Second + 3*snap.took
}

// authorized reports whether r carries the operator token.
func (s *Server) authorized(r *http.Request) bool {
	if s.o.OperatorToken == "" {
		return false
	}
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(h[len(prefix):]))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}
