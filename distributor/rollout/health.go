package rollout

import (
	"fmt"
	"maps"
	"slices"
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
	// WaitingCount and UnheardCount count the instances Waiting and
	// Unheard list: a report made from a region's summary stands for
	// several (cuecast.Report.Count) and is listed once, as "name and N
	// like it".
	WaitingCount int `json:"waiting_count,omitempty"`
	UnheardCount int `json:"unheard_count,omitempty"`
	// waitingOne are the waiting instances reported one by one, which
	// the controller can follow by name (Rollout.Unconfirmed): on a
	// summarised fleet, by drilling down to them (Rollout.DetailRequest).
	waitingOne []string
	// byRegion are the same counts per region (cuecast.Report.Region; ""
	// for the instances reporting here), which breach judges each region
	// by too.
	byRegion map[string]*shares
}

// shares are the counts a cohort's health is judged on: the cohort's
// instances, how many of them are unhealthy and failing, and the same
// outside it.
type shares struct {
	instances, unhealthy, failing             int
	outside, outsideUnhealthy, outsideFailing int
}

// region returns the counts of region, made when first asked.
func (m *Measure) region(region string) *shares {
	if m.byRegion == nil {
		m.byRegion = map[string]*shares{}
	}
	sh := m.byRegion[region]
	if sh == nil {
		sh = &shares{}
		m.byRegion[region] = sh
	}
	return sh
}

