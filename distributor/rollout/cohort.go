package rollout

import (
	"maps"
	"slices"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// Cohort is the set of instances a stage covers: every instance whose
// cohort bucket is in Buckets, and every instance named in Instances. The
// controller moves the buckets with bucket pointers and the instances with
// instance pointers, so a stage naming one host moves exactly that host,
// not everyone hashing into its bucket (docs/ROLLOUT.md).
//
// Both lists are sorted and hold no duplicates, and Instances holds no
// instance whose bucket is in Buckets (its bucket pointer moves it
// already), as stageCohort makes them; Contains relies on the order.
type Cohort struct {
	Buckets   []int    `json:"buckets,omitempty"`
	Instances []string `json:"instances,omitempty"`
}

// Contains reports whether the instance of namespace ns is in the cohort.
func (c Cohort) Contains(ns, instance string) bool {
	if _, ok := slices.BinarySearch(c.Buckets, cuecast.Cohort(ns, instance)); ok {
		return true
	}
	_, ok := slices.BinarySearch(c.Instances, instance)
	return ok
}

// Includes reports whether the instances r stands for are in the cohort:
// for a report made from a summary group (Count set), by the group's
// bucket, since its name is only one of them; the controller drills down
// for the instances a stage names or selects by label, which then come
// one by one (DrillDown).
func (c Cohort) Includes(ns string, r cuecast.Report) bool {
	if r.Count > 0 {
		_, ok := slices.BinarySearch(c.Buckets, r.Cohort)
		return ok
	}
	return c.Contains(ns, r.Instance)
}

// empty reports whether the cohort covers nobody: a stage's cohort is empty
// until the controller fixes it when the stage's pointers move. (Not
// IsZero: Rollout embeds Cohort, and encoding/json would take a promoted
// IsZero for the whole Rollout's.)
func (c Cohort) empty() bool { return len(c.Buckets) == 0 && len(c.Instances) == 0 }

// StageCohort returns the cohort of stages 0..i of r (stages are
// cumulative): for r's current stage the one the controller fixed when the
// stage's pointers moved, otherwise (a stage to come, or the current one
// before it moved) computed from the policy, with label selectors matched
// against reports, the live reports on r's config.
func (r *Rollout) StageCohort(i int, reports []cuecast.Report) Cohort {
	if i == r.Stage && r.State != StateStaging && !r.Cohort.empty() {
		return r.Cohort
	}
	return stageCohort(r.Config.Namespace(), r.Policy, i, reports)
}

// stageCohort returns the cohort stages 0..upto of p cover in namespace ns:
// the buckets below each stage's percentage, the instances each names, and
// the live instances (in reports) whose labels match each stage's labels.
// A named or matched instance whose bucket is covered anyway is left out of
// Instances: its bucket pointer moves it, and an instance pointer too
// would only be a second write saying the same.
func stageCohort(ns string, p cuecast.Policy, upto int, reports []cuecast.Report) Cohort {
	buckets := map[int]bool{}
	named := map[string]bool{}
	for i := 0; i <= upto && i < len(p.Stages); i++ {
		st := p.Stages[i]
		for b := range min(st.Percent, cuecast.Buckets) {
			buckets[b] = true
		}
		for _, id := range st.Instances {
			named[id] = true
		}
		if len(st.Labels) > 0 {
			for _, r := range reports {
				// A summary group names one of its instances only:
				// the controller drilled down for those that match.
				if r.Count == 0 && distributor.LabelsMatch(r.Labels, st.Labels) {
					named[r.Instance] = true
				}
			}
		}
	}
	return cohortOf(ns, buckets, named)
}

// union is c with every bucket and instance of d as well: a later stage's
// cohort holds everyone an earlier stage moved, even an instance whose
// labels no longer match, so that a halt moves it back too.
func (c Cohort) union(ns string, d Cohort) Cohort {
	buckets := map[int]bool{}
	named := map[string]bool{}
	for _, x := range [2]Cohort{c, d} {
		for _, b := range x.Buckets {
			buckets[b] = true
		}
		for _, id := range x.Instances {
			named[id] = true
		}
	}
	return cohortOf(ns, buckets, named)
}

// cohortOf makes a Cohort of sets, leaving out named instances whose bucket
// is covered (its bucket pointer moves them already).
func cohortOf(ns string, buckets map[int]bool, named map[string]bool) Cohort {
	for id := range named {
		if buckets[cuecast.Cohort(ns, id)] {
			delete(named, id)
		}
	}
	return Cohort{Buckets: slices.Sorted(maps.Keys(buckets)), Instances: slices.Sorted(maps.Keys(named))}
}
