package natsconf_test

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/s2"
)

// BenchmarkLeafFlushCompression is what one flush of a small message costs
// the sender of a leaf link at each level nats-server's s2_auto may pick
// (docs/SCALING.md, "Leaf links are compressed as nats-server decides"):
// the writer as nats-server configures it for that level (its
// s2WriterOptions: one goroutine, then the level's option), one write and
// one flush per op.
func BenchmarkLeafFlushCompression(b *testing.B) {
	msg := bytes.Repeat([]byte(`{"config":"payments/checkout","version":12,"checksum":"sha256:abc"}`), 4) // 268 bytes: a pointer's size
	for _, level := range []struct {
		name string
		opts []s2.WriterOption
	}{
		{"s2_uncompressed", []s2.WriterOption{s2.WriterUncompressed()}},
		{"s2_fast", nil},
		{"s2_better", []s2.WriterOption{s2.WriterBetterCompression()}},
		{"s2_best", []s2.WriterOption{s2.WriterBestCompression()}},
	} {
		b.Run(level.name, func(b *testing.B) {
			var out bytes.Buffer
			w := s2.NewWriter(&out, append([]s2.WriterOption{s2.WriterConcurrency(1)}, level.opts...)...)
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				out.Reset()
				if _, err := w.Write(msg); err != nil {
					b.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
