package distributor_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// BenchmarkPublishDeploy: one new version published and pointed at by all
// 100 cohort buckets, with nobody listening.
func BenchmarkPublishDeploy(b *testing.B) {
	d, _ := newDist(b, distributor.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for i := range b.N {
		v := cuecast.Version{Config: cfg, Version: uint64(i + 1), Commit: fmt.Sprint(i)}
		if err := d.Publish(b.Context(), v, content(i)); err != nil {
			b.Fatal(err)
		}
		if err := d.Deploy(b.Context(), v); err != nil {
			b.Fatal(err)
		}
	}
}
