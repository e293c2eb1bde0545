package web

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/metrics"
	"github.com/cuecast/cuecast/tailer"
)

func TestGitHubBase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://github.com/acme/configs.git", "https://github.com/acme/configs"},
		{"https://github.com/acme/configs", "https://github.com/acme/configs"},
		{"git@github.com:acme/configs.git", "https://github.com/acme/configs"},
		{"ssh://git@github.com/acme/configs.git", "https://github.com/acme/configs"},
		{"https://GitHub.com/acme/configs/", "https://github.com/acme/configs"},
		{"https://gitlab.com/acme/configs.git", ""},
		{"https://github.com/acme", ""},
		{"https://github.com/acme/configs/tree/main", ""},
		{"/srv/git/configs", ""},
		{"file:///srv/git/configs", ""},
	} {
		if got := githubBase(c.in); got != c.want {
			t.Errorf("githubBase(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestHaltCause(t *testing.T) {
	for _, c := range []struct{ reason, want string }{
		{"stage canary: 2/4 instances unhealthy (50%, outside the cohort 0%; max excess 0%): a: x", "unhealthy"},
		{"stage early: 1/10 instances failed to apply (10%, outside the cohort 0%; max excess 1%): b: version 3: bad", "apply_failures"},
		{"strict cutover of v4 blocked: 2 instances failed to stage it (a, b)", "strict_stage_failed"},
		{"strict cutover of v4 blocked: 3 instances did not confirm within 5m0s (a, b, c)", "strict_unconfirmed"},
		{"error rate up on checkout-7 (pager 1234)", "operator"},
		{"", "operator"},
	} {
		if got := haltCause(&rollout.Rollout{Reason: c.reason}); got != c.want {
			t.Errorf("haltCause(%q) = %q, want %q", c.reason, got, c.want)
		}
	}
}

func TestChartSVG(t *testing.T) {
	v := func(n uint64) cuecast.Version {
		return cuecast.Version{Version: n, Commit: "0123456789abcdef<script>"}
	}
	for _, c := range []struct {
		name   string
		series []metrics.Series
		want   []string
		absent []string
	}{
		{"empty", nil, []string{"No version has propagated"}, []string{"<polyline"}},
		{"one version everywhere", []metrics.Series{{Version: v(7), Current: true,
			Points:  []metrics.Point{{Elapsed: 100 * time.Millisecond, Share: 0.5, Instances: 2}, {Elapsed: 250 * time.Millisecond, Share: 1, Instances: 2}},
			Reached: map[string]time.Duration{"0.5": 100 * time.Millisecond, "1": 250 * time.Millisecond}}},
			[]string{`data-version="7"`, "v7 0123456", "100% after 250ms", "<circle", "since commit",
				// Full width, and each sample's values on hover (issue 17).
				`width="100%"`, "<title>v7: 50% of 2 instances, 100ms after its commit</title>"}, []string{"<script>"}},
		{"two versions, one partial", []metrics.Series{
			{Version: v(1), Points: []metrics.Point{{Elapsed: 2 * time.Second, Share: 1, Instances: 3}}, Reached: map[string]time.Duration{"1": 2 * time.Second}},
			{Version: v(2), Current: true, Points: []metrics.Point{{Elapsed: 90 * time.Second, Share: 2.0 / 3, Instances: 3}}, Reached: map[string]time.Duration{"0.5": 90 * time.Second}},
		}, []string{`data-version="1"`, `data-version="2"`, "67% of 3", "1m30s"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			svg := chartSVG(c.series)
			if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
				t.Fatalf("not well-formed XML: %v\n%s", err, svg)
			}
			for _, w := range c.want {
				if !strings.Contains(svg, w) {
					t.Errorf("chart lacks %q:\n%s", w, svg)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(svg, a) {
					t.Errorf("chart contains %q", a)
				}
			}
			if n := strings.Count(svg, "<polyline"); n != len(c.series) {
				t.Errorf("%d lines for %d versions, want one each", n, len(c.series))
			}
		})
	}
}

func TestXTick(t *testing.T) {
	for _, c := range []struct {
		xmax, want time.Duration
	}{
		{0, time.Millisecond},
		{40 * time.Millisecond, 10 * time.Millisecond},
		{3 * time.Second, time.Second},
		{90 * time.Second, 30 * time.Second},
		{2 * time.Hour, 30 * time.Minute},
	} {
		if got := xTick(c.xmax); got != c.want {
			t.Errorf("xTick(%v) = %v, want %v", c.xmax, got, c.want)
		}
	}
}

func TestLiveFleet(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const cfg = cuecast.ConfigPath("a/b")
	rep := func(id string, v uint64, at time.Duration) cuecast.Report {
		return cuecast.Report{Config: cfg, Instance: id, Version: v, Checksum: "c" + string(rune('0'+v)), At: t0.Add(at)}
	}
	target := cuecast.Version{Config: cfg, Version: 2, Checksum: "c2"}
	l := newLiveFleet()
	l.reset(t0, map[cuecast.ConfigPath][]cuecast.Report{cfg: {rep("i1", 1, 0), rep("i2", 1, 0), rep("gone", 1, 0)}})
	if got := l.sample(cfg, target); got.Instances != 3 || got.OnTarget != 0 {
		t.Fatalf("after the first sample: %d/%d on v2, want 0/3", got.OnTarget, got.Instances)
	}
	// The feed delivers i1 on v2, then a report older than what it holds.
	l.add(rep("i1", 2, 2*time.Second), t0.Add(2*time.Second))
	l.add(rep("i1", 1, time.Second), t0.Add(2*time.Second))
	if got := l.sample(cfg, target); got.OnTarget != 1 {
		t.Fatalf("after the feed: %d on v2, want 1", got.OnTarget)
	}
	// A sample read from 1s on misses i1's new report and no longer has
	// "gone" (expired); a new instance arrives by the feed after it started.
	l.add(rep("new", 2, 3*time.Second), t0.Add(3*time.Second))
	l.reset(t0.Add(time.Second), map[cuecast.ConfigPath][]cuecast.Report{cfg: {rep("i1", 1, 0), rep("i2", 1, 0)}})
	got := l.sample(cfg, target)
	if got.Instances != 3 || got.OnTarget != 2 {
		t.Errorf("after the second sample: %d/%d on v2, want 2/3 (i1 and new kept from the feed, gone dropped)", got.OnTarget, got.Instances)
	}
	// Another checksum under the target's number is not the target.
	l.add(cuecast.Report{Config: cfg, Instance: "i2", Version: 2, Checksum: "zz", At: t0.Add(4 * time.Second)}, t0.Add(4*time.Second))
	if got := l.sample(cfg, target); got.OnTarget != 2 {
		t.Errorf("with a drifted i2: %d on target, want 2", got.OnTarget)
	}
	// A region's summary groups (docs/SCALING.md) stand for Count
	// instances each: 5 on v2 and 3 on v1 are 5 of 8, not 1 of 2.
	g5, g3 := rep("r-1", 2, 5*time.Second), rep("r-2", 1, 5*time.Second)
	g5.Count, g3.Count = 5, 3
	l.reset(t0.Add(5*time.Second), map[cuecast.ConfigPath][]cuecast.Report{cfg: {g5, g3}})
	if got := l.sample(cfg, target); got.Instances != 8 || got.OnTarget != 5 {
		t.Errorf("with summary groups: %d/%d on v2, want 5/8", got.OnTarget, got.Instances)
	}
}

func TestHaltKey(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &rollout.Rollout{ID: "r1", State: rollout.StateHalted, Updated: t0.Add(time.Minute),
		Log: []rollout.Step{{At: t0, State: rollout.StateHalted}, {At: t0.Add(time.Second), State: rollout.StateWaiting}}}
	first := haltKey(r)
	r.Note, r.Updated = "still halted", t0.Add(2*time.Minute)
	if again := haltKey(r); again != first {
		t.Errorf("the same halt gave keys %q and %q", first, again)
	}
	r.Log = append(r.Log, rollout.Step{At: t0.Add(3 * time.Minute), State: rollout.StateHalted})
	second := haltKey(r)
	if second == first {
		t.Errorf("a second halt has the first one's key %q", first)
	}
	// A step the controller adds while it stays halted (an operator's halt,
	// then "no earlier version to move the cohort back to") is the same
	// halt: a sample between the two must not count it twice.
	r.Log = append(r.Log, rollout.Step{At: t0.Add(4 * time.Minute), State: rollout.StateHalted, Detail: "no earlier version"})
	if again := haltKey(r); again != second {
		t.Errorf("a further step of one halt changed its key from %q to %q", second, again)
	}
}

// TestAppliedBy: propagation is timed by when the instances on target applied
// it, as their reports say, not by when the spread-out reports arrived.
func TestAppliedBy(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const cfg = cuecast.ConfigPath("a/b")
	target := cuecast.Version{Config: cfg, Version: 2, Checksum: "c2"}
	l := newLiveFleet()
	if got := l.appliedBy(cfg, target); !got.IsZero() {
		t.Fatalf("empty fleet: got %v, want zero", got)
	}
	for _, r := range []cuecast.Report{
		{Instance: "i1", Version: 2, Checksum: "c2", AppliedAt: t0.Add(30 * time.Millisecond)},
		{Instance: "i2", Version: 2, Checksum: "c2", AppliedAt: t0.Add(45 * time.Millisecond)},
		{Instance: "i3", Version: 1, Checksum: "c1", AppliedAt: t0.Add(time.Second)},     // not on target
		{Instance: "i4", Version: 2, Checksum: "zz", AppliedAt: t0.Add(2 * time.Second)}, // drifted
		{Instance: "i5", Version: 2, Checksum: "c2"},                                     // an old client: no applied_at
	} {
		r.Config, r.At = cfg, t0.Add(900*time.Millisecond)
		l.add(r, r.At)
	}
	if got, want := l.appliedBy(cfg, target), t0.Add(45*time.Millisecond); !got.Equal(want) {
		t.Errorf("got %v, want the latest apply on target, %v", got, want)
	}
}

// TestRolloutStagesCountNamedInstances: a stage naming an instance counts
// that instance, not the other instances of its cohort bucket; the current
// stage counts the cohort the controller fixed.
func TestRolloutStagesCountNamedInstances(t *testing.T) {
	const cfg = cuecast.ConfigPath("payments/checkout")
	// named and mate share bucket 40; two more instances are in buckets 0-9.
	var named, mate string
	var low []string
	for i := 0; named == "" || mate == "" || len(low) < 2; i++ {
		id := fmt.Sprintf("host-%d", i)
		switch b := cuecast.Cohort(cfg.Namespace(), id); {
		case b == 40 && named == "":
			named = id
		case b == 40 && mate == "":
			mate = id
		case b < 10 && len(low) < 2:
			low = append(low, id)
		}
	}
	reports := []cuecast.Report{
		{Instance: named, Version: 2, Checksum: "c2", Healthy: true},
		{Instance: mate, Version: 1, Checksum: "c1", Healthy: true},
	}
	for _, id := range low {
		reports = append(reports, cuecast.Report{Instance: id, Version: 1, Checksum: "c1", Healthy: true})
	}
	rec := rollout.Record{Config: cfg, Stable: 1, Current: &rollout.Rollout{
		Config: cfg, Version: 2, Checksum: "c2", From: 1, State: rollout.StateHolding,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "host", Instances: []string{named}},
			{Name: "tenth", Percent: 10},
			{Name: "all", Percent: 100},
		}},
		Cohort: rollout.Cohort{Instances: []string{named}},
	}}
	rv := rolloutOf(rec, reports, time.Now())
	for i, want := range []struct{ instances, onTarget int }{{1, 1}, {3, 1}, {4, 1}} {
		if got := rv.Stages[i]; got.Instances != want.instances || got.OnTarget != want.onTarget {
			t.Errorf("stage %s: got %d/%d on v2, want %d/%d", got.Name, got.OnTarget, got.Instances, want.onTarget, want.instances)
		}
	}
}

