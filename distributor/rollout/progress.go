package rollout

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// StageProgress is one stage of a rollout as an operator sees it.
type StageProgress struct {
	Name    string           `json:"name"`
	Percent int              `json:"percent"`
	Hold    cuecast.Duration `json:"hold"`
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
}

// Progress reads cfg's record and the live reports and measures each stage.
// It returns an error wrapping ErrNoRollout for a config never deployed
// through the controller.
func (c *Controller) Progress(ctx context.Context, cfg cuecast.ConfigPath) (Progress, error) {
	rec, err := c.Record(ctx, cfg)
	if err != nil {
		return Progress{}, err
	}
	reports, err := c.reports(ctx, cfg)
	if err != nil {
		return Progress{}, fmt.Errorf("progress of %s: %w", cfg, err)
	}
	return progress(rec, reports, c.o.Now()), nil
}

func progress(rec Record, reports []cuecast.Report, now time.Time) Progress {
	p := Progress{Record: rec, Live: len(reports)}
	r := rec.Current
	if r == nil {
		return p
	}
	ns := rec.Config.Namespace()
	for _, rp := range reports {
		if rp.Version == r.Version {
			p.OnTarget++
		}
		if distributor.Unheard(rp) {
			p.Unheard++
		}
	}
	for i, st := range r.Policy.Stages {
		sp := StageProgress{Name: st.Name, Percent: st.Percent, Hold: st.Hold, Status: "pending"}
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
