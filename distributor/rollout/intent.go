package rollout

import (
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// Intent is the one rule for the version each instance of rec's config is
// meant to run now, and since when (docs/ROLLOUT.md, "What status counts").
// `cuecast status`, the dashboard and the metrics count stragglers and
// coverage against it, so that a halted, pinned or staged fleet where it
// should be is not reported behind:
//
//   - pinned (an emergency rollback): the pinned version, everyone;
//   - an active rollout: its version for the instances its stages moved
//     (the current cohort and Moved), the floor for the others — or, for
//     those a superseded rollout had moved, that rollout's version;
//   - halted: From for everyone (the cohort was moved back to it, the rest
//     never left it); with no From, the cohort stays on the version, and
//     the rest, whom a first version never reached, run nothing;
//   - complete: its version, everyone;
//   - rolled back without a pin any more, or no rollout: the floor, or
//     latest when there is none.
//
// target is the version the whole fleet is meant to end on as things stand
// (the pin, the halted rollout's From, the active rollout's version).
func (rec Record) Intent(latest uint64, published time.Time) (intent distributor.Intent, target uint64) {
	p := rec.plan(latest, published)
	if p.moved.v == 0 && p.superseded.v == 0 {
		return func(string) (uint64, time.Time) { return p.rest.v, p.rest.since }, p.target
	}
	ns := rec.Config.Namespace()
	return func(instance string) (uint64, time.Time) {
		switch {
		case p.moved.v > 0 && p.moved.cohort.Contains(ns, instance):
			return p.moved.v, p.moved.since
		case p.superseded.v > 0 && p.superseded.cohort.Contains(ns, instance):
			return p.superseded.v, p.superseded.since
		}
		return p.rest.v, p.rest.since
	}, p.target
}

// Settled is the version Intent gives an instance no stage of the current
// or a superseded rollout has reached: what a reader that belongs to no
// cohort (serve's OFREP) is meant to serve now. It is 0 when such an
// instance is meant to run nothing yet: a first version still in its
// stages.
func (rec Record) Settled(latest uint64) uint64 {
	return rec.plan(latest, time.Time{}).rest.v
}

// share is a version meant for a part of the fleet, since a time.
type share struct {
	cohort Cohort // unused for rest
	v      uint64
	since  time.Time
}

// plan is Intent's rule worked out for rec, so that Intent and Settled
// cannot part: the version meant for the instances the current rollout
// moved, for those a superseded one moved, and for the rest (v 0 in moved
// or superseded: nobody runs other than the rest).
type plan struct {
	moved, superseded, rest share
	target                  uint64
}

func (rec Record) plan(latest uint64, published time.Time) plan {
	all := func(v uint64, since time.Time) plan {
		return plan{rest: share{v: v, since: since}, target: v}
	}
	if p := rec.Pin; p != nil {
		return all(p.Version, p.At)
	}
	r := rec.Current
	if r == nil {
		return all(latest, published)
	}
	floor, _ := rec.floor()
	ns := rec.Config.Namespace()
	switch {
	case r.State == StateComplete:
		return all(r.Version, r.Updated)
	case r.State == StateHalted && r.From > 0:
		return all(r.From, haltedAt(r))
	case r.State == StateHalted:
		return plan{
			moved:  share{r.Cohort.union(ns, r.Moved), r.Version, r.StageStarted},
			rest:   share{since: r.Started},
			target: r.Version,
		}
	case r.State.Active():
		p := plan{
			moved:  share{r.Cohort.union(ns, r.Moved), r.Version, r.StageStarted},
			rest:   share{v: floor, since: r.Started},
			target: r.Version,
		}
		if s := rec.Superseded; s != nil && s.Version > floor {
			p.superseded = share{s.Cohort.union(ns, s.Moved), s.Version, s.StageStarted}
		}
		return p
	case floor > 0:
		return all(floor, r.Updated)
	}
	return all(latest, published)
}

// haltedAt is when r last halted: the last step of its log in state halted.
func haltedAt(r *Rollout) time.Time {
	for i := len(r.Log) - 1; i >= 0; i-- {
		if r.Log[i].State == StateHalted {
			return r.Log[i].At
		}
	}
	return r.Updated
}

// IntentsOf gives distributor.StatusWith each config's Intent from its
// record in recs; a config without one counts against its latest version.
func IntentsOf(recs []Record) distributor.Intents {
	by := make(map[cuecast.ConfigPath]Record, len(recs))
	for _, rec := range recs {
		by[rec.Config] = rec
	}
	return func(cfg cuecast.ConfigPath, latest cuecast.Version, published time.Time) (distributor.Intent, uint64) {
		rec, ok := by[cfg]
		if !ok {
			return nil, 0
		}
		return rec.Intent(latest.Version, published)
	}
}
