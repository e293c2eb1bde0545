package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/web"
)

// TestNamedStageOnTheConfigPage: a rollout whose canary names one
// instance shows that instance in the canary on the config page. On a
// tree the hub holds the region's summary groups only, which are in a
// stage by their bucket; the page showed the named canary with no
// instances (while `cuecast rollout status` counted it) until it asked
// the region for the instances the stages name, as the controller does.
// A region that does not answer leaves its instances counted by bucket,
// and the page says which.
func TestNamedStageOnTheConfigPage(t *testing.T) {
	policy := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: []string{"checkout-a"}, Hold: cuecast.Duration(time.Hour)},
		{Name: "all", Percent: 100},
	}}}
	inBothModes(t, fixtureOptions{policies: policy}, func(t *testing.T, f *fixture) {
		for _, id := range []string{"checkout-a", "checkout-b", "checkout-c"} {
			f.watch(checkout, id)
		}
		f.waitRollout()
		type stage struct {
			Name      string
			Instances int
			OnTarget  int `json:"on_target"`
		}
		var cv struct {
			Rollout struct {
				Version uint64
				Stages  []stage
				Counted string
			}
		}
		poll.Until(t, "the page counting the named canary and the fleet", poll.Patience, func() (bool, string) {
			_, body := get(t, f.base+"/api/configs/"+string(checkout))
			cv.Rollout.Stages, cv.Rollout.Counted = nil, ""
			if err := json.Unmarshal([]byte(body), &cv); err != nil {
				t.Fatal(err)
			}
			st := cv.Rollout.Stages
			return len(st) == 2 && st[0] == stage{"canary", 1, 1} && st[1] == stage{"all", 3, 1} && cv.Rollout.Counted == "",
				fmt.Sprintf("stages %+v, counted %q", st, cv.Rollout.Counted)
		})
		if !natstest.InTree(t) {
			return // a single server holds each instance's own report
		}

		// A region that summarises the config and does not answer: its
		// instances stay counted by bucket, and the page says so.
		summarise := silentRegion(t, f.fl.Hub(t), 1)
		poll.Until(t, "the page naming the region that did not answer", poll.Patience, func() (bool, string) {
			if err := summarise(); err != nil {
				return false, err.Error()
			}
			_, body := get(t, f.base+"/api/configs/"+string(checkout))
			cv.Rollout.Stages, cv.Rollout.Counted = nil, ""
			if err := json.Unmarshal([]byte(body), &cv); err != nil {
				t.Fatal(err)
			}
			st := cv.Rollout.Stages
			// leaf-1 answered: its named instance is still counted by name.
			return len(st) == 2 && st[0] == stage{"canary", 1, 1} && strings.Contains(cv.Rollout.Counted, "us-east did not answer within 2s"),
				fmt.Sprintf("stages %+v, counted %q", st, cv.Rollout.Counted)
		})
	})
}

const refunds = cuecast.ConfigPath("payments/refunds")

// namedCanaries starts a tree whose rollouts of checkout and refunds hold
// a canary naming one instance of each, their two instances each
// summarised by a region: their config pages ask the regions for the
// instances the canary names.
func namedCanaries(t *testing.T) *fixture {
	t.Helper()
	policy := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: []string{"checkout-a", "refunds-a"}, Hold: cuecast.Duration(time.Hour)},
		{Name: "all", Percent: 100},
	}}}
	f := start(t, fixtureOptions{policies: policy})
	for _, w := range []struct {
		cfg cuecast.ConfigPath
		ids []string
	}{{checkout, []string{"checkout-a", "checkout-b"}}, {refunds, []string{"refunds-a", "refunds-b"}}} {
		for _, id := range w.ids {
			f.watch(w.cfg, id)
		}
	}
	for _, cfg := range []cuecast.ConfigPath{checkout, refunds} {
		poll.Until(t, "the rollout of "+string(cfg)+" holding its canary, its instances summarised", poll.Patience, func() (bool, string) {
			rec, err := f.p.Rollout.Record(t.Context(), cfg)
			if err != nil {
				return false, err.Error()
			}
			rs, err := f.p.Distributor.Reports(t.Context(), cfg)
			if err != nil {
				return false, err.Error()
			}
			return rec.Current != nil && rec.Current.State == rollout.StateHolding && distributor.Weigh(rs) == 2 && rs[0].Count > 0,
				fmt.Sprintf("rollout %+v, reports %+v", rec.Current, rs)
		})
	}
	return f
}

