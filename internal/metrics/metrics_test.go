package metrics

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/buildinfo"
)

func TestLogHandlerCountsEvents(t *testing.T) {
	for _, c := range []struct {
		name      string
		log       func(*slog.Logger)
		published float64
		unchanged float64
		rejected  float64
		compiles  int
	}{
		{"published", func(l *slog.Logger) {
			l.With("commit", "abc").Info("commit processed", "configs", 2, "versions", 1, "elapsed", 5*time.Millisecond)
		}, 1, 0, 0, 0},
		{"processed, nothing new", func(l *slog.Logger) {
			l.Info("commit processed", "configs", 2, "versions", 0, "elapsed", time.Millisecond)
		}, 0, 1, 0, 0},
		{"affects no config (debug)", func(l *slog.Logger) { l.Debug("commit affects no config", "files", 3) }, 0, 1, 0, 0},
		{"rejected", func(l *slog.Logger) {
			l.Error("commit rejected: it does not compile; nothing published from it", "errors", 2)
		}, 0, 0, 1, 0},
		{"compiled (debug)", func(l *slog.Logger) { l.Debug("compiled", "configs", 6, "elapsed", 20*time.Millisecond) }, 0, 0, 0, 1},
		{"unrelated", func(l *slog.Logger) { l.Info("published version", "config", "a/b") }, 0, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := New(Options{})
			var out strings.Builder
			base := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo})
			c.log(slog.New(m.LogHandler(base)))
			for result, want := range map[string]float64{ResultPublished: c.published, ResultUnchanged: c.unchanged, ResultRejected: c.rejected} {
				if got := testutil.ToFloat64(m.commits.WithLabelValues(result)); got != want {
					t.Errorf("commits{result=%q} = %v, want %v", result, got, want)
				}
			}
			if got := histogramCount(t, m, "cuecast_compile_duration_seconds"); got != uint64(c.compiles) {
				t.Errorf("compiles observed = %d, want %d", got, c.compiles)
			}
			if strings.Contains(out.String(), "level=DEBUG") {
				t.Errorf("debug record passed to an info handler: %s", out.String())
			}
		})
	}
}