// TestRolloutViewShowsNoPastDeadline: the dashboard showed "holding until
// 5:20:09 PM" long after that time, for a stage held by min_instances. The
// view's deadline is the next one ahead, and the note names none passed.
func TestRolloutViewShowsNoPastDeadline(t *testing.T) {
	now := time.Date(2026, 12, 1, 17, 30, 0, 0, time.UTC)
	hold, enough := now.Add(-10*time.Minute), now.Add(5*time.Minute)
	rec := rollout.Record{Config: "payments/checkout", Stable: 1, Current: &rollout.Rollout{
		Config: "payments/checkout", Version: 2, From: 1, State: rollout.StateHolding,
		Policy:    cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1, MinInstances: 2}, {Name: "all", Percent: 100}}},
		Cohort:    rollout.Cohort{Buckets: []int{0}},
		HoldUntil: hold, EnoughBy: enough,
		Note: "holding until " + hold.Format(time.RFC3339),
	}}
	rv := rolloutOf(rec, nil, now)
	if !rv.HoldUntil.Equal(enough) {
		t.Errorf("hold_until %s, want the next deadline %s", rv.HoldUntil, enough)
	}
	if strings.Contains(rv.Note, hold.Format(time.RFC3339)) || strings.Contains(rv.Note, rollout.FormatTime(hold)) {
		t.Errorf("note %q names the past hold", rv.Note)
	}
	if want := "judged again by " + rollout.FormatTime(enough); !strings.Contains(rv.Note, want) {
		t.Errorf("note %q, want %q, in the one time format", rv.Note, want)
	}
	rv = rolloutOf(rec, nil, enough.Add(time.Second))
	if !rv.HoldUntil.IsZero() {
		t.Errorf("hold_until %s after every deadline passed, want none", rv.HoldUntil)
	}
}

