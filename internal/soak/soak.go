// Package soak is the switch and the randomness of the randomized long
// tests: short in `go test`, long with CUECAST_SOAK set (`make soak`), and
// each run's seed logged so that a failure can be read against it.
package soak

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"
)

// On reports whether CUECAST_SOAK is set (to anything): the long form of
// the soak tests runs.
func On() bool { return os.Getenv("CUECAST_SOAK") != "" }

// Length is short in `go test` and long with CUECAST_SOAK set: a soak's
// duration or count of rounds.
func Length[T any](short, long T) T {
	if On() {
		return long
	}
	return short
}

// Intn returns a rand.IntN that goroutines may share, seeded from the clock
// with the seed logged to t: the soak tests draw their random moments from
// several goroutines at once.
func Intn(t testing.TB) func(n int) int {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 2))
	var mu sync.Mutex
	return func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return rnd.IntN(n)
	}
}

// Pause is the wait before a soak's next write, drawn with intn: none, up
// to short (in whole milliseconds), or about hold (±20 ms), so that writes
// land back to back, close together, and around a rollout's hold.
func Pause(intn func(n int) int, short, hold time.Duration) {
	switch intn(3) {
	case 0:
	case 1:
		time.Sleep(time.Duration(intn(int(short/time.Millisecond))) * time.Millisecond)
	default:
		time.Sleep(hold + time.Duration(intn(40)-20)*time.Millisecond)
	}
}