func histogramCount(t *testing.T, m *Metrics, name string) uint64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.Metric[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

func TestLogHandlerCompileHistogram(t *testing.T) {
	m := New(Options{})
	l := slog.New(m.LogHandler(slog.DiscardHandler))
	l.Debug("compiled", "elapsed", 20*time.Millisecond)
	l.Debug("compiled", "elapsed", 30*time.Millisecond)
	l.Debug("compiled") // no elapsed: not observed
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cuecast_compile_duration_seconds" {
			continue
		}
		h := mf.Metric[0].GetHistogram()
		if h.GetSampleCount() != 2 || math.Abs(h.GetSampleSum()-0.05) > 1e-9 {
			t.Errorf("compile histogram: count %d, sum %v; want 2, 0.05", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Fatal("no cuecast_compile_duration_seconds")
}

func TestPublisherCounts(t *testing.T) {
	m := New(Options{})
	s := &memStore{}
	p := m.Publisher(s)
	ctx := context.Background()
	for _, v := range []cuecast.Version{
		{Config: "payments/checkout", Version: 1},
		{Config: "payments/refunds", Version: 1},
		{Config: "search/ranking", Version: 1},
		{Config: "search/ranking", Version: 1}, // the store refuses a duplicate
	} {
		p.Publish(ctx, v, nil)
	}
	for ns, want := range map[string]float64{"payments": 2, "search": 1} {
		if got := testutil.ToFloat64(m.published.WithLabelValues(ns)); got != want {
			t.Errorf("published{namespace=%q} = %v, want %v", ns, got, want)
		}
	}
	if got := testutil.ToFloat64(m.publishErrors); got != 1 {
		t.Errorf("publish errors = %v, want 1", got)
	}
}

type memStore struct{ have map[cuecast.ConfigPath]uint64 }

func (s *memStore) Latest(context.Context, cuecast.ConfigPath) (cuecast.Version, error) {
	return cuecast.Version{}, cuecast.ErrNotFound
}
func (s *memStore) Configs(context.Context) ([]cuecast.ConfigPath, error) { return nil, nil }
func (s *memStore) Publish(_ context.Context, v cuecast.Version, _ []byte) error {
	if s.have == nil {
		s.have = map[cuecast.ConfigPath]uint64{}
	}
	if s.have[v.Config] >= v.Version {
		return cuecast.ErrConflict
	}
	s.have[v.Config] = v.Version
	return nil
}

// TestPropagation feeds samples of one config and checks which coverage
// crossings are observed, and when.
func TestPropagation(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v1 := cuecast.Version{Config: "payments/checkout", Version: 1, CompiledAt: t0}
	type sample struct {
		after         time.Duration
		on, instances int
	}
	for _, c := range []struct {
		name    string
		ours    bool // this process published v1
		samples []sample
		want    map[string]time.Duration // observed crossings
	}{
		{"witnessed climb", false, []sample{{100 * time.Millisecond, 0, 4}, {200 * time.Millisecond, 2, 4}, {300 * time.Millisecond, 4, 4}},
			map[string]time.Duration{"0.5": 200 * time.Millisecond, "1": 300 * time.Millisecond}},
		{"ours, first sample already everywhere", true, []sample{{150 * time.Millisecond, 3, 3}},
			map[string]time.Duration{"0.5": 150 * time.Millisecond, "1": 150 * time.Millisecond}},
		{"not ours, found everywhere at start", false, []sample{{time.Hour, 3, 3}}, map[string]time.Duration{}},
		{"not ours, half at start then all", false, []sample{{time.Second, 2, 4}, {2 * time.Second, 4, 4}},
			map[string]time.Duration{"1": 2 * time.Second}},
		{"no fleet when published", true, []sample{{time.Second, 0, 0}, {5 * time.Second, 2, 2}}, map[string]time.Duration{}},
		{"never everywhere", true, []sample{{time.Second, 1, 3}, {2 * time.Second, 2, 3}},
			map[string]time.Duration{"0.5": 2 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPropagation(5, 100)
			if c.ours {
				p.published(v1)
			}
			got := map[string]time.Duration{}
			for _, s := range c.samples {
				for _, x := range p.observe(t0.Add(s.after), ConfigSample{Config: v1.Config, Target: v1, Instances: s.instances, OnTarget: s.on}) {
					if _, dup := got[x.coverage]; dup {
						t.Errorf("crossing %s observed twice", x.coverage)
					}
					got[x.coverage] = x.elapsed
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("crossings %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("crossing %s after %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestPropagationSeriesBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := newPropagation(2, 10)
	for v := uint64(1); v <= 4; v++ {
		target := cuecast.Version{Config: "a/b", Version: v, CompiledAt: t0}
		for i := range 50 {
			p.observe(t0.Add(time.Duration(i)*time.Second), ConfigSample{Config: "a/b", Target: target, Instances: 50, OnTarget: i})
		}
	}
	s := p.series("a/b")
	if len(s) != 2 || s[0].Version.Version != 3 || s[1].Version.Version != 4 {
		t.Fatalf("kept versions %v, want 3 and 4", s)
	}
	if s[0].Current || !s[1].Current {
		t.Errorf("current flags %v %v, want false true", s[0].Current, s[1].Current)
	}
	for _, x := range s {
		if n := len(x.Points); n > 10 || n < 5 {
			t.Errorf("v%d kept %d points, want 5..10", x.Version.Version, n)
		}
		if last := x.Points[len(x.Points)-1]; last.Elapsed != 49*time.Second {
			t.Errorf("v%d last point at %v, want 49s (thinning keeps the last)", x.Version.Version, last.Elapsed)
		}
	}
}

func TestObserveTailerCountsNewRejectionsOnly(t *testing.T) {
	m := New(Options{})
	old := Rejection{Commit: "old", IDs: []string{"cue"}}
	m.ObserveTailer(TailerSample{Lag: 2, Rejected: []Rejection{old}})
	m.ObserveTailer(TailerSample{Lag: 0, Rejected: []Rejection{old, {Commit: "new", IDs: []string{"cue", "secret/aws-access-key", "cue"}}}})
	m.ObserveTailer(TailerSample{Lag: 0, Rejected: []Rejection{old, {Commit: "new", IDs: []string{"cue"}}}})
	for id, want := range map[string]float64{"cue": 2, "secret/aws-access-key": 1} {
		if got := testutil.ToFloat64(m.rejections.WithLabelValues(id)); got != want {
			t.Errorf("rejections{id=%q} = %v, want %v", id, got, want)
		}
	}
}

func TestCountHaltOnce(t *testing.T) {
	m := New(Options{})
	m.CountHalt("r1", "unhealthy")
	m.CountHalt("r1", "unhealthy")
	m.CountHalt("r2", "operator")
	m.CountHalt("", "")
	for cause, want := range map[string]float64{"unhealthy": 1, "operator": 1, "unknown": 1} {
		if got := testutil.ToFloat64(m.halts.WithLabelValues(cause)); got != want {
			t.Errorf("halts{cause=%q} = %v, want %v", cause, got, want)
		}
	}
}

// TestNamesAndLabels lints every metric with Prometheus' own rules and checks
// that no label could carry an instance ID.
func TestNamesAndLabels(t *testing.T) {
	m := New(Options{})
	m.ObserveFleet(time.Now(), []ConfigSample{{Config: "a/b", Target: cuecast.Version{Version: 1}, Instances: 1, OnTarget: 1}})
	m.ObserveTailer(TailerSample{Lag: 0})
	m.ObserveRollouts(map[string]int{"holding": 1})
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "cuecast_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"config": true, "namespace": true, "coverage": true, "result": true, "state": true, "cause": true, "id": true,
		// cuecast_build_info's: one series per binary, never per instance.
		"version": true, "commit": true, "go_version": true,
		// cuecast_reports_dropped_total's: one of distributor.DropReasons;
		// the dashboard drill-down counters': one of DrillDownSlot, DrillDownTurn,
		// DrillDownBusy, DrillDownClosed.
		"reason": true}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "cuecast_") {
			continue
		}
		for _, mm := range mf.Metric {
			for _, l := range mm.Label {
				if !allowed[l.GetName()] {
					t.Errorf("%s has label %q", mf.GetName(), l.GetName())
				}
			}
		}
	}
}

func TestSeenHaltIsNotCounted(t *testing.T) {
	m := New(Options{})
	m.SeenHalt("r1@t1")
	m.CountHalt("r1@t1", "unhealthy")
	m.CountHalt("r1@t2", "unhealthy")
	if got := testutil.ToFloat64(m.halts.WithLabelValues("unhealthy")); got != 1 {
		t.Errorf("halts{cause=unhealthy} = %v, want 1 (the halt seen before start is not counted)", got)
	}
}

// TestPropagationMonotonic: samples timed by apply time can come after ones
// timed by arrival; the series never goes back in time.
func TestPropagationMonotonic(t *testing.T) {
	m := New(Options{})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v := cuecast.Version{Config: "a/b", Version: 2, CompiledAt: t0}
	m.Published(v)
	m.ObservePropagation(t0.Add(900*time.Millisecond), ConfigSample{Config: "a/b", Target: v, Instances: 2, OnTarget: 1})
	m.ObservePropagation(t0.Add(40*time.Millisecond), ConfigSample{Config: "a/b", Target: v, Instances: 2, OnTarget: 2})
	s := m.Propagation("a/b")[0]
	for i := 1; i < len(s.Points); i++ {
		if s.Points[i].Elapsed < s.Points[i-1].Elapsed {
			t.Fatalf("points go back in time: %+v", s.Points)
		}
	}
	if got := s.Reached["1"]; got != 900*time.Millisecond {
		t.Errorf("100%% reached at %v, want 900ms (not before the sample that saw 50%%)", got)
	}
}

func TestBuildInfo(t *testing.T) {
	m := New(Options{Build: &buildinfo.Info{Version: "v0.1.0", Commit: "abc123", GoVersion: "go1.26.8"}})
	want := `
# HELP cuecast_build_info Always 1; the labels say which cuecast is running (version, commit, Go version).
# TYPE cuecast_build_info gauge
cuecast_build_info{commit="abc123",go_version="go1.26.8",version="v0.1.0"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "cuecast_build_info"); err != nil {
		t.Error(err)
	}
}

// gaugeByConfig is one scrape of the registry: gauge name's value by its
// series' first label (the config).
func gaugeByConfig(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.Metric {
			got[mm.Label[0].GetValue()] = mm.GetGauge().GetValue()
		}
	}
	return got
}

// scrapeCounter is one scrape of the registry: the value of name's series
// with label=value, and whether the series was there at all.
func scrapeCounter(t *testing.T, m *Metrics, name, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.Metric {
			for _, l := range mm.Label {
				if l.GetName() == label && l.GetValue() == value {
					return mm.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// TestCountersExistAtZero: every documented halt cause and rejection ID is
// exported at 0 from the start. They appeared only at 1, so increase() had
// no earlier sample and OPERATIONS.md's alerts missed the first event.
func TestCountersExistAtZero(t *testing.T) {
	m := New(Options{})
	for _, c := range HaltCauses() {
		if v, ok := scrapeCounter(t, m, "cuecast_rollout_halts_total", "cause", c); !ok || v != 0 {
			t.Errorf("cuecast_rollout_halts_total{cause=%q} = %v (present %t), want 0 from the start", c, v, ok)
		}
	}
	for _, id := range []string{"cue", "secret/aws-access-key", "manifest/missing", "manifest/no-module", "unknown"} {
		if v, ok := scrapeCounter(t, m, "cuecast_validation_rejections_total", "id", id); !ok || v != 0 {
			t.Errorf("cuecast_validation_rejections_total{id=%q} = %v (present %t), want 0 from the start", id, v, ok)
		}
	}
}

// TestHaltAlertFiresOnFirstHalt evaluates OPERATIONS.md's alert
// increase(cuecast_rollout_halts_total[10m]) > 0 over two scrapes, one
// before the first halt and one after: the series must be in both, and rise.
// The same for the rejected-commit counter's first rejection.
func TestHaltAlertFiresOnFirstHalt(t *testing.T) {
	m := New(Options{})
	m.ObserveTailer(TailerSample{}) // the first sample only learns what was rejected before
	before, ok := scrapeCounter(t, m, "cuecast_rollout_halts_total", "cause", CauseUnhealthy)
	rejBefore, rejOK := scrapeCounter(t, m, "cuecast_validation_rejections_total", "id", "cue")
	m.CountHalt("payments/checkout@2@t1", CauseUnhealthy)
	m.ObserveTailer(TailerSample{Rejected: []Rejection{{Commit: "abc", IDs: []string{"cue"}}}})
	after, _ := scrapeCounter(t, m, "cuecast_rollout_halts_total", "cause", CauseUnhealthy)
	rejAfter, _ := scrapeCounter(t, m, "cuecast_validation_rejections_total", "id", "cue")
	if !ok || after-before <= 0 {
		t.Errorf("halts: first scrape %v (present %t), second %v: increase() does not fire on the first halt", before, ok, after)
	}
	if !rejOK || rejAfter-rejBefore <= 0 {
		t.Errorf("rejections: first scrape %v (present %t), second %v: increase() does not fire on the first rejection", rejBefore, rejOK, rejAfter)
	}
}

// TestCoverageAbsentWithNoInstance: a config with no live instance has no
// coverage to export; the gauge read 1, "fully covered".
func TestCoverageAbsentWithNoInstance(t *testing.T) {
	m := New(Options{})
	m.ObserveFleet(time.Now(), []ConfigSample{
		{Config: "a/none", Target: cuecast.Version{Version: 1}},
		{Config: "a/some", Target: cuecast.Version{Version: 1}, Instances: 4, OnTarget: 1, OnIntended: 4},
	})
	got := gaugeByConfig(t, m, "cuecast_config_coverage_ratio")
	if _, ok := got["a/none"]; ok {
		t.Errorf("coverage of a config with no instance exported: %v", got["a/none"])
	}
	if got["a/some"] != 1 {
		t.Errorf("coverage of a/some = %v, want 1 (every instance where its rollout means it)", got["a/some"])
	}
}

// TestRefusedGauge: the instances that refused a pointer have their own
// gauge, exported at 0 for every config sampled (ConfigStatus.Refused had
// none), apart from the failing ones.
func TestRefusedGauge(t *testing.T) {
	m := New(Options{})
	m.ObserveFleet(time.Now(), []ConfigSample{
		{Config: "a/calm", Target: cuecast.Version{Version: 1}, Instances: 2, OnTarget: 2},
		{Config: "a/forged", Target: cuecast.Version{Version: 1}, Instances: 3, Refused: 2, Failing: 1},
	})
	got := gaugeByConfig(t, m, "cuecast_config_instances_refused")
	if v, ok := got["a/calm"]; !ok || v != 0 {
		t.Errorf("refused of a/calm = %v (exported %t), want 0, exported", v, ok)
	}
	if got["a/forged"] != 2 {
		t.Errorf("refused of a/forged = %v, want 2", got["a/forged"])
	}
}

// TestVariantsAreTheirOwnSeries: each variant of a config is sampled
// under its variant path, so the config label of every cuecast_config_*
// series names the variant (docs/VARIANTS.md) and two variants never
// share a series.
func TestVariantsAreTheirOwnSeries(t *testing.T) {
	m := New(Options{})
	m.ObserveFleet(time.Now(), []ConfigSample{
		{Config: "payments/checkout/env=prod/region=eu", Target: cuecast.Version{Version: 3}, Instances: 4, OnTarget: 4, OnIntended: 4},
		{Config: "payments/checkout/env=staging/region=eu", Target: cuecast.Version{Version: 7}, Instances: 2, OnTarget: 1, OnIntended: 1},
	})
	got := gaugeByConfig(t, m, "cuecast_config_target_version")
	if got["payments/checkout/env=prod/region=eu"] != 3 || got["payments/checkout/env=staging/region=eu"] != 7 || len(got) != 2 {
		t.Errorf("cuecast_config_target_version by config: %v, want prod-eu 3 and staging-eu 7", got)
	}
}

// TestDeployerCountsFailures: a deploy that fails (its pointers refused,
// a full disk) counts as a publish error, as a refused version does.
func TestDeployerCountsFailures(t *testing.T) {
	m := New(Options{})
	d := m.Deployer(refusingDeployer{refuse: 2})
	for n := uint64(1); n <= 3; n++ {
		d.Deploy(context.Background(), cuecast.Version{Config: "payments/checkout", Version: n})
	}
	if got := testutil.ToFloat64(m.publishErrors); got != 1 {
		t.Errorf("publish errors = %v, want 1", got)
	}
}

type refusingDeployer struct{ refuse uint64 }

func (d refusingDeployer) Deploy(_ context.Context, v cuecast.Version) error {
	if v.Version == d.refuse {
		return errors.New("no space left on device")
	}
	return nil
}

func (refusingDeployer) DeployedVersions(context.Context) (map[cuecast.ConfigPath]uint64, error) {
	return nil, nil
}

// TestRejectionIDsAtZero: every ID the compiler defines, and "unknown", is
// a series of cuecast_validation_rejections_total at 0 before any
// rejection, as docs/OPERATIONS.md says.
func TestRejectionIDsAtZero(t *testing.T) {
	m := New(Options{})
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "cuecast_validation_rejections_total" {
			continue
		}
		for _, mm := range mf.Metric {
			for _, l := range mm.Label {
				if l.GetName() == "id" && mm.GetCounter().GetValue() == 0 {
					have[l.GetValue()] = true
				}
			}
		}
	}
	for _, id := range append(compiler.IDs(), "unknown") {
		if !have[id] {
			t.Errorf("cuecast_validation_rejections_total{id=%q} is not exported at 0", id)
		}
	}
}
