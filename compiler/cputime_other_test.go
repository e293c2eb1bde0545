//go:build !unix

package compiler_test

import "time"

// processCPU is unavailable here; the benchmarks then report 0 CPU time.
func processCPU() time.Duration { return 0 }
