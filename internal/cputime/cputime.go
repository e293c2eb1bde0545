// Package cputime measures the CPU time this process has used, for the
// benchmarks that report it beside wall time: on a shared machine wall time
// mostly measures the neighbours.
package cputime

import "testing"

// PerOp runs f in b.Loop and reports the process CPU time per iteration as
// cpu-ms/op.
func PerOp(b *testing.B, f func()) {
	b.Helper()
	start := Process()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if n > 0 {
		b.ReportMetric(float64(Process()-start)/float64(n)/1e6, "cpu-ms/op")
	}
}