// named is how a list names the instances r stands for.
func named(r cuecast.Report) string {
	if w := r.Weight(); w > 1 {
		return fmt.Sprintf("%s and %d like it", r.Instance, w-1)
	}
	return r.Instance
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

// failedVersion is distributor.FailedVersion: the one rule, which
// summaries count by too.
func failedVersion(lastErr string) (uint64, bool) { return distributor.FailedVersion(lastErr) }

// measure counts the live reports on one config against a cohort. An
// instance failed to apply the target when its last error is an
// applyFailure of the target or, once timedOut, when it is still not on the
// target. An instance not heard yet is waiting, whatever the time: its
// report says nothing of what it runs. A report that several regions
// claimed (worstClaims) counts once in the whole fleet and in the part of
// each of them.
func measure(ns string, reports []cuecast.Report, cohort Cohort, target uint64, timedOut bool) Measure {
	var m Measure
	for _, r := range reports {
		w := r.Weight()
		var regions []*shares
		for _, region := range Claimants(r) {
			regions = append(regions, m.region(region))
		}
		// add counts w in whole and in each claimant region's part.
		add := func(whole *int, part func(*shares) *int) {
			*whole += w
			for _, sh := range regions {
				*part(sh) += w
			}
		}
		if !cohort.Includes(ns, r) {
			add(&m.Outside, func(sh *shares) *int { return &sh.outside })
			if !r.Healthy {
				add(&m.OutsideUnhealthy, func(sh *shares) *int { return &sh.outsideUnhealthy })
			}
			if _, failed := failedVersion(r.LastError); failed {
				add(&m.OutsideFailing, func(sh *shares) *int { return &sh.outsideFailing })
			}
			continue
		}
		add(&m.Instances, func(sh *shares) *int { return &sh.instances })
		if distributor.Unheard(r) {
			m.wait(r)
			m.Unheard = append(m.Unheard, named(r))
			m.UnheardCount += w
			continue
		}
		on := r.Version == target
		if on {
			m.OnTarget += w
		}
		if !r.Healthy {
			add(&m.Unhealthy, func(sh *shares) *int { return &sh.unhealthy })
			m.Bad = append(m.Bad, named(r)+" unhealthy")
		}
		failing := func(why string) {
			add(&m.Failing, func(sh *shares) *int { return &sh.failing })
			m.Bad = append(m.Bad, why)
		}
		switch {
		case !on && applyFailure(r.LastError, target):
			failing(named(r) + " failed to apply: " + r.LastError)
		case !on && timedOut && r.LastError == goneError:
			failing(fmt.Sprintf("%s stopped reporting before it applied v%d", named(r), target))
		case !on && timedOut:
			failing(fmt.Sprintf("%s did not apply v%d in time (on v%d)", named(r), target, r.Version))
		case !on:
			m.wait(r)
		}
	}
	return m
}

// claimSep joins the regions that claimed one instance in the Region of
// the report worstClaims keeps of their claims; no region's name has it
// (cuecast.ValidSegment).
const claimSep = "+"

// Claimants are the regions whose part of the fleet r counts in: its
// Region, or each region that claimed the instance when several did
// (Drill.Reports).
func Claimants(r cuecast.Report) []string { return strings.Split(r.Region, claimSep) }

// followed says whether the controller can follow the instance r reports
// on by name while it waits for it (Rollout.Unconfirmed): r stands for one
// instance and names it. A summary's report for one instance names it only
// when the instance is in the summary's sample; a bucket's other reports
// are named after their region, bucket and group (distributor.GroupName),
// which name no instance and change with the summary.
//
// An Unheard report of a region (one whose summary is overdue) is no word
// from the instance it names, a sampled one: followed by name it was asked
// of a region that had stopped answering, which failed every step
// (Deploy's too) until the summary expired; recorded by name, it would
// then be waited for as one that stopped reporting, and halt the stage at
// ApplyTimeout, where the loss rule judges without it
// (TestSilentRegionHoldsTheRolloutUntilItsSummaryExpires). The
// controller's own view's Unheard report (no region, no count:
// distributor.LiveReports.Expect) is followed: the report stream holds a
// live report of that very instance, and its last report, read a
// heartbeat and a quarter later, may be expired by then and leave the
// view; not followed, it dropped out unnoticed although the note had named
// it, and a strict cutover flipped without it
// (TestUnheardInstanceStaysWaitedFor).
func followed(r cuecast.Report) bool {
	if distributor.Unheard(r) && (r.Region != "" || r.Count != 0) {
		return false
	}
	return r.Weight() == 1 && cuecast.ValidateInstance(r.Instance) == nil
}

// wait lists r as waited for.
func (m *Measure) wait(r cuecast.Report) {
	m.Waiting = append(m.Waiting, named(r))
	m.WaitingCount += r.Weight()
	if followed(r) {
		m.waitingOne = append(m.waitingOne, r.Instance)
	}
}

// breach says why the cohort's health breaches the stage's thresholds, or ""
// when it does not. A share is compared as the excess of the cohort's over
// the outside's: a fleet-wide problem that is not the new version's fault
// does not halt it.
//
// On a fleet of several regions (cuecast.Report.Region) each region's part
// of the cohort is judged against its own region's outside as well, and
// either breach halts. A region's counts are its summarizer's word, which
// nothing bounds: a region claiming a million unhealthy instances outside
// the cohort made the whole fleet's outside share ~100%, and a canary 10
// of 10 unhealthy in another region passed. Judged within its own region
// too, a region's canary is judged on that region's word alone; another
// region's claims can only add a halt, which that region could cause
// anyway by misstating its own instances. One region (a single server)
// is the whole fleet, judged as before.
func breach(m Measure, st cuecast.Stage) string {
	if m.Instances == 0 {
		return ""
	}
	whole := shares{m.Instances, m.Unhealthy, m.Failing, m.Outside, m.OutsideUnhealthy, m.OutsideFailing}
	if why := whole.breach(st, "", m.Bad); why != "" || len(m.byRegion) < 2 {
		return why
	}
	for _, region := range slices.Sorted(maps.Keys(m.byRegion)) {
		where := "in region " + region + ", "
		if region == "" {
			where = "among the instances reporting here, "
		}
		if why := m.byRegion[region].breach(st, where, m.Bad); why != "" {
			return why
		}
	}
	return ""
}

// breach is the health rule on one set of counts (Measure's breach);
// where says which part of the fleet they count, bad is listed as why.
func (sh shares) breach(st cuecast.Stage, where string, bad []string) string {
	if sh.instances == 0 {
		return ""
	}
	share := func(n, of int) float64 {
		if of == 0 {
			return 0
		}
		return float64(n) / float64(of)
	}
	cu, ou := share(sh.unhealthy, sh.instances), share(sh.outsideUnhealthy, sh.outside)
	if cu-ou > st.MaxUnhealthy {
		return fmt.Sprintf("stage %s: %s%d/%d instances unhealthy (%.0f%%, outside the cohort %.0f%%; max excess %.0f%%): %s",
			st.Name, where, sh.unhealthy, sh.instances, 100*cu, 100*ou, 100*st.MaxUnhealthy, strings.Join(bad, "; "))
	}
	cf, of := share(sh.failing, sh.instances), share(sh.outsideFailing, sh.outside)
	if cf-of > st.MaxApplyFailures {
		return fmt.Sprintf("stage %s: %s%d/%d instances failed to apply (%.0f%%, outside the cohort %.0f%%; max excess %.0f%%): %s",
			st.Name, where, sh.failing, sh.instances, 100*cf, 100*of, 100*st.MaxApplyFailures, strings.Join(bad, "; "))
	}
	return ""
}
