package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/flags/ofrep"
)

// TestOFREPNotReady: until the OFREP store is filled from a fleet sample,
// serve's OFREP paths answer 500 GENERAL "not ready" in OFREP's JSON (a
// key on a single evaluation), which the providers read as an error,
// with no Retry-After: while the process starts (Front), and between
// Open and the first good sample, where it answered FLAG_NOT_FOUND and an
// empty bulk before, answers a caller takes for the truth.
func TestOFREPNotReady(t *testing.T) {
	const token = "gggggggggggggggggggggggggggggggggggggggg"
	tokens, err := ofrep.ParseTokens("tokens", []byte("growth "+token+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	post := func(h http.Handler, path string) (int, http.Header, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"context": {"targetingKey": "user-1"}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var m map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("POST %s: %d %q is not JSON", path, rec.Code, rec.Body)
		}
		return rec.Code, rec.Header(), m
	}
	const single, bulk = "/ofrep/v1/evaluate/flags/growth/flags/new-checkout", "/ofrep/v1/evaluate/flags"
	check := func(step string, h http.Handler, details string) {
		t.Helper()
		for path, want := range map[string]map[string]any{
			single: {"key": "growth/flags/new-checkout", "errorCode": "GENERAL", "errorDetails": details},
			bulk:   {"errorCode": "GENERAL", "errorDetails": details},
		} {
			code, header, got := post(h, path)
			if code != 500 || !reflect.DeepEqual(got, want) || header.Get("Content-Type") != "application/json" || header.Get("Retry-After") != "" {
				t.Errorf("%s: POST %s: %d %v %v, want 500 %v in JSON, no Retry-After", step, path, code, header, got, want)
			}
		}
	}

	f := NewFront(nil, nil)
	f.Starting("reading back the store")
	check("starting", f, "not ready: starting: reading back the store")

	s, err := New(Options{Fleet: fakeFleet{err: errors.New("nats: timeout")}, OFREPTokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	f.Open(s)
	check("open, before a sample", f, "not ready: no fleet sample yet")
	s.Sample(context.Background())
	check("after a failed sample", f, "not ready: no fleet sample yet")
}
