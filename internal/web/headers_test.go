package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/web"
)

// wantFramingHeaders fails t unless h forbids framing (clickjacking of the
// operator and edit panels) and content sniffing.
func wantFramingHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	if got := h.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("%s: X-Frame-Options %q, want DENY", what, got)
	}
	if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q, want nosniff", what, got)
	}
	if got := h.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
		t.Errorf("%s: Content-Security-Policy %q, want frame-ancestors 'none'", what, got)
	}
}

// TestSecurityHeaders: every response of the operations server, whatever
// route (and a route that does not exist) answers it, may not be framed by
// another site nor sniffed into another type; and so do the answers given
// while the process starts.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	tokens, _ := growthTokens(t)
	f := start(t, fixtureOptions{ofrepTokens: tokens, token: "op"})
	for _, c := range []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/configs/payments/checkout"},
		{"GET", "/instances/payments/checkout"},
		{"GET", "/api/overview"},
		{"GET", "/api/configs/payments/checkout"},
		{"GET", "/api/chart/payments/checkout"},
		{"GET", "/api/versions/payments/checkout?version=1"},
		{"GET", "/static/app.js"},
		{"GET", "/static/style.css"},
		{"GET", "/metrics"},
		{"GET", "/healthz"},
		{"GET", "/readyz"},
		{"GET", "/no/such/page"},
		{"POST", "/api/rollouts/halt/payments/checkout"},
		{"POST", "/api/set"},
		{"POST", "/ofrep/v1/evaluate/flags"},
		{"POST", "/hooks/github"},
	} {
		req, err := http.NewRequest(c.method, f.base+c.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		wantFramingHeaders(t, c.method+" "+c.path+" ("+res.Status+")", res.Header)
	}

	t.Run("starting", func(t *testing.T) {
		front := web.NewFront(nil, nil)
		for _, path := range []string{"/", "/healthz", "/ofrep/v1/evaluate/flags"} {
			rec := httptest.NewRecorder()
			front.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			wantFramingHeaders(t, "starting: "+path, rec.Header())
		}
	})
}
