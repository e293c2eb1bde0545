package tailer_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
		{name: "no secret configured", secret: "-", event: "push", body: push, sig: sign("", push), code: http.StatusUnauthorized},
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