// TestStragglerAlertQuietOnStagedRollout: OPERATIONS.md's alert
// cuecast_config_stragglers > 0 stays false through a normal staged rollout
// (the canary on v2, everyone else on v1 as the rollout means them) and
// after a halt moved the canary back; it fires for a canary that never
// took v2. Counted against the newest version, every instance outside the
// canary was a straggler.
func TestStragglerAlertQuietOnStagedRollout(t *testing.T) {
	const cfg cuecast.ConfigPath = "payments/checkout"
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	var canary string
	var rest []string
	for i := 0; canary == "" || len(rest) < 3; i++ {
		id := fmt.Sprintf("checkout-%d", i)
		switch b := cuecast.Cohort(cfg.Namespace(), id); {
		case b == 0 && canary == "":
			canary = id
		case b > 0 && len(rest) < 3:
			rest = append(rest, id)
		}
	}
	latest := cuecast.Version{Config: cfg, Version: 2, Checksum: "c2"}
	fleet := func(canaryOn uint64) []cuecast.Report {
		rs := []cuecast.Report{{Config: cfg, Instance: canary, Version: canaryOn, Healthy: true}}
		for _, id := range rest {
			rs = append(rs, cuecast.Report{Config: cfg, Instance: id, Version: 1, Healthy: true})
		}
		return rs
	}
	ro := func(state rollout.State) rollout.Record {
		return rollout.Record{Config: cfg, Stable: 1, Floor: 1, Current: &rollout.Rollout{
			Config: cfg, Version: 2, From: 1, State: state, Started: t0, StageStarted: t0, Updated: t0,
			Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1}, {Name: "all", Percent: 100}}},
			Cohort: rollout.Cohort{Buckets: []int{0}},
		}}
	}
	for _, c := range []struct {
		name    string
		rec     rollout.Record
		reports []cuecast.Report
		want    float64
	}{
		{"canary holding", ro(rollout.StateHolding), fleet(2), 0},
		{"halted, canary back on v1", ro(rollout.StateHalted), fleet(1), 0},
		{"canary holding, canary never took v2", ro(rollout.StateHolding), fleet(1), 1},
	} {
		intent, target := rollout.IntentsOf([]rollout.Record{c.rec})(cfg, latest, t0)
		st := distributor.Summarize(latest, t0, c.reports, intent, target, 20*time.Second, now)
		m := metrics.New(metrics.Options{})
		s := &Server{}
		m.ObserveFleet(now, s.fleetSamples(&snapshot{status: []distributor.ConfigStatus{st}}))
		got := -1.0
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "cuecast_config_stragglers" {
				got = mf.Metric[0].GetGauge().GetValue()
			}
		}
		if got != c.want {
			t.Errorf("%s: cuecast_config_stragglers = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRefusedShownApartFromFailing: an instance whose last report refused
// a forged pointer is counted and listed as refused, with the refusal and
// its labels, and not as failing or unhealthy; an apply failure is failing
// and not refused (issue 15 item 5: every refused forgery made an honest
// instance look failing).
func TestRefusedShownApartFromFailing(t *testing.T) {
	const cfg cuecast.ConfigPath = "payments/checkout"
	now := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	reports := []cuecast.Report{
		{Instance: "web-1", Config: cfg, Version: 1, Checksum: "c1", Healthy: true},
		{Instance: "web-2", Config: cfg, Version: 1, Checksum: "c1", Healthy: true, LastError: "version 2: validate: no"},
		{Instance: "web-3", Config: cfg, Version: 1, Checksum: "c1", Healthy: true, Refused: "version 2: pointer: bad signature",
			Labels: map[string]string{"zone": "eu-1"}},
	}
	latest := cuecast.Version{Config: cfg, Version: 1, Checksum: "c1"}
	st := distributor.Summarize(latest, now, reports, nil, 0, time.Minute, now)
	s := &Server{}
	snap := &snapshot{status: []distributor.ConfigStatus{st}, reports: map[cuecast.ConfigPath][]cuecast.Report{cfg: reports}}
	row := s.row(snap, st)
	if row.Failing != 1 || row.Refused != 1 || row.Unhealthy != 0 {
		t.Errorf("row: failing %d, refused %d, unhealthy %d; want 1, 1, 0", row.Failing, row.Refused, row.Unhealthy)
	}
	refused := instances(st.Refused)
	if len(refused) != 1 || refused[0].Instance != "web-3" || refused[0].Refused != "version 2: pointer: bad signature" ||
		refused[0].LastError != "" || refused[0].Labels["zone"] != "eu-1" {
		t.Errorf("refused instances: %+v; want web-3 with its refusal and labels", refused)
	}
	rec := rollout.Record{Config: cfg, Stable: 1, Current: &rollout.Rollout{
		Config: cfg, Version: 2, Checksum: "c2", From: 1, State: rollout.StateHolding,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}},
		Cohort: rollout.Cohort{Buckets: allBuckets()},
	}}
	rv := rolloutOf(rec, reports, now)
	if sv := rv.Stages[0]; sv.Failing != 1 || sv.Refused != 1 {
		t.Errorf("stage all: failing %d, refused %d; want 1 and 1", sv.Failing, sv.Refused)
	}
}

