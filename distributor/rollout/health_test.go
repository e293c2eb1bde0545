package rollout

import (
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
)

// idsIn returns n instance IDs hashing into buckets [lo, hi) of "payments".
func idsIn(prefix string, lo, hi, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		id := prefix + "-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if b := cuecast.Cohort("payments", id); b >= lo && b < hi {
			out = append(out, id)
		}
	}
	return out
}

// TestStageCohort: percentages cover buckets, instances and labels cover
// exactly those instances (not their buckets), stages are cumulative, and an
// instance whose bucket is covered anyway is left to its bucket pointer.
func TestStageCohort(t *testing.T) {
	t.Parallel()
	named := idsIn("host", 40, 60, 1)[0]
	labelled := idsIn("lab", 70, 80, 1)[0]
	early := idsIn("early", 0, 10, 1)[0] // named, but inside the 10% stage's buckets
	reports := []cuecast.Report{
		{Instance: labelled, Labels: map[string]string{"canary": "true", "region": "eu"}},
		{Instance: "plain", Labels: map[string]string{"region": "eu"}},
		{Instance: early, Labels: map[string]string{"canary": "true"}},
	}
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "hosts", Instances: []string{named, named}},
		{Name: "labelled", Labels: map[string]string{"canary": "true"}},
		{Name: "tenth", Percent: 10},
		{Name: "all", Percent: 100},
	}}
	tenth := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, tc := range []struct {
		name    string
		upto    int
		reports []cuecast.Report
		want    Cohort
	}{
		{"named instance only", 0, reports, Cohort{Instances: []string{named}}},
		{"labels match live instances", 1, reports, Cohort{Instances: sortedStrings(named, labelled, early)}},
		{"labels without reports match nobody", 1, nil, Cohort{Instances: []string{named}}},
		{"percent covers buckets; covered instances left to them", 2, reports, Cohort{Buckets: tenth, Instances: sortedStrings(named, labelled)}},
		{"all buckets, no instance pointers", 3, reports, Cohort{Buckets: allBuckets()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stageCohort("payments", pol, tc.upto, tc.reports)
			if !slices.Equal(got.Buckets, tc.want.Buckets) || !slices.Equal(got.Instances, tc.want.Instances) {
				t.Errorf("stages 0..%d: got %+v, want %+v", tc.upto, got, tc.want)
			}
		})
	}
}

// TestCohortContains: an instance is in a cohort when its bucket is covered
// or it is named; naming one does not take its bucket-mates along.
func TestCohortContains(t *testing.T) {
	t.Parallel()
	named := idsIn("host", 40, 41, 1)[0]
	mate := idsIn("mate", 40, 41, 1)[0] // same bucket as named
	inBucket := idsIn("low", 0, 10, 1)[0]
	co := Cohort{Buckets: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, Instances: []string{named}}
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{named, true},
		{mate, false},
		{inBucket, true},
		{"nobody", cuecast.Cohort("payments", "nobody") < 10},
	} {
		if got := co.Contains("payments", tc.id); got != tc.want {
			t.Errorf("Contains(%s, bucket %d): got %t, want %t", tc.id, cuecast.Cohort("payments", tc.id), got, tc.want)
		}
	}
	if (Cohort{}).Contains("payments", named) {
		t.Errorf("the empty cohort contains %s", named)
	}
}

func sortedStrings(v ...string) []string {
	slices.Sort(v)
	return slices.Compact(v)
}

func TestMeasureAndBreach(t *testing.T) {
	t.Parallel()
	in := idsIn("in", 0, 10, 4)
	out := idsIn("out", 10, 100, 4)
	named := idsIn("named", 50, 100, 1)[0] // outside the buckets, in the cohort by name
	cohort := Cohort{Buckets: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, Instances: []string{named}}
	rep := func(id string, v uint64, healthy bool, lastErr string) cuecast.Report {
		return cuecast.Report{Instance: id, Version: v, Healthy: healthy, LastError: lastErr}
	}
	healthy := func(ids []string, v uint64) []cuecast.Report {
		var rs []cuecast.Report
		for _, id := range ids {
			rs = append(rs, rep(id, v, true, ""))
		}
		return rs
	}
	stage := cuecast.Stage{Name: "early", MaxUnhealthy: 0.2, MaxApplyFailures: 0}
	for _, tc := range []struct {
		name     string
		reports  []cuecast.Report
		timedOut bool
		breach   string // substring; "" means none
		waiting  int
	}{
		{"all healthy on target", slices.Concat(healthy(in, 2), healthy(out, 1)), false, "", 0},
		{"one waiting", slices.Concat(healthy(in[:3], 2), healthy(in[3:], 1), healthy(out, 1)), false, "", 1},
		{"waiting past the timeout fails", slices.Concat(healthy(in[:3], 2), healthy(in[3:], 1), healthy(out, 1)), true, "failed to apply", 0},
		{"one of four unhealthy is 25% > 20%", slices.Concat(healthy(in[:3], 2), []cuecast.Report{rep(in[3], 2, false, "")}, healthy(out, 1)), false, "unhealthy", 0},
		{"fleet-wide unhealthiness is not the version's fault",
			slices.Concat(healthy(in[:3], 2), []cuecast.Report{rep(in[3], 2, false, ""), rep(out[0], 1, false, "")}, healthy(out[1:], 1)), false, "", 0},
		{"validation failure names the version", slices.Concat(healthy(in[:3], 2), []cuecast.Report{rep(in[3], 1, true, "version 2: validation hook: bad")}, healthy(out, 1)), false, "failed to apply", 0},
		{"an old error is not a failure of this version", slices.Concat(healthy(in[:3], 2), []cuecast.Report{rep(in[3], 1, true, "version 1: fetch: timeout")}, healthy(out, 1)), false, "", 1},
		{"no cohort instances, nothing to judge", healthy(out, 1), true, "", 0},
		{"a named instance counts in the cohort", slices.Concat(healthy(in[:3], 2), []cuecast.Report{rep(named, 2, false, "")}, healthy(out, 1)), false, "unhealthy", 0},
		{"a named instance waits like the others", slices.Concat(healthy(in, 2), healthy([]string{named}, 1), healthy(out, 1)), false, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := measure("payments", tc.reports, cohort, 2, tc.timedOut)
			got := breach(m, stage)
			if (tc.breach == "") != (got == "") || !strings.Contains(got, tc.breach) {
				t.Errorf("breach: got %q, want %q", got, tc.breach)
			}
			if len(m.Waiting) != tc.waiting {
				t.Errorf("waiting: got %v, want %d", m.Waiting, tc.waiting)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   cuecast.Policy
		want []string
	}{
		{"empty is the default", cuecast.Policy{}, []string{"all"}},
		{"ends at 100", cuecast.Policy{Stages: []cuecast.Stage{{Name: "c", Percent: 1}, {Name: "all", Percent: 100}}}, []string{"c", "all"}},
		{"a partial last stage gets the rest", cuecast.Policy{Stages: []cuecast.Stage{{Name: "hosts", Instances: []string{"a"}}}}, []string{"hosts", "rest"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range normalize(tc.in).Stages {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
