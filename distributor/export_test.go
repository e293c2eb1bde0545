package distributor

import "time"

// SkewClock makes d's pointer revisions read the clock off by skew, as a
// replica whose clock is wrong would.
func SkewClock(d *Distributor, skew time.Duration) {
	d.revs.mu.Lock()
	defer d.revs.mu.Unlock()
	d.revs.now = func() time.Time { return time.Now().Add(skew) }
}

// CachedSeq is the stream sequence d's pointer cache holds for subj (0:
// none), which its next compare-and-swap on subj expects.
func CachedSeq(d *Distributor, subj string) uint64 {
	c, ok := d.ptrs.Load(subj)
	if !ok {
		return 0
	}
	return c.(cachedPointer).seq
}

// SummarizerAt drives s without its Run loop, on the clock the test
// gives: started at start, add takes a report that arrived at now on
// subject, and flush is the tick of its interval at now.
func SummarizerAt(s *Summarizer, start time.Time) (add func(subject string, data []byte, now time.Time), flush func(now time.Time)) {
	s.start = start
	return s.add, s.flush
}

// SummariesBuilt is how many summaries s has built, sent or not.
func SummariesBuilt(s *Summarizer) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.built
}

// Expire is l.expire: it forgets the expired reports and returns how many
// instances' own reports are live.
func (l *LiveReports) Expire(now time.Time) int { return l.expire(now) }

// DetailParts is detailParts: reply as the messages of one drill-down
// answer, each at most limit bytes.
func DetailParts(reply DetailReply, limit int) ([][]byte, error) { return detailParts(reply, limit) }

// HoldIntake has s call hold with each report's subject as it starts to
// take the report in, before Run: a hold that blocks stands for a report
// that takes that long to decode.
func HoldIntake(s *Summarizer, hold func(subject string)) { s.takeHook = hold }
