package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// fakeFleet answers with fixed statuses, or err.
type fakeFleet struct{ err error }

func (f fakeFleet) StatusAndReports(context.Context, distributor.Intents, ...cuecast.ConfigPath) ([]distributor.ConfigStatus, []cuecast.Report, error) {
	if f.err != nil {
		return nil, nil, f.err
	}
	return []distributor.ConfigStatus{{Config: "a/b", Latest: cuecast.Version{Config: "a/b", Version: 1}, Coverage: 1}}, nil, nil
}

func (f fakeFleet) Reports(context.Context, cuecast.ConfigPath) ([]cuecast.Report, error) {
	return nil, f.err
}

func (f fakeFleet) Versions(context.Context, cuecast.ConfigPath) ([]cuecast.Version, error) {
	return []cuecast.Version{{Config: "a/b", Version: 1}}, f.err
}

func TestReadyz(t *testing.T) {
	for _, c := range []struct {
		name   string
		fleet  fakeFleet
		ready  func(context.Context) error
		sample bool
		code   int
		body   string
	}{
		{"before the first sample", fakeFleet{}, nil, false, http.StatusServiceUnavailable, "no fleet sample yet"},
		{"sampled", fakeFleet{}, nil, true, http.StatusOK, "ready"},
		{"fleet unreadable", fakeFleet{err: errors.New("jetstream down")}, nil, true, http.StatusServiceUnavailable, "jetstream down"},
		{"not connected", fakeFleet{}, func(context.Context) error { return errors.New("NATS connection RECONNECTING") }, true,
			http.StatusServiceUnavailable, "RECONNECTING"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(Options{Fleet: c.fleet, Ready: c.ready})
			if err != nil {
				t.Fatal(err)
			}
			if c.sample {
				s.Sample(context.Background())
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.body) {
				t.Errorf("readyz: %d %q, want %d containing %q", rec.Code, rec.Body.String(), c.code, c.body)
			}
			rec = httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("healthz: %d, want 200 whatever readiness says", rec.Code)
			}
		})
	}
}

func TestDashboardIsSelfContained(t *testing.T) {
	s, err := New(Options{Fleet: fakeFleet{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/configs/a/b", "/static/app.js", "/static/style.css"} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d", path, rec.Code)
			continue
		}
		body := rec.Body.String()
		for _, ext := range []string{"http://", "https://", "//cdn", "@import"} {
			if strings.Contains(body, ext) {
				t.Errorf("GET %s loads something from elsewhere (%q)", path, ext)
			}
		}
	}
}

// TestFront: before Open, the process is alive (/healthz 200) and every
// other path, the dashboard's and POSTs too, is 503 naming the start's
// step; after, the Server answers.
func TestFront(t *testing.T) {
	f := NewFront(nil, nil)
	f.Starting("reading back the store")
	s, err := New(Options{Fleet: fakeFleet{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		open         bool
		method, path string
		code         int
		body         string
	}{
		{false, http.MethodGet, "/healthz", http.StatusOK, "ok (starting: reading back the store)"},
		{false, http.MethodGet, "/readyz", http.StatusServiceUnavailable, "not ready: starting: reading back the store"},
		{false, http.MethodGet, "/", http.StatusServiceUnavailable, "not ready: starting: reading back the store"},
		{false, http.MethodGet, "/metrics", http.StatusServiceUnavailable, "not ready: starting: reading back the store"},
		{false, http.MethodPost, "/hooks/github", http.StatusServiceUnavailable, "not ready: starting: reading back the store"},
		{true, http.MethodGet, "/healthz", http.StatusOK, "ok"},
		{true, http.MethodGet, "/readyz", http.StatusServiceUnavailable, "not ready: no fleet sample yet"},
	} {
		if c.open {
			f.Open(s)
		}
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if got := strings.TrimSpace(rec.Body.String()); rec.Code != c.code || got != c.body {
			t.Errorf("open %v, %s %s: %d %q, want %d %q", c.open, c.method, c.path, rec.Code, got, c.code, c.body)
		}
	}
}