// canaryCounted fails t unless rec is a config page (its JSON) counting
// its named canary's one instance from the regions' answer, saying
// nothing was left counted by its bucket's group.
func canaryCounted(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	var cv struct {
		Rollout struct {
			Stages []struct {
				Name      string
				Instances int
			}
			Counted string
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &cv); rec.Code != http.StatusOK || err != nil {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
	}
	if st := cv.Rollout.Stages; len(st) == 0 || st[0].Name != "canary" || st[0].Instances != 1 || cv.Rollout.Counted != "" {
		t.Errorf("%s: stages %+v (counted %q), want its named canary counted", what, st, cv.Rollout.Counted)
	}
}

// TestConfigPageAsksOnceAtATimeAcrossSamples: a config page whose
// drill-down into the regions is held past the next sample, and the same
// page loaded again in that sample: the second load waits for the first
// one's drill-down instead of asking again, and both are drawn when it
// ends. The config pages kept their turn per sample, so that a drill-down
// longer than a sample had the next sample's in flight beside it, for
// the same config. The page's wait for the regions is the test's
// patience: the drill-down's hold is the test's, and with the 2s default
// a slow machine let the page give up before the test let the regions go
// (the canary then counted by its bucket, and the page saying so).
func TestConfigPageAsksOnceAtATimeAcrossSamples(t *testing.T) {
	t.Parallel()
	t.Run(natstest.TreeMode, func(t *testing.T) {
		f := namedCanaries(t)
		regions := holdRegions(f.p.Distributor, checkout)
		waits := make(chan cuecast.ConfigPath, 4)
		log := slog.New(logWaits{slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}), turnWait, waits})
		srv, err := web.New(web.Options{Fleet: f.p.Distributor, Rollouts: f.p.Rollout, Regions: regions,
			DetailTimeout: poll.Patience, StagesTimeout: poll.Patience, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		path := "/api/configs/" + string(checkout)
		srv.Sample(t.Context())
		first := load(t.Context(), srv, path)
		if cfg := poll.Receive(t, "the first page's drill-down", poll.Patience, regions.asked); cfg != checkout {
			t.Fatalf("asked the regions about %s, want %s", cfg, checkout)
		}
		srv.Sample(t.Context()) // the next sample, the first drill-down held
		second := load(t.Context(), srv, path)
		select {
		case cfg := <-regions.asked:
			asks, most := regions.counts(cfg)
			t.Fatalf("asked the regions about %s again while its first drill-down was held: %d asks, %d in flight at most; want one", cfg, asks, most)
		case cfg := <-waits:
			if cfg != checkout {
				t.Fatalf("%s waited for its turn, want %s", cfg, checkout)
			}
		case <-time.After(poll.Patience):
			t.Fatalf("the second load of %s neither asked nor waited for its turn after %s", checkout, poll.Patience)
		}
		drillDownMetrics(t, srv, map[string]float64{`reason="slot"`: 0, `reason="turn"`: 1}, map[string]float64{`reason="closed"`: 0})
		close(regions.held[checkout])
		canaryCounted(t, "the first page", poll.Receive(t, "the first page, its drill-down let go", poll.Patience, first))
		canaryCounted(t, "the second page", poll.Receive(t, "the second page", poll.Patience, second))
		if asks, _ := regions.counts(checkout); asks != 1 {
			t.Errorf("asked the regions about %s %d times, want once: the second page shares the answer it waited for", checkout, asks)
		}
	})
}

// heldRegions is the distributor's drill-down, held for some configs
// until the test lets each go: a region that does not answer for as long
// as the test needs, where a real one is given up on after a timeout. It
// tells asked each config it is asked about, and counts the drill-downs
// it has in flight.
type heldRegions struct {
	web.Regions
	held  map[cuecast.ConfigPath]chan struct{} // closed to let the config's drill-downs go
	asked chan cuecast.ConfigPath

	mu       sync.Mutex
	asks     map[cuecast.ConfigPath]int
	inFlight int
	most     int // the most drill-downs in flight at once
}

// holdRegions holds r's drill-downs into each of held.
func holdRegions(r web.Regions, held ...cuecast.ConfigPath) *heldRegions {
	h := &heldRegions{Regions: r, held: map[cuecast.ConfigPath]chan struct{}{}, asked: make(chan cuecast.ConfigPath, 16),
		asks: map[cuecast.ConfigPath]int{}}
	for _, cfg := range held {
		h.held[cfg] = make(chan struct{})
	}
	return h
}

func (h *heldRegions) DetailByRegion(ctx context.Context, cfg cuecast.ConfigPath, req distributor.DetailRequest) ([]distributor.RegionDetail, error) {
	h.mu.Lock()
	h.asks[cfg]++
	h.inFlight++
	h.most = max(h.most, h.inFlight)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	h.asked <- cfg
	if release, ok := h.held[cfg]; ok {
		<-release
	}
	return h.Regions.DetailByRegion(ctx, cfg, req)
}

// counts returns how many times cfg was asked about, and the most
// drill-downs in flight at once so far.
func (h *heldRegions) counts(cfg cuecast.ConfigPath) (asks, most int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.asks[cfg], h.most
}

// TestConfigPagesDoNotWaitForEachOther: two config pages opened at once,
// each asking the regions for its rollout's named instances, while the
// regions do not answer the first (held by the test, as a silent region
// holds it until the timeout): the second page is drawn while the first
// one's drill-down is still waiting. They waited for each other (up to
// 2 s each) while the pages of one sample shared one lock. The timeouts
// are the test's patience: the regions that do answer are not raced
// against a clock (under load they missed the 2 s default).
func TestConfigPagesDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	t.Run(natstest.TreeMode, func(t *testing.T) {
		f := namedCanaries(t)
		regions := holdRegions(f.p.Distributor, checkout)
		srv, err := web.New(web.Options{Fleet: f.p.Distributor, Rollouts: f.p.Rollout, Regions: regions,
			DetailTimeout: poll.Patience, StagesTimeout: poll.Patience, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			t.Fatal(err)
		}
		srv.Sample(t.Context())
		page := func(cfg cuecast.ConfigPath) <-chan *httptest.ResponseRecorder {
			done := make(chan *httptest.ResponseRecorder, 1)
			go func() {
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/configs/"+string(cfg), nil))
				done <- rec
			}()
			return done
		}

		first := page(checkout)
		if cfg := <-regions.asked; cfg != checkout {
			t.Fatalf("asked the regions about %s, want %s", cfg, checkout)
		}
		second := page(refunds)
		select {
		case rec := <-second:
			if cfg := <-regions.asked; cfg != refunds {
				t.Errorf("asked the regions about %s, want %s", cfg, refunds)
			}
			canaryCounted(t, "the second page", rec)
			second = nil
		case <-time.After(poll.Patience):
			t.Error("the second config's page waited for the first one's drill-down")
		}
		select {
		case <-first:
			t.Error("the first page was drawn before its drill-down was let go")
		default:
		}
		close(regions.held[checkout])
		if rec := <-first; rec.Code != http.StatusOK {
			t.Errorf("the first page, its drill-down let go: %d %s", rec.Code, rec.Body)
		}
		if second != nil {
			<-second // drawn after all: not left logging past the test
		}
	})
}
