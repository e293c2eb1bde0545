package distributor_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
)

// BenchmarkReports reads the live reports of one config, of its namespace
// and of all, from a report stream of 500 configs × 40 instances in one
// namespace: what status and check --fleet read.
func BenchmarkReports(b *testing.B) {
	d, nc := newDist(b, distributor.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	js := natstest.JetStream(b, nc)
	const configs, instances = 500, 40
	for c := range configs {
		for i := range instances {
			r := cuecast.Report{Instance: fmt.Sprintf("inst-%03d", i), Config: cuecast.ConfigPath(fmt.Sprintf("payments/cfg%03d", c)), Version: 1, At: time.Now()}
			data, _ := json.Marshal(r)
			if _, err := js.PublishAsync(cuecast.ReportSubject(r.Config, r.Instance), data); err != nil {
				b.Fatal(err)
			}
		}
	}
	<-js.PublishAsyncComplete()
	b.Run("one", func(b *testing.B) {
		for b.Loop() {
			rs, err := d.Reports(b.Context(), "payments/cfg250")
			if err != nil || len(rs) != instances {
				b.Fatal(len(rs), err)
			}
		}
	})
	b.Run("namespace", func(b *testing.B) {
		for b.Loop() {
			rs, err := d.NamespaceReports(b.Context(), "payments")
			if err != nil || len(rs) != configs*instances {
				b.Fatal(len(rs), err)
			}
		}
	})
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			rs, err := d.Reports(b.Context(), "")
			if err != nil || len(rs) != configs*instances {
				b.Fatal(len(rs), err)
			}
		}
	})
}