func allBuckets() []int {
	b := make([]int, cuecast.Buckets)
	for i := range b {
		b[i] = i
	}
	return b
}

// TestRejectedBadgeClearedByFix: a rejection counts as open until a later
// commit compiles; then it is listed as fixed and no longer counted (the
// "1 rejected" badge stayed after the fix, issue 17).
func TestRejectedBadgeClearedByFix(t *testing.T) {
	at := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	rj := tailer.Rejected{Commit: "bad", At: at, Total: 1}
	st := &tailer.State{Cursor: "bad", Base: "good", Rejected: []tailer.Rejected{rj}}
	older := []distributor.ConfigStatus{{Latest: cuecast.Version{Config: "payments/checkout", Version: 1, CompiledAt: at.Add(-time.Minute)}}}
	s := &Server{o: Options{Tailer: fixedTailer{}}}
	tv := s.tailerView(&snapshot{tailer: st, status: older})
	if tv.Open != 1 || tv.Rejected[0].Fixed {
		t.Errorf("before a fix: open %d, %+v; want 1 open", tv.Open, tv.Rejected)
	}
	// A later commit compiled and published a version.
	newer := []distributor.ConfigStatus{{Latest: cuecast.Version{Config: "payments/checkout", Version: 2, CompiledAt: at.Add(time.Minute)}}}
	tv = s.tailerView(&snapshot{tailer: &tailer.State{Cursor: "fix", Base: "fix", Rejected: []tailer.Rejected{rj}}, status: newer})
	if tv.Open != 0 || !tv.Rejected[0].Fixed {
		t.Errorf("after the fix: open %d, %+v; want none open, the rejection fixed", tv.Open, tv.Rejected)
	}
	// A later commit that compiled but changed no config's output.
	tv = s.tailerView(&snapshot{tailer: &tailer.State{Cursor: "docs", Base: "docs", Rejected: []tailer.Rejected{rj}}, status: older})
	if tv.Open != 0 {
		t.Errorf("after a compiling commit publishing nothing: open %d, want 0", tv.Open)
	}
}

