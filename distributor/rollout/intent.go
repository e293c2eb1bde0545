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
//     never left it); with no From, the cohort stays on the version;
//   - complete: its version, everyone;
//   - rolled back without a pin any more, or no rollout: the floor, or
//     latest when there is none.
//
// target is the version the whole fleet is meant to end on as things stand
// (the pin, the halted rollout's From, the active rollout's version).
func (rec Record) Intent(latest uint64, published time.Time) (intent distributor.Intent, target uint64) {
	all := func(v uint64, since time.Time) (distributor.Intent, uint64) {
		return func(string) (uint64, time.Time) { return v, since }, v
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
		moved := r.Cohort.union(ns, r.Moved)
		return func(instance string) (uint64, time.Time) {
			if moved.Contains(ns, instance) {
				return r.Version, r.StageStarted
			}
			return 0, r.Started
		}, r.Version
	case r.State.Active():
		moved := r.Cohort.union(ns, r.Moved)
		var sup Cohort
		var supV uint64
		var supAt time.Time
		if s := rec.Superseded; s != nil && s.Version > floor {
			sup, supV, supAt = s.Cohort.union(ns, s.Moved), s.Version, s.StageStarted
		}
		return func(instance string) (uint64, time.Time) {
			switch {
			case moved.Contains(ns, instance):
				return r.Version, r.StageStarted
			case supV > 0 && sup.Contains(ns, instance):
				return supV, supAt
			}
			return floor, r.Started
		}, r.Version
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
