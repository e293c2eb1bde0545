package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/web"
)

// load serves one GET of path on srv in the background, with ctx.
func load(ctx context.Context, srv *web.Server, path string) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		done <- rec
	}()
	return done
}

// TestInstancesPageAskedOnceForABurst: five loads of one config's
// per-instance page at once, while the region's answer is held, ask the
// regions once, and all five are drawn from that one answer when it
// comes; a load after them, in the same sample, too. A load closed while
// it waits stops waiting. Each load asked the regions for everything
// (up to 10,000 instances a region) on its own, so that a burst of
// reloads was as many full drill-downs against the regions.
func TestInstancesPageAskedOnceForABurst(t *testing.T) {
	t.Parallel()
	t.Run(natstest.TreeMode, func(t *testing.T) {
		t.Parallel()
		const hb = time.Second
		log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
		fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments"}, Heartbeat: hb, Logger: log})
		d := fl.Distributor(t, distributor.Options{Heartbeat: hb, Logger: log})
		svc := fl.Instance(t, "payments")
		go func() { // two instances report every heartbeat to region leaf-1
			tk := time.NewTicker(hb)
			defer tk.Stop()
			for {
				for _, id := range []string{"web-1", "web-2"} {
					b, _ := json.Marshal(cuecast.Report{Instance: id, Config: checkout, Version: 1, Checksum: "sum1", Healthy: true, At: time.Now().UTC()})
					if err := svc.Publish(cuecast.ReportSubject(checkout, id), b); err != nil {
						t.Errorf("report: %v", err)
					}
				}
				select {
				case <-t.Context().Done():
					return
				case <-tk.C:
				}
			}
		}()
		poll.Until(t, "the hub holding region leaf-1's summary of the 2 instances", poll.Patience, func() (bool, string) {
			rs, err := d.Reports(t.Context(), checkout)
			if err != nil {
				return false, err.Error()
			}
			return distributor.Weigh(rs) == 2 && rs[0].Count > 0, fmt.Sprintf("%+v", rs)
		})

		regions := holdRegions(d, checkout)
		srv, err := web.New(web.Options{Fleet: d, Regions: regions, DetailTimeout: poll.Patience, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		srv.Sample(t.Context()) // no other sample: an answer serves the rest of the test

		const n = 5
		path := "/instances/" + string(checkout)
		var pages []<-chan *httptest.ResponseRecorder
		for range n {
			pages = append(pages, load(t.Context(), srv, path))
		}
		if cfg := poll.Receive(t, "a drill-down", poll.Patience, regions.asked); cfg != checkout {
			t.Fatalf("asked the regions about %s, want %s", cfg, checkout)
		}
		closed, closeIt := context.WithCancel(t.Context())
		gone := load(closed, srv, path)
		closeIt()
		poll.Receive(t, "the load closed while it waited, returning", poll.Patience, gone)

		close(regions.held[checkout])
		var first string
		for i, page := range pages {
			rec := poll.Receive(t, "a page of the burst", poll.Patience, page)
			body := rec.Body.String()
			if rec.Code != http.StatusOK || !strings.Contains(body, `<tr data-instance="web-1">`) || !strings.Contains(body, `<tr data-instance="web-2">`) {
				t.Fatalf("page %d of the burst: %d, want leaf-1's two instances in\n%s", i, rec.Code, body)
			}
			if i == 0 {
				first = body
			} else if body != first {
				t.Errorf("page %d of the burst differs from the first:\n%s\nwant\n%s", i, body, first)
			}
		}
		if asks, _ := regions.counts(checkout); asks != 1 {
			t.Fatalf("asked the regions %d times for %d loads of the page at once, want once", asks, n)
		}
		if rec := poll.Receive(t, "a load after the burst", poll.Patience, load(t.Context(), srv, path)); rec.Code != http.StatusOK || rec.Body.String() != first {
			t.Errorf("a load after the burst, in the same sample: %d\n%s\nwant the burst's page", rec.Code, rec.Body)
		}
		if asks, _ := regions.counts(checkout); asks != 1 {
			t.Errorf("asked the regions %d times, want once a sample", asks)
		}
	})
}

// The server's debug lines when a drill-down waits (drilldown.go).
const (
	slotWait = "drill-down waits for a slot"
	turnWait = "drill-down waits for its config's turn"
)

// logWaits passes the server's warnings to the test's output, and tells
// waits the config of each drill-down that logs msg (slotWait, turnWait).
type logWaits struct {
	slog.Handler
	msg   string
	waits chan cuecast.ConfigPath
}

func (h logWaits) Enabled(context.Context, slog.Level) bool { return true }

func (h logWaits) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "config" {
				h.waits <- cuecast.ConfigPath(a.Value.String())
			}
			return true
		})
	}
	if r.Level < slog.LevelWarn {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h logWaits) WithAttrs(as []slog.Attr) slog.Handler {
	return logWaits{h.Handler.WithAttrs(as), h.msg, h.waits}
}

func (h logWaits) WithGroup(name string) slog.Handler {
	return logWaits{h.Handler.WithGroup(name), h.msg, h.waits}
}