// TestRejectedInANamespaceStaysOpen: a commit rejected in one namespace
// stays open while versions of the other namespaces are published after
// it (a commit rejected in part publishes those), and is fixed by a version
// in its own namespace compiled after it.
func TestRejectedInANamespaceStaysOpen(t *testing.T) {
	at := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	rj := tailer.Rejected{Commit: "bad", At: at, Total: 1, Namespaces: []string{"payments"}}
	st := &tailer.State{Cursor: "later", Base: "good", Rejected: []tailer.Rejected{rj}}
	version := func(cfg cuecast.ConfigPath, after time.Duration) distributor.ConfigStatus {
		return distributor.ConfigStatus{Latest: cuecast.Version{Config: cfg, Version: 2, CompiledAt: at.Add(after)}}
	}
	s := &Server{o: Options{Tailer: fixedTailer{}}}
	for _, tt := range []struct {
		name   string
		status []distributor.ConfigStatus
		fixed  bool
	}{
		{"another namespace published after it", []distributor.ConfigStatus{version("payments/checkout", -time.Minute), version("search/ranking", time.Minute)}, false},
		{"its namespace published after it", []distributor.ConfigStatus{version("payments/checkout", time.Minute), version("search/ranking", time.Minute)}, true},
	} {
		tv := s.tailerView(&snapshot{tailer: st, status: tt.status})
		if tv.Rejected[0].Fixed != tt.fixed || tv.Open != map[bool]int{false: 1, true: 0}[tt.fixed] {
			t.Errorf("%s: open %d, %+v; want fixed %t", tt.name, tv.Open, tv.Rejected, tt.fixed)
		}
	}
}

