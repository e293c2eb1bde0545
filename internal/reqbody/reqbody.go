// Package reqbody bounds how long an HTTP server waits for request bodies.
//
// A server that sets only ReadHeaderTimeout waits for a body as long as the
// client likes, and net/http reads whatever body a handler left unread
// before it writes the reply (so that the connection can serve the next
// request): a client that announces 100 bytes and sends one holds the
// connection, and gets no answer, even when the handler refused it at
// once. Bound puts a deadline on reading each body, and marks a reply
// written before its body was read "Connection: close", which makes
// net/http answer at once and drop the connection instead of reading on.
//
// Not http.Server.ReadTimeout: a deadline still set once the body is in
// would end the server's background read of the connection, and that
// cancels the request's context while the handler works.
package reqbody

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultTimeout is how long Bound's callers give a body to arrive: far
// more than a client on any working network needs for the small bodies
// cuecast's servers take.
const DefaultTimeout = 10 * time.Second

// Bound returns h with each request's body given timeout (DefaultTimeout
// when not positive) from the start of the handler to arrive in full; a
// read past it fails (os.ErrDeadlineExceeded) and the connection is closed
// after the reply. A reply written before the body was read to its end
// closes the connection. Requests without a body pass through untouched,
// so long-lived responses (event streams) are not affected.
func Bound(h http.Handler, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &bound{h: h, timeout: timeout}
}

type bound struct {
	h       http.Handler
	timeout time.Duration
}

func (b *bound) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		b.h.ServeHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	// A writer without deadlines (a test's recorder) reads without a bound,
	// as before.
	_ = rc.SetReadDeadline(time.Now().Add(b.timeout))
	body := &body{ReadCloser: r.Body, rc: rc}
	// A copy: the server goes on seeing its own body (an unread
	// Expect: 100-continue body still closes the connection).
	r = r.WithContext(r.Context())
	r.Body = body
	b.h.ServeHTTP(&writer{ResponseWriter: w, body: body}, r)
}

// body notes when the request body has been read to its end or failed.
type body struct {
	io.ReadCloser
	rc   *http.ResponseController
	done atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.done.CompareAndSwap(false, true) && err == io.EOF {
		// The body is in: the server now reads the connection in the
		// background to see the client leave, and a deadline left set
		// would end that read and cancel the request's context.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// writer closes the connection after a reply written before its request's
// body was read.
type writer struct {
	http.ResponseWriter
	body  *body
	wrote bool
}

func (w *writer) WriteHeader(code int) {
	if code >= 200 {
		w.closeUnlessRead()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *writer) Write(p []byte) (int, error) {
	w.closeUnlessRead()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *writer) closeUnlessRead() {
	if w.wrote {
		return
	}
	w.wrote = true
	if !w.body.done.Load() {
		// net/http then neither reads the rest of the body nor waits for it.
		w.Header().Set("Connection", "close")
	}
}
