package rollout

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// StageProgress is one stage of a rollout as an operator sees it.
type StageProgress struct {
	Name    string `json:"name"`
	Percent int    `json:"percent"`
	// Scope says what the stage covers, for people (StageScope).
	Scope string           `json:"scope"`
	Hold  cuecast.Duration `json:"hold"`
	// Status is "done", "current" or "pending".
	Status string `json:"status"`
	// Instances live in this stage's cohort (cumulative: the buckets it
	// covers and the instances it names); OnTarget of them run the
	// rollout's version.
	Instances int `json:"instances"`
	OnTarget  int `json:"on_target"`
}

// Progress is a config's rollout with the fleet measured against it.
type Progress struct {
	Record Record          `json:"record"`
	Stages []StageProgress `json:"stages,omitempty"`
	// Cohort measures the current stage (zero when no rollout is active).
	Cohort Measure `json:"cohort"`
	// Live instances report on the config; OnTarget of them run the
	// current rollout's version.
	Live     int `json:"live"`
	OnTarget int `json:"on_target"`
	// Unheard of the live instances are known live from the report stream
	// but not heard by the controller yet (it started keeping the config's
	// reports less than a heartbeat and a quarter ago): their state is
	// unknown, and they count as not on the version.
	Unheard int `json:"unheard"`
	// Next is when the controller next judges the current stage by the
	// clock (the end of its wait, its hold, or its min_instances grace);
	// zero when that moment has passed or the rollout waits for nothing.
	Next time.Time `json:"next,omitzero"`
	// WithoutDetail says why, on a summarised tree, the regions' instance
	// detail was not read (a region did not answer the drill-down in
	// time, or the caller may not ask): the stages and cohort were then
	// measured on the summary groups alone, where an instance a stage
	// names or selects by label is counted with its bucket's group, not
	// by name. Empty when the counts are exact.
	WithoutDetail string `json:"without_detail,omitempty"`
}

// StageScope says what stage s covers, the one wording of `cuecast rollout
// status` and the dashboard: a share of the cohort buckets ("25%"), the
// instances it names ("instances a, b"), the labels it matches ("labels
// zone=eu-1"), or a mix of them joined by " + "; "0%" when it covers
// nothing. A named stage is not "0%".
func StageScope(s cuecast.Stage) string {
	var parts []string
	if s.Percent > 0 {
		parts = append(parts, fmt.Sprintf("%d%%", s.Percent))
	}
	if len(s.Instances) > 0 {
		parts = append(parts, "instances "+strings.Join(s.Instances, ", "))
	}
	if len(s.Labels) > 0 {
		ls := make([]string, 0, len(s.Labels))
		for _, k := range slices.Sorted(maps.Keys(s.Labels)) {
			ls = append(ls, k+"="+s.Labels[k])
		}
		parts = append(parts, "labels "+strings.Join(ls, ", "))
	}
	if len(parts) == 0 {
		return "0%"
	}
	return strings.Join(parts, " + ")
}

// Deadline returns the moment the controller next steps r by the clock:
// the end of a waiting (or staging) stage's wait, of a holding stage's
// hold, or then of its min_instances grace (EnoughBy). It is zero when r
// waits for no deadline or the deadline has passed (the controller steps
// it within its interval).
func (r *Rollout) Deadline(now time.Time) time.Time {
	var ts []time.Time
	switch r.State {
	case StateWaiting, StateStaging:
		ts = []time.Time{r.WaitUntil}
	case StateHolding:
		ts = []time.Time{r.HoldUntil, r.EnoughBy}
	}
	for _, t := range ts {
		if t.After(now) {
			return t
		}
	}
	return time.Time{}
}

// noteTime matches the RFC 3339 times the controller writes in notes.
var noteTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// FormatTime is the one way `cuecast rollout status`, `cuecast status` and
// the dashboard show a time to people: UTC, to the second,
// "2026-12-01 17:20:09 UTC".
func FormatTime(t time.Time) string {
	return t.UTC().Format(time.DateTime) + " UTC"
}

// FormatTimes rewrites the RFC 3339 times in text (a note, a log step's
// detail: the controller writes them so, NoteAt reads them back) as
// FormatTime shows them.
func FormatTimes(text string) string {
	return noteTime.ReplaceAllStringFunc(text, func(m string) string {
		at, err := time.Parse(time.RFC3339, m)
		if err != nil {
			return m
		}
		return FormatTime(at)
	})
}