// TestNamedStagesShownAsSuch: a stage naming instances or matching labels
// carries them in its view, so the page says "checkout-1" or "zone=eu-1"
// rather than "0% + named".
func TestNamedStagesShownAsSuch(t *testing.T) {
	rec := rollout.Record{Config: "search/ranking", Stable: 1, Current: &rollout.Rollout{
		Config: "search/ranking", Version: 2, From: 1, State: rollout.StateHolding,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "canary-hosts", Instances: []string{"search-canary-1", "search-canary-2"}},
			{Name: "eu", Labels: map[string]string{"zone": "eu-1"}},
			{Name: "all", Percent: 100},
		}},
		Cohort: rollout.Cohort{Instances: []string{"search-canary-1", "search-canary-2"}},
	}}
	rv := rolloutOf(rec, nil, time.Now())
	if got := rv.Stages[0].Names; len(got) != 2 || got[0] != "search-canary-1" {
		t.Errorf("canary-hosts names %v, want its two instances", got)
	}
	if got := rv.Stages[1].Labels; got["zone"] != "eu-1" {
		t.Errorf("eu labels %v, want zone=eu-1", got)
	}
	if rv.Stages[2].Names != nil || rv.Stages[2].Labels != nil {
		t.Errorf("all: %+v, want no selectors", rv.Stages[2])
	}
	// Worded by rollout.StageScope, as `cuecast rollout status` words them.
	for i, want := range []string{"instances search-canary-1, search-canary-2", "labels zone=eu-1", "100%"} {
		if got := rv.Stages[i].Scope; got != want {
			t.Errorf("stage %d scope %q, want %q", i, got, want)
		}
	}
}

