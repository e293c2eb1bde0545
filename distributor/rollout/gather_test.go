package rollout

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// scriptedReports is the distributor as far as a label stage's move needs
// it: the live reports it is given, and the instance pointers written.
type scriptedReports struct {
	reports []cuecast.Report
	moved   []string
}

func (s *scriptedReports) Versions(context.Context, cuecast.ConfigPath) ([]cuecast.Version, error) {
	return nil, cuecast.ErrNotFound
}

func (s *scriptedReports) Version(context.Context, cuecast.ConfigPath, uint64) (cuecast.Version, []byte, error) {
	return cuecast.Version{}, nil, cuecast.ErrNotFound
}

func (s *scriptedReports) SetPointers(context.Context, cuecast.ConfigPath, []int, cuecast.Pointer) error {
	return nil
}

func (s *scriptedReports) SetInstancePointers(_ context.Context, _ cuecast.ConfigPath, ids []string, _ cuecast.Pointer) error {
	s.moved = append(s.moved, ids...)
	return nil
}

func (s *scriptedReports) Reports(context.Context, cuecast.ConfigPath) ([]cuecast.Report, error) {
	return s.reports, nil
}

// TestLabelCohortFixedWhenGatheringEnds pins docs/ROLLOUT.md's rule for a
// label stage: its cohort is the live instances carrying the labels when
// its pointers move, which is once every live instance has been heard
// (gathering). So an instance that starts and reports while the stage
// gathers is in it; one that starts after the move is not (issue 33, item
// 10: the page said "matched when the stage starts", which an instance
// started during gathering contradicted).
func TestLabelCohortFixedWhenGatheringEnds(t *testing.T) {
	t.Parallel()
	const cfg cuecast.ConfigPath = "payments/checkout"
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	canary := map[string]string{"canary": "true"}
	report := func(id string, labels map[string]string) cuecast.Report {
		return cuecast.Report{Config: cfg, Instance: id, Version: 1, Healthy: true, Labels: labels, At: t0}
	}
	d := &scriptedReports{}
	c := &Controller{d: d, o: Options{ApplyTimeout: time.Minute, Heartbeat: 15 * time.Second}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r := &Rollout{Config: cfg, Version: 2, From: 1, State: StateMoving, Stage: 0,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Labels: canary, Hold: cuecast.Duration(time.Hour)}, {Name: "all", Percent: 100}}}}
	rec := &Record{Config: cfg, Stable: 1, Floor: 1, Current: r}

	// Gathering: "quiet" is live but not heard yet, so nothing moves.
	l := distributor.NewLiveReports(cfg, time.Hour)
	l.Expect([]string{"quiet"}, t0)
	d.reports = append(l.Live(t0), report("first", canary))
	if _, _, err := c.stepMoving(t.Context(), rec, r, t0); err != nil {
		t.Fatal(err)
	}
	if r.State != StateMoving || len(d.moved) > 0 {
		t.Fatalf("while gathering: state %s, moved %v; want still moving, nothing moved", r.State, d.moved)
	}
	// "quiet" is heard, and "started" starts with the label, both before
	// the gathering ends: the cohort is fixed now, with "started".
	d.reports = []cuecast.Report{report("first", canary), report("quiet", nil), report("started", canary)}
	if _, _, err := c.stepMoving(t.Context(), rec, r, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	slices.Sort(d.moved)
	if want := []string{"first", "started"}; !slices.Equal(d.moved, want) || !r.Contains("payments", "started") || r.Contains("payments", "quiet") {
		t.Fatalf("cohort %+v, moved %v: want exactly %v", r.Cohort, d.moved, want)
	}
}
