package tailer_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cuecast/cuecast/tailer"
)

type countingWaker struct{ n atomic.Int32 }

func (w *countingWaker) Wake()          { w.n.Add(1) }
func (w *countingWaker) Branch() string { return "main" }

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestWebhookHandler(t *testing.T) {
	t.Parallel()
	const secret = "s3cret"
	push := `{"ref":"refs/heads/main","after":"abc"}`
	tests := []struct {
		name   string
		method string
		secret string // of the handler
		event  string
		body   string
		sig    string
		code   int
		wakes  int32
	}{
		{name: "push", event: "push", body: push, sig: sign(secret, push), code: http.StatusAccepted, wakes: 1},
		{name: "push without ref", event: "push", body: `{}`, sig: sign(secret, `{}`), code: http.StatusAccepted, wakes: 1},
		{name: "push to another branch", event: "push", body: `{"ref":"refs/heads/dev"}`, sig: sign(secret, `{"ref":"refs/heads/dev"}`), code: http.StatusNoContent},
		{name: "ping", event: "ping", body: `{}`, sig: sign(secret, `{}`), code: http.StatusNoContent},
		{name: "missing signature", event: "push", body: push, code: http.StatusUnauthorized},
		{name: "wrong secret", event: "push", body: push, sig: sign("other", push), code: http.StatusUnauthorized},
		{name: "tampered body", event: "push", body: push + " ", sig: sign(secret, push), code: http.StatusUnauthorized},
		{name: "sha1 header form", event: "push", body: push, sig: strings.Replace(sign(secret, push), "sha256=", "sha1=", 1), code: http.StatusUnauthorized},
		{name: "not hex", event: "push", body: push, sig: "sha256=zz", code: http.StatusUnauthorized},
		{name: "no secret configured", secret: "-", event: "push", body: push, sig: sign("", push), code: http.StatusForbidden},
		{name: "GET", method: http.MethodGet, code: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &countingWaker{}
			s := secret
			if tt.secret == "-" {
				s = ""
			}
			h := tailer.WebhookHandler(s, w)
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			req := httptest.NewRequest(method, "/hooks/github", strings.NewReader(tt.body))
			req.Header.Set("X-GitHub-Event", tt.event)
			if tt.sig != "" {
				req.Header.Set("X-Hub-Signature-256", tt.sig)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.code || w.n.Load() != tt.wakes {
				t.Errorf("got status %d and %d wakes, want %d and %d", rec.Code, w.n.Load(), tt.code, tt.wakes)
			}
		})
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestWebhookRejectsBeforeReading: an unsigned request, an event that does
// nothing, and a push declaring a large body are answered without reading
// the body (it used to be read up to 25 MiB before the signature check).
func TestWebhookRejectsBeforeReading(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 8<<20)
	for _, tc := range []struct {
		name, event, sig string
		length           int64
		code             int
	}{
		{"unsigned push", "push", "", -1, http.StatusUnauthorized},
		{"signed other event", "issues", sign("s3cret", big), -1, http.StatusNoContent},
		{"push declared over 1 MiB", "push", sign("s3cret", big), int64(len(big)), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &countingWaker{}
			body := &countingReader{r: strings.NewReader(big)}
			req := httptest.NewRequest(http.MethodPost, "/hooks/github", body)
			req.ContentLength = tc.length
			req.Header.Set("X-GitHub-Event", tc.event)
			if tc.sig != "" {
				req.Header.Set("X-Hub-Signature-256", tc.sig)
			}
			rec := httptest.NewRecorder()
			tailer.WebhookHandler("s3cret", w).ServeHTTP(rec, req)
			if rec.Code != tc.code || body.n.Load() != 0 || w.n.Load() != 0 {
				t.Errorf("status %d, %d bytes read, %d wakes; want %d, nothing read, no wake", rec.Code, body.n.Load(), w.n.Load(), tc.code)
			}
		})
	}
	// Without a declared length, reading stops at 1 MiB.
	w := &countingWaker{}
	body := &countingReader{r: strings.NewReader(big)}
	req := httptest.NewRequest(http.MethodPost, "/hooks/github", body)
	req.ContentLength = -1
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", sign("s3cret", big))
	rec := httptest.NewRecorder()
	tailer.WebhookHandler("s3cret", w).ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || body.n.Load() > 2<<20 || w.n.Load() != 0 {
		t.Errorf("chunked 8 MiB push: status %d, %d bytes read; want 413 after at most ~1 MiB", rec.Code, body.n.Load())
	}
}

// TestWebhookRefusesReplay: a signed delivery sent again (same delivery ID,
// or the same signed body under a new ID) wakes nothing.
func TestWebhookRefusesReplay(t *testing.T) {
	t.Parallel()
	w := &countingWaker{}
	h := tailer.WebhookHandler("s3cret", w)
	send := func(delivery, body string) int {
		req := httptest.NewRequest(http.MethodPost, "/hooks/github", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", sign("s3cret", body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	p1 := `{"ref":"refs/heads/main","after":"a1"}`
	p2 := `{"ref":"refs/heads/main","after":"a2"}`
	for i, tc := range []struct {
		delivery, body string
		code           int
	}{
		{"d1", p1, http.StatusAccepted},
		{"d1", p1, http.StatusConflict}, // replayed as is
		{"d9", p1, http.StatusConflict}, // same signed body, new ID
		{"d1", p2, http.StatusConflict}, // known ID
		{"d2", p2, http.StatusAccepted},
	} {
		if got := send(tc.delivery, tc.body); got != tc.code {
			t.Errorf("delivery %d (%s): status %d, want %d", i, tc.delivery, got, tc.code)
		}
	}
	if n := w.n.Load(); n != 2 {
		t.Errorf("%d wakes, want 2", n)
	}
}

// TestWebhookWithoutSecretSaysSo: a serve started without a webhook secret
// answers even a correctly signed push with what is wrong there (no secret is
// configured on this serve), not with a complaint about the sender's
// signature, and wakes nothing.
func TestWebhookWithoutSecretSaysSo(t *testing.T) {
	t.Parallel()
	const push = `{"ref":"refs/heads/main"}`
	for _, sig := range []string{sign("s3cret", push), ""} {
		w := &countingWaker{}
		req := httptest.NewRequest(http.MethodPost, "/hooks/github", strings.NewReader(push))
		req.Header.Set("X-GitHub-Event", "push")
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		rec := httptest.NewRecorder()
		tailer.WebhookHandler("", w).ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != http.StatusForbidden || !strings.Contains(body, "no webhook secret is configured on this serve") ||
			strings.Contains(body, "X-Hub-Signature-256") || w.n.Load() != 0 {
			t.Errorf("signature %q: got %d %q and %d wakes; want 403 naming the missing secret, no wake", sig, rec.Code, body, w.n.Load())
		}
	}
}
