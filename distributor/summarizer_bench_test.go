package distributor_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// BenchmarkSummarizerIngest is a region's summarizer taking its
// instances' reports, per report: at rest (a heartbeat repeating the last
// report) and in a change (each report new), with a tick every half of a
// region of 25,000, as a change spreading over a second or two sees them.
func BenchmarkSummarizerIngest(b *testing.B) {
	const n, hb = 25_000, 15 * time.Second
	t0 := time.Now()
	encode := func(i int, v uint64, at time.Time) (string, []byte) {
		id := fmt.Sprintf("web-eu-%06d", i)
		data, err := json.Marshal(cuecast.Report{Instance: id, Cohort: cuecast.Cohort("payments", id), Config: cfg, Version: v,
			Checksum: strings.Repeat(fmt.Sprint(v%10), 64), Healthy: true, AppliedAt: t0.UTC(), At: at.UTC()})
		if err != nil {
			b.Fatal(err)
		}
		return cuecast.ReportSubject(cfg, id), data
	}
	for _, mode := range []string{"heartbeat", "change"} {
		b.Run(mode, func(b *testing.B) {
			_, _, s := summarizerOnce(b, hb, time.Second)
			add, flush := distributor.SummarizerAt(s, t0.Add(-2*hb))
			subj := make([]string, n)
			data := make([][2][]byte, n)
			for i := range n {
				subj[i], data[i][0] = encode(i, 1, t0)
				_, data[i][1] = encode(i, 2, t0)
				add(subj[i], data[i][0], t0)
			}
			flush(t0)
			which := 0
			if mode == "change" {
				which = 1
			}
			now := t0
			b.ReportAllocs()
			b.ResetTimer()
			for k := range b.N {
				i := k % n
				if i == 0 && k > 0 && mode == "change" {
					which ^= 1
				}
				if i%(n/2) == 0 {
					now = now.Add(time.Second)
					flush(now)
				}
				add(subj[i], data[i][which], now)
			}
		})
	}
}

// BenchmarkSummarizerTickAtRest is one of a region's summarizer's ticks
// (one a second) at rest, with 25,000 instances live and nothing to send:
// what a region pays each second before any report comes in.
func BenchmarkSummarizerTickAtRest(b *testing.B) {
	const n, hb = 25_000, 15 * time.Second
	t0 := time.Now()
	_, _, s := summarizerOnce(b, hb, time.Second)
	add, flush := distributor.SummarizerAt(s, t0.Add(-2*hb))
	for i := range n {
		id := fmt.Sprintf("web-eu-%06d", i)
		data, err := json.Marshal(cuecast.Report{Instance: id, Cohort: cuecast.Cohort("payments", id), Config: cfg, Version: 1,
			Checksum: strings.Repeat("1", 64), Healthy: true, AppliedAt: t0.UTC(), At: t0.UTC()})
		if err != nil {
			b.Fatal(err)
		}
		add(cuecast.ReportSubject(cfg, id), data, t0)
	}
	flush(t0)
	b.ReportAllocs()
	b.ResetTimer()
	for k := range b.N {
		// Ticks 1 to 9 s after the summary went: none is due again, and
		// nothing has expired (reports live four heartbeats).
		flush(t0.Add(time.Duration(k%9+1) * time.Second))
	}
}