// singleServer is a distributor on a single server of its own, with no
// instance: its drill-downs ask no region and come back at once.
func singleServer(t *testing.T) *distributor.Distributor {
	t.Helper()
	fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments"}})
	d, err := distributor.New(t.Context(), fl.Hub(t), distributor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDrillDownsCappedAcrossTheServer: the per-instance pages of six
// configs opened at once, the regions' answers held: four drill-downs
// are asked (the default cap), the fifth and sixth wait; the sixth,
// closed, stops waiting; the fifth is asked once one of the four has
// ended, never while four are in flight. Nothing capped them: as many
// configs' pages, as many drill-downs in flight against the regions.
func TestDrillDownsCappedAcrossTheServer(t *testing.T) {
	t.Parallel()
	d := singleServer(t)
	const limit = 4 // Options.MaxDrillDowns' default
	var cfgs []cuecast.ConfigPath
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		cfgs = append(cfgs, cuecast.ConfigPath("payments/"+name))
	}
	regions := holdRegions(d, cfgs...)
	waits := make(chan cuecast.ConfigPath, len(cfgs))
	log := slog.New(logWaits{slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}), slotWait, waits})
	srv, err := web.New(web.Options{Fleet: d, Regions: regions, DetailTimeout: poll.Patience, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv.Sample(t.Context())

	pages := map[cuecast.ConfigPath]<-chan *httptest.ResponseRecorder{}
	asked := map[cuecast.ConfigPath]bool{}
	for _, cfg := range cfgs[:limit] {
		pages[cfg] = load(t.Context(), srv, "/instances/"+string(cfg))
	}
	for range limit {
		asked[poll.Receive(t, "a drill-down", poll.Patience, regions.asked)] = true
	}
	// The fifth and sixth wait for a slot: neither is asked while four are.
	fifth, sixth := cfgs[limit], cfgs[limit+1]
	pages[fifth] = load(t.Context(), srv, "/instances/"+string(fifth))
	closed, closeIt := context.WithCancel(t.Context())
	gone := load(closed, srv, "/instances/"+string(sixth))
	for range 2 {
		select {
		case cfg := <-regions.asked:
			_, most := regions.counts(cfg)
			t.Fatalf("asked the regions about %s while %d drill-downs were held: %d in flight, want at most %d", cfg, limit, most, limit)
		case <-waits:
		case <-time.After(poll.Patience):
			t.Fatalf("neither %s nor %s waited for a slot after %s", fifth, sixth, poll.Patience)
		}
	}
	closeIt()
	if rec := poll.Receive(t, "the closed load waiting for a slot, returning", poll.Patience, gone); strings.Contains(rec.Body.String(), "<!doctype html>") {
		t.Errorf("the closed load was drawn: %d %s", rec.Code, rec.Body)
	}

	// One of the four ends: the fifth is asked, the sixth (closed) not.
	var ended cuecast.ConfigPath
	for cfg := range asked {
		ended = cfg
		break
	}
	close(regions.held[ended])
	if rec := poll.Receive(t, "the page whose drill-down ended", poll.Patience, pages[ended]); rec.Code != http.StatusOK {
		t.Errorf("the page of %s: %d %s", ended, rec.Code, rec.Body)
	}
	delete(pages, ended)
	if cfg := poll.Receive(t, "the waiting drill-down", poll.Patience, regions.asked); cfg != fifth {
		t.Fatalf("asked the regions about %s, want %s", cfg, fifth)
	}
	for cfg, release := range regions.held {
		if cfg != ended {
			close(release)
		}
	}
	for cfg, page := range pages {
		if rec := poll.Receive(t, "the page of "+string(cfg), poll.Patience, page); rec.Code != http.StatusOK {
			t.Errorf("the page of %s: %d %s", cfg, rec.Code, rec.Body)
		}
	}
	if asks, most := regions.counts(sixth); asks != 0 || most != limit {
		t.Errorf("asked about the closed %s %d times, %d drill-downs in flight at most; want 0 and %d", sixth, asks, most, limit)
	}
	drillDownMetrics(t, srv, map[string]float64{`reason="slot"`: 2}, map[string]float64{`reason="busy"`: 0, `reason="closed"`: 1})
}

// TestDrillDownPastTheCapSaysSo: with one drill-down slot
// (Options.MaxDrillDowns), held, a second config's per-instance page
// waits for it as long as it would wait for the regions, then says it
// did not ask them, without asking.
func TestDrillDownPastTheCapSaysSo(t *testing.T) {
	t.Parallel()
	d := singleServer(t)
	regions := holdRegions(d, checkout)
	srv, err := web.New(web.Options{Fleet: d, Regions: regions, MaxDrillDowns: 1, DetailTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	held := load(t.Context(), srv, "/instances/"+string(checkout))
	poll.Receive(t, "the held drill-down", poll.Patience, regions.asked)
	rec := poll.Receive(t, "the page past the cap", poll.Patience, load(t.Context(), srv, "/instances/"+string(refunds)))
	if want := "the regions were not asked: this server&#39;s drill-downs stayed busy: 1 in flight (its cap) for 100ms; reload to ask again"; rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
		t.Errorf("the page past the cap: %d, want %q in\n%s", rec.Code, want, rec.Body)
	}
	if asks, _ := regions.counts(refunds); asks != 0 {
		t.Errorf("asked the regions about %s %d times, want none", refunds, asks)
	}
	drillDownMetrics(t, srv, map[string]float64{`reason="slot"`: 1, `reason="turn"`: 0}, map[string]float64{`reason="busy"`: 1, `reason="closed"`: 0})
	close(regions.held[checkout])
	<-held
}

// drillDownMetrics fails t unless srv's /metrics counts waits
// (cuecast_dashboard_drilldown_waits_total, by its labels) and notAsked
// (cuecast_dashboard_drilldowns_not_asked_total).
func drillDownMetrics(t *testing.T, srv *web.Server, waits, notAsked map[string]float64) {
	t.Helper()
	m := scrapeServer(t, srv)
	for name, want := range map[string]map[string]float64{"cuecast_dashboard_drilldown_waits_total": waits, "cuecast_dashboard_drilldowns_not_asked_total": notAsked} {
		for labels, n := range want {
			if got, ok := m[name+"{"+labels+"}"]; !ok || got != n {
				t.Errorf("%s{%s} = %v (exported: %v), want %v", name, labels, got, ok, n)
			}
		}
	}
}
