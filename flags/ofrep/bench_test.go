package ofrep_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/flags/ofrep"
)

// benchSet is a flag set of n flags, each with a targeting rule and a
// 20/80 rollout: the shape of configs-example's new-checkout.
func benchSet(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"schema": "cuecast.flags/v1", "flags": {`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"flag-%03d": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "flag-%03d",
			"rules": [{"id": "staff", "clauses": [{"attribute": "email", "op": "endsWith", "values": ["@example.com"]}], "variant": "on"}],
			"fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 20000}, {"variant": "off", "weight": 80000}]}}}`, i, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

func benchHandler(b *testing.B, flags int) *ofrep.Handler {
	b.Helper()
	st := ofrep.NewStore()
	if _, err := st.Apply("growth/flags", 1, benchSet(flags), false); err != nil {
		b.Fatal(err)
	}
	h, err := ofrep.New(ofrep.Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

const benchBody = `{"context": {"targetingKey": "user-1", "email": "ann@example.org", "country": "NL"}}`

// The throughput over loopback HTTP of many clients at once (serve's
// ≥ 20,000 evaluations/s) is BenchmarkServeOFREP in internal/web: serve
// --http's own server, with clients in processes of their own and the
// server's CPU per evaluation (BenchmarkOFREPServe in
// flags/openfeature/integration is the handler alone, clients in process).

// BenchmarkSingleLoopback is one client evaluating one flag at a time
// over loopback HTTP with keep-alive, as an application does against
// `cuecast agent --ofrep`: the round trip, reported as its p50 and p99
// (target: p50 ≤ 150 µs, BENCHMARKS.md).
func BenchmarkSingleLoopback(b *testing.B) {
	srv := httptest.NewServer(benchHandler(b, 100))
	defer srv.Close()
	url := srv.URL + "/ofrep/v1/evaluate/flags/growth/flags/flag-042"
	hc := srv.Client()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := hc.Post(url, "application/json", strings.NewReader(benchBody))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("status %d", res.StatusCode)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkBulk100 is the server's time for a bulk evaluation of 100
// flags, in the handler without the network (target: ≤ 1 ms).
func BenchmarkBulk100(b *testing.B) { benchServe(b, "/ofrep/v1/evaluate/flags") }

// BenchmarkSingleHandler is the server's time for one evaluation, in the
// handler without the network.
func BenchmarkSingleHandler(b *testing.B) {
	benchServe(b, "/ofrep/v1/evaluate/flags/growth/flags/flag-042")
}

// benchServe posts benchBody to path of a handler of 100 flags.
func benchServe(b *testing.B, path string) {
	h := benchHandler(b, 100)
	body := []byte(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
