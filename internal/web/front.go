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
	"github.com/cuecast/cuecast/internal/reqbody"
)

// Front answers on the operations server's address from the moment the
// process binds it, before there is a Server to answer with. A serve can
// spend minutes starting (its embedded store read back, a remote
// repository cloned), and a port that takes connections but never answers
// times every health check out: a liveness check then restarts serve into
// the same start, for ever. Until Open, /healthz answers 200 (the process
// runs and is getting on) and every other path 503 naming what the start
// waits for; after, the Server answers.
type Front struct {
	log *slog.Logger
	// bodyTimeout bounds the reading of each request's body
	// (reqbody.Bound); tests shorten it.
	bodyTimeout time.Duration
	phase       atomic.Pointer[string]
	s           atomic.Pointer[Server]
}

// NewFront returns a Front that says the process is starting.
func NewFront(log *slog.Logger) *Front {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Front{log: log, bodyTimeout: reqbody.DefaultTimeout}
	f.Starting("starting")
	return f
}

// Starting names what the start waits for now; the 503s say it.
func (f *Front) Starting(what string) { f.phase.Store(&what) }

// Open hands every request from now on to s.
func (f *Front) Open(s *Server) {
	f.s.Store(s)
	f.log.Info("http open", "operator_actions", s.o.OperatorToken != "")
}

func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
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

// Serve serves on ln until ctx is done, then shuts down, giving open
// requests (event streams end at once) a few seconds. It closes ln. It
// returns the listener's error, or nil after a shutdown caused by ctx.
func (f *Front) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           reqbody.Bound(f, f.bodyTimeout),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(f.log.Handler(), slog.LevelWarn),
	}
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
