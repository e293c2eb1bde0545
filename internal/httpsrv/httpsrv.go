// Package httpsrv builds cuecast's HTTP servers (serve's --http and
// --ofrep, the agent's --ofrep and --metrics) with the limits that keep a
// client from holding the process's goroutines and file descriptors: any
// user of a node host can connect to the agent's loopback ports, and a
// server without them keeps every connection a slowloris client opens for
// as long as it likes. The numbers are in docs/SECURITY.md.
//
//	srv := httpsrv.New(h, httpsrv.Limits{}, log) // the defaults
//	go srv.Serve(ln)
//	defer srv.Shutdown(ctx)
package httpsrv

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/cuecast/cuecast/internal/reqbody"
)

// The defaults of Limits.
const (
	// DefaultMaxConns is how many connections a listener serves at once;
	// more wait in the listen queue.
	DefaultMaxConns = 512
	// DefaultReadHeaderTimeout is how long a request's headers have to
	// arrive.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultWriteTimeout is how long each write of a reply may wait for
	// the client to read.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxHeaderBytes bounds a request's headers; cuecast's largest
	// are a token or two.
	DefaultMaxHeaderBytes = 64 << 10
)

// Limits bound what one client can hold. A zero field takes its default.
//
// There is no whole-request read timeout (http.Server.ReadTimeout): a
// deadline left on the connection while a handler works cancels the
// request's context; BodyTimeout bounds the body instead (reqbody.Bound).
// And no whole-reply write timeout either: WriteTimeout bounds each write,
// so that an event stream lives as long as its client reads it, and a
// handler that takes a while (a set that pushes) still gets its answer out.
type Limits struct {
	// MaxConns is how many connections each listener serves at once.
	MaxConns int
	// ReadHeaderTimeout bounds the arrival of a request's headers.
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the arrival of a request's body
	// (reqbody.DefaultTimeout).
	BodyTimeout time.Duration
	// WriteTimeout bounds each write of a reply, from when the handler
	// starts or last wrote.
	WriteTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection's wait for its next
	// request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers; more is a 431.
	MaxHeaderBytes int
}

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.BodyTimeout, reqbody.DefaultTimeout)
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return l
}

// Server is an http.Server whose Serve caps the listener's connections.
type Server struct {
	*http.Server
	maxConns int
	log      *slog.Logger
}

// New returns a server for h under lim, logging to log (nil: nowhere).
// Set BaseContext, ConnState and the like on the http.Server before Serve.
func New(h http.Handler, lim Limits, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lim = lim.withDefaults()
	return &Server{
		Server: &http.Server{
			Handler:           writeBound(reqbody.Bound(h, lim.BodyTimeout), lim.WriteTimeout),
			ReadHeaderTimeout: lim.ReadHeaderTimeout,
			IdleTimeout:       lim.IdleTimeout,
			MaxHeaderBytes:    lim.MaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		maxConns: lim.MaxConns,
		log:      log,
	}
}

// Serve serves on ln, at most MaxConns connections at once, until the
// server is shut down or closed; it returns http.Server.Serve's error.
func (s *Server) Serve(ln net.Listener) error {
	return s.Server.Serve(&limitListener{
		Listener: ln,
		slots:    make(chan struct{}, s.maxConns),
		closed:   make(chan struct{}),
		log:      s.log,
	})
}

// limitListener hands out a connection only while fewer than cap(slots)
// are open. It accepts the next connection before it waits for a slot, so
// that it logs only when a client really waits; the others wait in the
// kernel's listen queue, holding no goroutine.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	log       *slog.Logger
	lastFull  time.Time // only Accept's goroutine touches it
}

func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	default:
		// Once a minute at most: a client that keeps the listener full
		// would otherwise write a line per connection it frees.
		if now := time.Now(); now.Sub(l.lastFull) >= time.Minute {
			l.lastFull = now
			l.log.Warn("http connection limit reached; new connections wait until one closes",
				"addr", l.Addr().String(), "max_conns", cap(l.slots), "waiting", c.RemoteAddr().String())
		}
		select {
		case l.slots <- struct{}{}:
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		}
	}
	return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn frees its slot when closed (once, however often net/http
// closes it).
type limitConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// CloseWrite keeps net/http's graceful close: a reply with
// "Connection: close" to a request whose body was not read (reqbody) is
// followed by a half-close, so that the client reads the reply instead of
// a reset.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// writeBound gives each write of h's replies d to complete, from the
// handler's start and again at each write and flush.
func writeBound(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
		dw.extend()
		h.ServeHTTP(dw, r)
		// net/http writes the reply's buffered end after the handler
		// returns, however long the handler took.
		dw.extend()
	})
}

type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

// extend moves the write deadline to d from now; a writer without
// deadlines (a test's recorder) has none.
func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// Flush keeps event streams flushing (handlers assert http.Flusher).
func (w *deadlineWriter) Flush() {
	w.extend()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
