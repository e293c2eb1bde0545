package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/web"
)

// slowFleet is the pipeline's distributor whose next read of the fleet,
// once armed, returns only after the rollout controller halted checkout: a
// fleet read long enough for the controller to act on reports that arrived
// during it.
type slowFleet struct {
	*distributor.Distributor
	ctrl  *rollout.Controller
	armed atomic.Bool
	// read runs once the armed read is done, before the wait.
	read func()
}

func (f *slowFleet) StatusAndReports(ctx context.Context, intents distributor.Intents, cfgs ...cuecast.ConfigPath) ([]distributor.ConfigStatus, []cuecast.Report, error) {
	st, rs, err := f.Distributor.StatusAndReports(ctx, intents, cfgs...)
	if err != nil || !f.armed.CompareAndSwap(true, false) {
		return st, rs, err
	}
	f.read()
	for {
		rec, err := f.ctrl.Record(ctx, checkout)
		if err != nil {
			return nil, nil, fmt.Errorf("wait for the halt: %w", err)
		}
		if rec.Current != nil && rec.Current.State == rollout.StateHalted {
			return st, rs, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("wait for the halt: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSampleShowsWhyItHalted: a sample that shows a rollout halted shows the
// unhealthy instances it halted for, even when the controller halted while
// the sample was reading the fleet. The sampler read the fleet before the
// rollout records, so that sample paired the halt with the reports from
// before it: every canary instance healthy, or none at all when the
// instances had not reported yet.
func TestSampleShowsWhyItHalted(t *testing.T) {
	inBothModes(t, fixtureOptions{policies: holdPolicy}, func(t *testing.T, f *fixture) {
		var sick atomic.Bool
		canary, outside := halves()
		// The instances report every 20ms, so the controller hears the
		// canary turn unhealthy at once.
		for _, id := range canary {
			f.watch(checkout, id, client.WithHeartbeat(20*time.Millisecond), client.WithHealth(func() cuecast.Health {
				if sick.Load() {
					return cuecast.Health{Healthy: false, Detail: "error rate 40%"}
				}
				return cuecast.Health{Healthy: true}
			}))
		}
		for _, id := range outside {
			f.watch(checkout, id, client.WithHeartbeat(20*time.Millisecond))
		}
		f.waitRollout()
		f.setAmount("9_000_000")
		poll.Until(t, "the canary reporting v2", poll.Patience, func() (bool, string) {
			rs, err := f.p.Distributor.Reports(context.Background(), checkout)
			if err != nil {
				return false, err.Error()
			}
			on := 0
			for _, r := range rs {
				for _, id := range canary {
					if r.Instance == id && r.Version == 2 {
						on++
					}
				}
			}
			return on == len(canary), fmt.Sprintf("%d of %d canary instances on v2", on, len(canary))
		})

		fleet := &slowFleet{Distributor: f.p.Distributor, ctrl: f.p.Rollout, read: func() { sick.Store(true) }}
		fleet.armed.Store(true)
		// The first sample waits within its fleet read for the halt: the
		// instances' next reports, on a tree their region's next summary,
		// the controller's next tick (a second) and its wait for the
		// report stream to hold them (rollout's stored). A sample gives up
		// after five sampling intervals (at least 5 s); at load 14 that
		// was too little and the page had no config. The interval is the
		// server's only; Sample is called here.
		srv, err := web.New(web.Options{Fleet: fleet, Rollouts: f.p.Rollout, Interval: poll.Patience / 5,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		halted := false
		for i := range 2 {
			srv.Sample(t.Context())
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/configs/"+string(checkout), nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("sample %d: GET config: %d %s", i, rec.Code, rec.Body)
			}
			var cv struct {
				Rollout struct {
					State  string
					Stages []struct {
						Name      string
						Instances int
						Unhealthy int
					}
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &cv); err != nil {
				t.Fatalf("sample %d: %v", i, err)
			}
			if cv.Rollout.State != string(rollout.StateHalted) {
				continue
			}
			halted = true
			if st := cv.Rollout.Stages; len(st) == 0 || st[0].Name != "canary" || st[0].Unhealthy < 1 {
				t.Errorf("sample %d: halted with stages %+v, want the canary's unhealthy instances", i, st)
			}
		}
		if !halted {
			t.Error("no sample showed the rollout halted")
		}
	})
}

// halves names two instances of checkout in holdPolicy's canary (the
// cohort buckets under 50) and two outside it.
func halves() (canary, outside []string) {
	for i := 0; len(canary) < 2 || len(outside) < 2; i++ {
		id := fmt.Sprintf("checkout-%d", i)
		switch b := cuecast.Cohort(checkout.Namespace(), id); {
		case b < 50 && len(canary) < 2:
			canary = append(canary, id)
		case b >= 50 && len(outside) < 2:
			outside = append(outside, id)
		}
	}
	return canary, outside
}

// advancingFleet is the pipeline's distributor whose next status read,
// once armed, first runs between: the sample has read the rollout records
// by then, and between changes what they say.
type advancingFleet struct {
	*distributor.Distributor
	armed   atomic.Bool
	between func(ctx context.Context) error
}

func (f *advancingFleet) StatusAndReports(ctx context.Context, intents distributor.Intents, cfgs ...cuecast.ConfigPath) ([]distributor.ConfigStatus, []cuecast.Report, error) {
	if f.armed.CompareAndSwap(true, false) {
		if err := f.between(ctx); err != nil {
			return nil, nil, err
		}
	}
	return f.Distributor.StatusAndReports(ctx, intents, cfgs...)
}

// TestSampleCountsAStageAdvancedDuringIt: checkout's rollout of v2 holds in
// its canary; while a sample reads the fleet, an operator advances it to
// every instance and every instance applies v2. The sample counted each
// instance against the records it read before the fleet, so the instances
// outside the canary, on v2, were not on their intended version: coverage
// (on_intended) dipped for that sample though every instance ran the
// version the rollout meant it to. The intents are now read after the
// reports.
func TestSampleCountsAStageAdvancedDuringIt(t *testing.T) {
	inBothModes(t, fixtureOptions{policies: holdPolicy}, func(t *testing.T, f *fixture) {
		canary, outside := halves()
		ids := append(canary, outside...)
		for _, id := range ids {
			f.watch(checkout, id)
		}
		f.waitRollout()
		f.setAmount("9_000_000")
		onV2 := func(ctx context.Context) (int, error) {
			rs, err := f.p.Distributor.Reports(ctx, checkout)
			if err != nil {
				return 0, err
			}
			n := 0
			for _, r := range rs {
				if r.Version == 2 {
					n += r.Weight() // a region's summary group stands for Count instances
				}
			}
			return n, nil
		}
		poll.Until(t, "v2 holding in its canary, applied there", poll.Patience, func() (bool, string) {
			rec, err := f.p.Rollout.Record(t.Context(), checkout)
			if err != nil {
				return false, err.Error()
			}
			n, err := onV2(t.Context())
			if err != nil {
				return false, err.Error()
			}
			return rec.Current != nil && rec.Current.Version == 2 && rec.Current.State == rollout.StateHolding && n == 2,
				fmt.Sprintf("%d instances on v2, rollout %+v", n, rec.Current)
		})

		fleet := &advancingFleet{Distributor: f.p.Distributor, between: func(ctx context.Context) error {
			if _, err := f.p.Rollout.Advance(ctx, checkout, rollout.Action{Reason: "every instance now", Actor: "test", Emergency: true}); err != nil {
				return err
			}
			for {
				n, err := onV2(ctx)
				if err != nil {
					return err
				}
				if n == len(ids) {
					return nil
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("wait for every instance on v2 (%d of %d): %w", n, len(ids), ctx.Err())
				case <-time.After(5 * time.Millisecond):
				}
			}
		}}
		fleet.armed.Store(true)
		// A sample gives up after five sampling intervals (at least 5 s),
		// and between waits for four instances to apply v2 within it: at
		// load 16 that took longer, the sample failed and the page had no
		// config. The interval is the server's only; Sample is called here.
		srv, err := web.New(web.Options{Fleet: fleet, Rollouts: f.p.Rollout, Interval: poll.Patience / 5,
			Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		srv.Sample(t.Context())
		var cv struct {
			Row struct {
				Instances  int `json:"instances"`
				OnIntended int `json:"on_intended"`
			} `json:"row"`
		}
		configPage(t, srv, checkout, &cv)
		if cv.Row.Instances != len(ids) || cv.Row.OnIntended != len(ids) {
			t.Errorf("the sample counts %d of %d instances on their intended version, want all %d: each runs v2, which the rollout, advanced to every instance, means it to", cv.Row.OnIntended, cv.Row.Instances, len(ids))
		}
	})
}

// TestSampleReadsTheFleetOnce: a sample counts a config's instances and
// lists them from one read of the fleet. It read the status (every report)
// and then every report again: twice the hub's reads per sample, and an
// instance that applied between the two was counted on one version and
// listed on the next. The oracle is the reader's own requests: a sample
// sends no more than one status read does, and its counts add up to what
// it lists.
func TestSampleReadsTheFleetOnce(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments"}})
		d := fl.Distributor(t, distributor.Options{})
		if err := d.Publish(t.Context(), cuecast.Version{Config: checkout, Version: 1, Commit: "c001", Author: "ann", Message: "change"}, []byte(`{"n":1}`)); err != nil {
			t.Fatal(err)
		}
		ids := []string{"checkout-1", "checkout-2", "checkout-3"}
		for _, id := range ids {
			fl.Report(t, cuecast.Report{Instance: id, Config: checkout, Version: 1, Healthy: true})
		}
		// The reader has a connection of its own, so that what it sends
		// is what the sample asked for.
		nc := fl.Hub(t)
		rd, err := distributor.Open(t.Context(), nc, distributor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "every instance live", poll.Patience, func() (bool, string) {
			st, err := rd.Status(t.Context(), checkout)
			if err != nil {
				return false, err.Error()
			}
			return st[0].Instances == len(ids), fmt.Sprintf("%d of %d live", st[0].Instances, len(ids))
		})
		srv, err := web.New(web.Options{Fleet: rd})
		if err != nil {
			t.Fatal(err)
		}
		srv.Sample(t.Context()) // reads the config's versions once, and keeps them

		before := nc.Stats().OutMsgs
		srv.Sample(t.Context())
		sampled := nc.Stats().OutMsgs - before
		before = nc.Stats().OutMsgs
		if _, _, err := rd.StatusAndReports(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if once := nc.Stats().OutMsgs - before; sampled > once {
			t.Errorf("a sample sent %d requests; one read of the fleet's status and reports sends %d", sampled, once)
		}

		var cv struct {
			Row struct {
				Instances int `json:"instances"`
			}
			Instances []struct {
				Count int `json:"count"` // a summary's row stands for Count
			} `json:"instances"`
		}
		configPage(t, srv, checkout, &cv)
		listed := 0
		for _, in := range cv.Instances {
			listed += max(in.Count, 1)
		}
		if cv.Row.Instances != len(ids) || listed != len(ids) {
			t.Errorf("the page counts %d instances and lists %d, want %d: %+v", cv.Row.Instances, listed, len(ids), cv)
		}
	})
}

// configPage decodes the config page srv serves for cfg (its JSON API)
// into v.
func configPage(t *testing.T, srv *web.Server, cfg cuecast.ConfigPath, v any) {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/configs/"+string(cfg), nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET config %s: %d %s", cfg, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("config %s: %v", cfg, err)
	}
}