// NoteAt returns r's note as of now: the note itself while every deadline
// it names lies ahead; once one has passed (the controller has not judged
// the stage since), what is due instead, so that no status shows a past
// deadline as the next event.
func (r *Rollout) NoteAt(now time.Time) string {
	for _, m := range noteTime.FindAllString(r.Note, -1) {
		at, err := time.Parse(time.RFC3339, m)
		if err != nil || at.After(now) {
			continue
		}
		if next := r.Deadline(now); !next.IsZero() {
			return fmt.Sprintf("%s: judged again by %s", r.State, next.Format(time.RFC3339))
		}
		return fmt.Sprintf("%s: a deadline has passed; the controller judges the stage on its next step", r.State)
	}
	return r.Note
}

// NoteFor is r's note as of now (NoteAt), with a waiting stage's line
// measured from reports, the live reports the caller counts with: the
// controller's own note is as old as its last step, and shown beside
// counts measured now it could name as waited for instances that have
// applied. Instances the stage waits for that stopped reporting stay
// waited for, as the controller counts them (judgeStage).
func (r *Rollout) NoteFor(reports []cuecast.Report, now time.Time) string {
	if r.State != StateWaiting || !now.Before(r.WaitUntil) {
		return r.NoteAt(now)
	}
	m := measure(r.Config.Namespace(), withGone(r.Config, reports, r.Unconfirmed), r.Cohort, r.Version, false)
	return waitingNote(m, r.Version)
}

// waitingNote is the one wording of a waiting stage's progress, the
// controller's note and NoteFor.
func waitingNote(m Measure, version uint64) string {
	if m.WaitingCount == 0 {
		return fmt.Sprintf("all %d instances of the stage run v%d; the hold starts at the controller's next step", m.Instances, version)
	}
	return fmt.Sprintf("waiting for %d of %d instances to apply v%d: %s", m.WaitingCount, m.Instances, version, list(m.Waiting, 5))
}

// Progress reads cfg's record and the live reports and measures each stage.
// It returns an error wrapping ErrNoRollout for a config never deployed
// through the controller.
func (c *Controller) Progress(ctx context.Context, cfg cuecast.ConfigPath) (Progress, error) {
	rec, err := c.Record(ctx, cfg)
	if err != nil {
		return Progress{}, err
	}
	return c.ProgressOf(ctx, rec)
}

// ProgressOf is Progress of a record already read (Records lists them all
// in one request; reading each again costs one more per rollout).
func (c *Controller) ProgressOf(ctx context.Context, rec Record) (Progress, error) {
	reports, without, err := c.progressReports(ctx, rec.Config, rec.Current)
	if err != nil {
		return Progress{}, fmt.Errorf("progress of %s: %w", rec.Config, err)
	}
	p := progress(rec, reports, c.o.Now())
	if without != nil {
		p.WithoutDetail = without.Error()
	}
	return p, nil
}

func progress(rec Record, reports []cuecast.Report, now time.Time) Progress {
	p := Progress{Record: rec, Live: distributor.Weigh(reports)}
	r := rec.Current
	if r == nil {
		return p
	}
	// The note as of now: one written before a deadline passed must not
	// show that deadline as ahead.
	cur := *r
	cur.Note = r.NoteFor(reports, now)
	p.Record.Current = &cur
	p.Next = r.Deadline(now)
	ns := rec.Config.Namespace()
	for _, rp := range reports {
		if distributor.Unheard(rp) {
			p.Unheard += rp.Weight()
		} else if rp.Version == r.Version {
			p.OnTarget += rp.Weight()
		}
	}
	for i, st := range r.Policy.Stages {
		sp := StageProgress{Name: st.Name, Percent: st.Percent, Scope: StageScope(st), Hold: st.Hold, Status: "pending"}
		switch {
		case r.State == StateComplete || i < r.Stage:
			sp.Status = "done"
		case i == r.Stage && r.State != StateStaging:
			sp.Status = "current"
		}
		m := measure(ns, reports, r.StageCohort(i, reports), r.Version, false)
		sp.Instances, sp.OnTarget = m.Instances, m.OnTarget
		p.Stages = append(p.Stages, sp)
	}
	if r.State.Active() || r.State == StateHalted {
		p.Cohort = measure(ns, reports, r.Cohort, r.Version, !now.Before(r.WaitUntil) && !r.WaitUntil.IsZero())
	}
	slices.Sort(p.Cohort.Waiting)
	return p
}
