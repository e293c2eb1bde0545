package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// What the watcher says about itself: its report on the report subject, and
// the refusals and rejections that report carries.

// refuse reports a pointer that failed verification apart from last_error:
// a forgery says nothing about this instance's ability to apply the version
// (issue 15, item 5), so the health gate must not count it as a failure.
func (w *Watcher) refuse(version uint64, err error) {
	w.refused = fmt.Sprintf("version %d: pointer: %v", version, err)
	w.event(EventRejected, version, "pointer", err)
	w.reportSoon()
}

func (w *Watcher) reject(version uint64, what string, err error, forGood bool) {
	if forGood {
		// Stays rejected: the same bytes will fail the same way.
		if cur := w.cache[version]; cur.meta.Version == version {
			delete(w.cache, version)
		}
	}
	w.lastErr = fmt.Sprintf("version %d: %s: %v", version, what, err)
	w.stageErr = 0
	if what == "stage" {
		w.stageErr = version
	}
	w.event(EventRejected, version, what, err)
	if forGood || errors.Is(err, cuecast.ErrBadSignature) || errors.Is(err, cuecast.ErrChecksumMismatch) {
		w.reportSoon()
	}
}

// MaxApplyError is how many bytes of WithApplyError's reason a report
// carries: every heartbeat sends it, to every reader of the reports.
const MaxApplyError = 256

// lastError is the report's last_error: the watcher's own, then the
// service's (WithApplyError).
func (w *Watcher) lastError() string {
	if w.c.o.applyErr == nil {
		return w.lastErr
	}
	return reportError(w.lastErr, w.c.o.applyErr(w.cfg))
}

// reportError joins the watcher's error own and the service's why, cut to
// MaxApplyError bytes. own stays first, so that a failure to apply
// version N still reads "version N: …" to the gates.
func reportError(own, why string) string {
	if len(why) > MaxApplyError {
		why = strings.ToValidUTF8(why[:MaxApplyError-len("…")], "") + "…"
	}
	switch {
	case why == "":
		return own
	case own == "":
		return why
	}
	return own + "; " + why
}

// report publishes the instance's state on its report subject (a core
// publish: the report stream stores it, nothing waits for an ack).
func (w *Watcher) report() {
	s := w.Current()
	r := cuecast.Report{
		Instance:      w.c.o.instance,
		Labels:        w.c.o.labels,
		Cohort:        w.bucket,
		Config:        w.cfg,
		Version:       s.Version,
		Checksum:      s.Checksum,
		Healthy:       w.c.o.health().Healthy,
		LastKnownGood: w.servingLKG,
		LastError:     w.lastError(),
		Refused:       w.refused,
		Staged:        w.staged,
		AppliedAt:     s.AppliedAt.UTC(),
		At:            time.Now().UTC(),
	}
	b, err := json.Marshal(r)
	if err == nil {
		err = w.c.nc.Publish(w.reportSubj, b)
	}
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		w.event(EventError, s.Version, "report", err)
	}
}
