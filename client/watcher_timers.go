package client

import (
	"math/rand/v2"
	"time"
)

// The watcher's timed work (retry, report soon, reconcile, heartbeat) on one
// timer, set for the earliest.

// after schedules timed work d from now: *due is one of the watcher's
// deadlines (retryAt, reportAt, reconcileAt, heartbeatAt).
func (w *Watcher) after(due *time.Time, d time.Duration) {
	t := time.Now().Add(d)
	*due = t
	if w.timerAt.IsZero() || t.Before(w.timerAt) {
		w.timer.Reset(d)
		w.timerAt = t
	}
}

// tick does the timed work that is due and sets the timer for the next.
func (w *Watcher) tick() {
	w.timerAt = time.Time{}
	now := time.Now()
	due := func(t *time.Time) bool {
		if t.IsZero() || t.After(now) {
			return false
		}
		*t = time.Time{}
		return true
	}
	if due(&w.retryAt) {
		w.resync("retry")
	}
	if due(&w.reconcileAt) {
		w.resync("reconcile")
		w.after(&w.reconcileAt, jitter10(w.c.o.reconcile))
	}
	report := false
	if due(&w.heartbeatAt) {
		w.saveLKG()
		report = true
		w.after(&w.heartbeatAt, w.c.o.heartbeat)
	}
	if due(&w.reportAt) {
		report = true
	}
	if report {
		w.report()
	}
	var next time.Time
	for _, t := range [...]time.Time{w.retryAt, w.reportAt, w.reconcileAt, w.heartbeatAt} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !next.IsZero() && (w.timerAt.IsZero() || next.Before(w.timerAt)) {
		w.timer.Reset(max(time.Until(next), 0))
		w.timerAt = next
	}
}

func jitter10(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

// reportSoon schedules a report after a random delay between a half and
// one and a half of a spread of a fifteenth of the heartbeat (at most a
// second): a fleet applying the same pointer at the same moment would
// otherwise send its reports in one burst, which the server must store while
// it is still fanning the change out. The half keeps reports out of the
// fan-out itself, which storing them slows: at 10,000 instances on one
// server it lasts 0.3–0.45 s, and a quarter second let the first instances'
// reports in (BENCHMARKS.md, "Distribution").
func (w *Watcher) reportSoon() {
	if !w.reportAt.IsZero() {
		return // one is due already
	}
	spread := min(w.c.o.heartbeat/15, time.Second)
	w.after(&w.reportAt, spread/2+rand.N(spread+1)+1)
}

func (w *Watcher) scheduleRetry() {
	w.retries++
	w.after(&w.retryAt, jittered(backoff(w.retries, 100*time.Millisecond, w.c.o.reconcile)))
}
