package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/hostcheck"
	"github.com/cuecast/cuecast/internal/httpsrv"
)

// Front answers on the operations server's address from the moment the
// process binds it, before there is a Server to answer with. A serve can
// spend minutes starting (its embedded store read back, a remote
// repository cloned), and a port that takes connections but never answers
// times every health check out: a liveness check then restarts serve into
// the same start, for ever. Until Open, /healthz answers 200 (the process
// runs and is getting on) and every other path 503 naming what the start
// waits for; after, the Server answers.
//
// It answers only requests whose Host its hostcheck.Allow allows, before
// and after Open: on a loopback address, a web page whose name an attacker
// re-resolves to 127.0.0.1 would otherwise be same-origin with the
// dashboard and read every config, flag set and the audit log.
type Front struct {
	log   *slog.Logger
	hosts *hostcheck.Allow
	// ofrepOnly: the Front of an OFREP listener (NewOFREPFront).
	ofrepOnly bool
	// limits bound Serve's connections (Limit); tests shorten them.
	limits httpsrv.Limits
	phase  atomic.Pointer[string]
	s      atomic.Pointer[Server]
}

// NewFront returns a Front that says the process is starting and answers
// the requests hosts allows (hostcheck.ForBind; nil: any Host).
func NewFront(log *slog.Logger, hosts *hostcheck.Allow) *Front {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Front{log: log, hosts: hosts}
	f.Starting("starting")
	return f
}

// NewOFREPFront returns a Front, like NewFront's, that serves OFREP alone
// (Options.OFREPListener): the Server's /ofrep/ routes once open, OFREP's
// "not ready" before, and 404 to every other path.
func NewOFREPFront(log *slog.Logger, hosts *hostcheck.Allow) *Front {
	f := NewFront(log, hosts)
	f.ofrepOnly = true
	return f
}

// Limit sets the bounds Serve puts on connections and requests (zero
// fields: httpsrv's defaults). Call it before Serve.
func (f *Front) Limit(lim httpsrv.Limits) { f.limits = lim }

// Starting names what the start waits for now; the 503s say it.
func (f *Front) Starting(what string) { f.phase.Store(&what) }

// Open hands every request from now on to s.
func (f *Front) Open(s *Server) {
	f.s.Store(s)
	f.log.Info("http open", "operator_actions", s.o.OperatorToken != "")
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	// The health endpoints answer any Host: they say nothing a page could
	// use, and a probe's Host is the address it dialled (Kubernetes: the
	// pod's), which --http-host does not list.
	health := !f.ofrepOnly && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz")
	if !health && !f.hosts.Allows(r.Host) {
		misdirected(w, r, f.hosts)
		return
	}
	if f.ofrepOnly {
		f.serveOFREP(w, r)
		return
	}
	if s := f.s.Load(); s != nil {
		s.mux.ServeHTTP(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/ofrep/") {
		// OFREP's callers are SDKs, which read OFREP's errors, not a 503.
		ofrep.NotReady(w, r, "starting: "+*f.phase.Load())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Retry-After", "5")
	if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
		fmt.Fprintln(w, "ok (starting: "+*f.phase.Load()+")")
		return
	}
	http.Error(w, "not ready: starting: "+*f.phase.Load(), http.StatusServiceUnavailable)
}

// serveOFREP answers an OFREP listener's request.
func (f *Front) serveOFREP(w http.ResponseWriter, r *http.Request) {
	s := f.s.Load()
	switch {
	case !strings.HasPrefix(r.URL.Path, "/ofrep/") || (s != nil && s.flags == nil):
		http.NotFound(w, r)
	case s == nil:
		ofrep.NotReady(w, r, "starting: "+*f.phase.Load())
	default:
		s.flags.handler.ServeHTTP(w, r)
	}
}

// misdirected refuses a request to a Host that hosts does not allow: 421,
// naming the names it answers and the flag that adds one; in OFREP's words
// to an OFREP caller.
func misdirected(w http.ResponseWriter, r *http.Request, hosts *hostcheck.Allow) {
	msg := fmt.Sprintf("host %q: this server answers requests to %s only; if that is its name, add it with serve --http-host NAME",
		r.Host, hosts.Names())
	if strings.HasPrefix(r.URL.Path, "/ofrep/") {
		ofrep.Error(w, r, http.StatusMisdirectedRequest, msg)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	http.Error(w, msg, http.StatusMisdirectedRequest)
}

// Serve serves on ln until ctx is done, then shuts down, giving open
// requests (event streams end at once) a few seconds. It closes ln. It
// returns the listener's error, or nil after a shutdown caused by ctx.
func (f *Front) Serve(ctx context.Context, ln net.Listener) error {
	hs := httpsrv.New(f, f.limits, f.log)
	hs.BaseContext = func(net.Listener) context.Context { return ctx }
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	f.log.Info("http serving", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}
