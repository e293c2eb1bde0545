package distributor

import "time"

// SkewClock makes d's pointer revisions read the clock off by skew, as a
// replica whose clock is wrong would.
func SkewClock(d *Distributor, skew time.Duration) {
	d.revs.mu.Lock()
	defer d.revs.mu.Unlock()
	d.revs.now = func() time.Time { return time.Now().Add(skew) }
}
