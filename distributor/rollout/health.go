package rollout

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// Measure is a stage's cohort measured against the instances outside it.
type Measure struct {
	// Instances in the cohort (their bucket is covered or they are named)
	// reporting on the config; OnTarget of them run the rollout's version.
	Instances int `json:"instances"`
	OnTarget  int `json:"on_target"`
	// Unhealthy and Failing count cohort instances whose health provider
	// says unhealthy, and those that failed to apply the version (or had
	// not applied it when the wait timed out).
	Unhealthy int `json:"unhealthy"`
	Failing   int `json:"failing"`
	// Outside* are the same counts over the live instances not in the cohort.
	Outside          int `json:"outside"`
	OutsideUnhealthy int `json:"outside_unhealthy"`
	OutsideFailing   int `json:"outside_failing"`
	// Waiting lists cohort instances not yet on the version and not failing.
	Waiting []string `json:"waiting,omitempty"`
	// Unheard lists the cohort instances in Waiting known live from the
	// report stream but not heard yet by this view (distributor.Unheard):
	// nothing is known of what they run, so they neither fail to apply nor
	// let a stage pass.
	Unheard []string `json:"unheard,omitempty"`
	// Bad lists cohort instances unhealthy or failing, with why.
	Bad []string `json:"bad,omitempty"`
}

// applyFailure says whether a report's last_error is a failure to apply
// version target: it names the version ("version N: STEP: detail",
// docs/PROTOCOL.md §4.3) at a step other than "pointer" and "stage". A
// refused pointer (a forgery, a damaged message) says nothing about the
// version it names, and a staging error is transient (a failed fetch, which
// the instance retries; a rejected version is reported at the validation
// hook's step): counted as failures, they halted a good strict version
// right after its flip, when the only reports were the staging ones
// (issue 15, item 3).
func applyFailure(lastErr string, target uint64) bool {
	n, ok := failedVersion(lastErr)
	return ok && n == target
}

// failedVersion returns the version a last_error says the instance failed
// to apply, ok false when it is not such a failure (see applyFailure).
func failedVersion(lastErr string) (uint64, bool) {
	rest, ok := strings.CutPrefix(lastErr, "version ")
	if !ok {
		return 0, false
	}
	num, rest, ok := strings.Cut(rest, ": ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, false
	}
	step, _, _ := strings.Cut(rest, ":")
	return n, step != "pointer" && step != "stage"
}

// measure counts the live reports on one config against a cohort. An
// instance failed to apply the target when its last error is an
// applyFailure of the target or, once timedOut, when it is still not on the
// target. An instance not heard yet is waiting, whatever the time: its
// report says nothing of what it runs.
func measure(ns string, reports []cuecast.Report, cohort Cohort, target uint64, timedOut bool) Measure {
	var m Measure
	for _, r := range reports {
		if !cohort.Contains(ns, r.Instance) {
			m.Outside++
			if !r.Healthy {
				m.OutsideUnhealthy++
			}
			if _, failed := failedVersion(r.LastError); failed {
				m.OutsideFailing++
			}
			continue
		}
		m.Instances++
		if distributor.Unheard(r) {
			m.Waiting = append(m.Waiting, r.Instance)
			m.Unheard = append(m.Unheard, r.Instance)
			continue
		}
		on := r.Version == target
		if on {
			m.OnTarget++
		}
		if !r.Healthy {
			m.Unhealthy++
			m.Bad = append(m.Bad, r.Instance+" unhealthy")
		}
		switch {
		case !on && applyFailure(r.LastError, target):
			m.Failing++
			m.Bad = append(m.Bad, r.Instance+" failed to apply: "+r.LastError)
		case !on && timedOut && r.LastError == goneError:
			m.Failing++
			m.Bad = append(m.Bad, fmt.Sprintf("%s stopped reporting before it applied v%d", r.Instance, target))
		case !on && timedOut:
			m.Failing++
			m.Bad = append(m.Bad, fmt.Sprintf("%s did not apply v%d in time (on v%d)", r.Instance, target, r.Version))
		case !on:
			m.Waiting = append(m.Waiting, r.Instance)
		}
	}
	return m
}

// breach says why the cohort's health breaches the stage's thresholds, or ""
// when it does not. A share is compared as the excess of the cohort's over
// the outside's: a fleet-wide problem that is not the new version's fault
// does not halt it.
func breach(m Measure, st cuecast.Stage) string {
	if m.Instances == 0 {
		return ""
	}
	share := func(n, of int) float64 {
		if of == 0 {
			return 0
		}
		return float64(n) / float64(of)
	}
	cu, ou := share(m.Unhealthy, m.Instances), share(m.OutsideUnhealthy, m.Outside)
	if cu-ou > st.MaxUnhealthy {
		return fmt.Sprintf("stage %s: %d/%d instances unhealthy (%.0f%%, outside the cohort %.0f%%; max excess %.0f%%): %s",
			st.Name, m.Unhealthy, m.Instances, 100*cu, 100*ou, 100*st.MaxUnhealthy, strings.Join(m.Bad, "; "))
	}
	cf, of := share(m.Failing, m.Instances), share(m.OutsideFailing, m.Outside)
	if cf-of > st.MaxApplyFailures {
		return fmt.Sprintf("stage %s: %d/%d instances failed to apply (%.0f%%, outside the cohort %.0f%%; max excess %.0f%%): %s",
			st.Name, m.Failing, m.Instances, 100*cf, 100*of, 100*st.MaxApplyFailures, strings.Join(m.Bad, "; "))
	}
	return ""
}