// TestOverviewListsVariantsUnderConfig: the overview lists each variant
// right under its config, labelled by its dimension values, and the
// config's own row (its variant index) counts its variants.
func TestOverviewListsVariantsUnderConfig(t *testing.T) {
	now := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	var status []distributor.ConfigStatus
	for _, p := range []cuecast.ConfigPath{"payments/checkout", "payments/checkout-v2",
		"payments/checkout/env=prod/region=eu", "payments/checkout/env=staging/region=eu", "search/ranking"} {
		status = append(status, distributor.Summarize(cuecast.Version{Config: p, Version: 1}, now, nil, nil, 0, time.Minute, now))
	}
	s := &Server{}
	ov := s.overview(&snapshot{status: status})
	var got []string
	for _, ns := range ov.Namespaces {
		for _, r := range ns.Configs {
			got = append(got, fmt.Sprintf("%s variant=%q variants=%d", r.Config, r.Variant, r.Variants))
		}
	}
	want := []string{
		`payments/checkout variant="" variants=2`,
		`payments/checkout/env=prod/region=eu variant="env=prod,region=eu" variants=0`,
		`payments/checkout/env=staging/region=eu variant="env=staging,region=eu" variants=0`,
		`payments/checkout-v2 variant="" variants=0`,
		`search/ranking variant="" variants=0`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("overview rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRolloutViewWaitingNoteMatchesCounts: the dashboard's rollout box said
// "waiting for 3 of 3 instances to apply v2" while the page showed 3/3 on
// v2: the box's note is measured from the reports the counts come from.
func TestRolloutViewWaitingNoteMatchesCounts(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ids := []string{"checkout-1", "checkout-2", "checkout-3"}
	var reports []cuecast.Report
	for _, id := range ids {
		reports = append(reports, cuecast.Report{Instance: id, Config: "payments/checkout", Version: 2, Checksum: "c2", Healthy: true})
	}
	rec := rollout.Record{Config: "payments/checkout", Stable: 1, Current: &rollout.Rollout{
		Config: "payments/checkout", Version: 2, Checksum: "c2", From: 1, State: rollout.StateWaiting,
		Policy:      cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}},
		Cohort:      rollout.Cohort{Instances: ids},
		WaitUntil:   now.Add(5 * time.Minute),
		Unconfirmed: ids,
		Note:        "waiting for 3 of 3 instances to apply v2: checkout-1, checkout-2, checkout-3",
	}}
	rv := rolloutOf(rec, reports, now)
	if strings.Contains(rv.Note, "waiting for") || rv.Stages[0].OnTarget != 3 {
		t.Errorf("note %q beside %d/%d on v2; want no instance waited for", rv.Note, rv.Stages[0].OnTarget, rv.Stages[0].Instances)
	}
}

// TestRolloutStagesWeighSummaryGroups: a rollout's stage counts are the
// same whether the reports are the instances' own (a single server) or a
// region's summary groups (a tree, docs/SCALING.md), each standing for
// Count instances; they counted one per group.
func TestRolloutStagesWeighSummaryGroups(t *testing.T) {
	const cfg = cuecast.ConfigPath("payments/checkout")
	var own []cuecast.Report
	for i := range 300 { // about three instances per bucket
		id := fmt.Sprintf("web-%d", i)
		r := cuecast.Report{Instance: id, Config: cfg, Version: 1, Checksum: "c1", Healthy: true}
		if cuecast.Cohort(cfg.Namespace(), id) < 50 {
			r.Version, r.Checksum = 2, "c2"
			switch i % 7 {
			case 0:
				r.Healthy = false
			case 1:
				r.LastError = "version 2: validate: no"
			case 2:
				r.Refused = "version 3: pointer: bad signature"
			}
		}
		own = append(own, r)
	}
	now := time.Now()
	summarised := distributor.BuildSummary("eu-west", cfg, own, now).Reports(false)
	if len(summarised) >= len(own) {
		t.Fatalf("%d groups for %d instances: want groups of several", len(summarised), len(own))
	}
	rec := rollout.Record{Config: cfg, Stable: 1, Current: &rollout.Rollout{
		Config: cfg, Version: 2, Checksum: "c2", From: 1, State: rollout.StateHolding,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "half", Percent: 50}, {Name: "all", Percent: 100}}},
	}}
	want, got := rolloutOf(rec, own, now), rolloutOf(rec, summarised, now)
	for i := range want.Stages {
		w, g := want.Stages[i], got.Stages[i]
		if g.Instances != w.Instances || g.OnTarget != w.OnTarget || g.Unhealthy != w.Unhealthy || g.Failing != w.Failing || g.Refused != w.Refused {
			t.Errorf("stage %s from summary groups: %d instances, %d on target, %d unhealthy, %d failing, %d refused; from the instances' own reports: %d, %d, %d, %d, %d",
				w.Name, g.Instances, g.OnTarget, g.Unhealthy, g.Failing, g.Refused, w.Instances, w.OnTarget, w.Unhealthy, w.Failing, w.Refused)
		}
	}
}

