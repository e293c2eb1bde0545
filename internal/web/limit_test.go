package web

import (
	"testing"
	"time"
)

// TestNextLimit: a sample that ran out of its limit doubles it, one that
// did not sets it to twice what it took; never under the base, never over
// maxSampleLimit (but for a base above it).
func TestNextLimit(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name              string
		limit, base, took time.Duration
		ranOut            bool
		want              time.Duration
	}{
		{"quick sample: the base", 5 * s, 5 * s, 100 * time.Millisecond, false, 5 * s},
		{"ran out: twice the limit", 5 * s, 5 * s, 5 * s, true, 10 * s},
		{"ran out again", 10 * s, 5 * s, 10 * s, true, 20 * s},
		{"slow but done: twice what it took", 20 * s, 5 * s, 6 * s, false, 12 * s},
		{"back down after a quick one", 12 * s, 5 * s, time.Second, false, 5 * s},
		{"capped", 80 * s, 5 * s, 80 * s, true, maxSampleLimit},
		{"a base above the cap", 5 * time.Minute, 5 * time.Minute, 5 * time.Minute, true, 5 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nextLimit(c.limit, c.base, c.took, c.ranOut); got != c.want {
				t.Errorf("nextLimit(%s, %s, %s, %t) = %s, want %s", c.limit, c.base, c.took, c.ranOut, got, c.want)
			}
		})
	}
}