// TestNamedStageCountsNoGroupByItsName: a region's summary group whose
// first sampled name is an instance a stage names stands for others too:
// the stage does not count them as named (it counted the whole group once
// groups were weighed). Without the regions' detail a group goes by its
// bucket, the controller's rule (rollout.Cohort.Includes).
func TestNamedStageCountsNoGroupByItsName(t *testing.T) {
	const cfg = cuecast.ConfigPath("payments/checkout")
	var same []string // three instances of bucket 40
	for i := 0; len(same) < 3; i++ {
		if id := fmt.Sprintf("host-%d", i); cuecast.Cohort(cfg.Namespace(), id) == 40 {
			same = append(same, id)
		}
	}
	slices.Sort(same)
	var own []cuecast.Report
	for _, id := range same {
		own = append(own, cuecast.Report{Instance: id, Config: cfg, Version: 2, Checksum: "c2", Healthy: true})
	}
	groups := distributor.BuildSummary("eu-west", cfg, own, time.Now()).Reports(false)
	if len(groups) != 1 || groups[0].Instance != same[0] || groups[0].Count != 3 {
		t.Fatalf("groups %+v, want one of 3 named after %s", groups, same[0])
	}
	rec := rollout.Record{Config: cfg, Stable: 1, Current: &rollout.Rollout{
		Config: cfg, Version: 2, Checksum: "c2", From: 1, State: rollout.StateHolding,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "host", Instances: []string{same[0]}}, {Name: "all", Percent: 100}}},
		Cohort: rollout.Cohort{Instances: []string{same[0]}},
	}}
	rv := rolloutOf(rec, groups, time.Now())
	if got := rv.Stages[0].Instances; got > 1 {
		t.Errorf("stage host counts %d instances for the one it names", got)
	}
	if got := rv.Stages[1].Instances; got != 3 {
		t.Errorf("stage all counts %d instances, want 3", got)
	}
}

// TestNextLimit: a sample that ran out of its limit doubles it, one that
// did not sets it to twice what it took; never under the base, never over
// maxSampleLimit (but for a base above it).
func TestNextLimit(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name              string
		limit, base, took time.Duration
		ranOut            bool
		want              time.Duration
	}{
		{"quick sample: the base", 5 * s, 5 * s, 100 * time.Millisecond, false, 5 * s},
		{"ran out: twice the limit", 5 * s, 5 * s, 5 * s, true, 10 * s},
		{"ran out again", 10 * s, 5 * s, 10 * s, true, 20 * s},
		{"slow but done: twice what it took", 20 * s, 5 * s, 6 * s, false, 12 * s},
		{"back down after a quick one", 12 * s, 5 * s, time.Second, false, 5 * s},
		{"capped", 80 * s, 5 * s, 80 * s, true, maxSampleLimit},
		{"a base above the cap", 5 * time.Minute, 5 * time.Minute, 5 * time.Minute, true, 5 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := nextLimit(c.limit, c.base, c.took, c.ranOut); got != c.want {
				t.Errorf("nextLimit(%s, %s, %s, %t) = %s, want %s", c.limit, c.base, c.took, c.ranOut, got, c.want)
			}
		})
	}
}
