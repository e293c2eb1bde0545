package web

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/metrics"
)

// The per-instance page, /instances/<config>: in a tree whose regions
// summarise (docs/SCALING.md) the config page's rows from a region stand
// for many instances each (cuecast.Report.Count); this page asks the
// regions for each instance's own report when it is opened, as
// `cuecast status --instances` does, and names a region that does not
// answer: its instances' state is unknown, never shown as healthy. It is
// drawn on the server, so it shows the same without the page script.
//
// A drill-down asks each region for up to 10,000 reports, so the page
// asks one at a time per config and shares the answer (drillTurns), as a
// config page does for its named stages, and every drill-down of the server, this page's or a config page's, takes
// one of Options.MaxDrillDowns slots (drillSlot): reloads and open pages
// cannot load the regions' summarizers at will.

// instancesView is the per-instance page of one config.
type instancesView struct {
	Config cuecast.ConfigPath
	// Here are the instances reporting to this server itself (a single
	// server's whole fleet).
	Here []instanceRow
	// Regions are the summarised regions asked, by region; none without
	// Options.Regions (Asked false) or when no region summarises cfg.
	Regions []regionRows
	Asked   bool
	Timeout time.Duration
	At      string // when it was asked
	Error   string
}

type regionRows struct {
	Region     string
	Instances  []instanceRow
	More       int
	Unanswered bool
}

type instanceRow struct {
	Instance, Version, Staged, State, Error, At string
	Healthy                                     bool
}

func instanceRowOf(r cuecast.Report) instanceRow {
	row := instanceRow{Instance: r.Instance, Version: "v" + strconv.FormatUint(r.Version, 10), Staged: "-", State: "applied",
		Healthy: r.Healthy, Error: r.LastError, At: r.At.UTC().Format("2006-01-02 15:04:05 UTC")}
	if r.Staged != 0 {
		row.Staged = "v" + strconv.FormatUint(r.Staged, 10)
		row.State = "staged v" + strconv.FormatUint(r.Staged, 10)
	}
	switch {
	case r.LastKnownGood:
		row.State = "on last-known-good"
	case r.LastError != "":
		row.State = "failing"
	}
	if r.Refused != "" {
		row.Error = "refused a pointer: " + r.Refused
		if r.LastError != "" {
			row.Error = r.LastError + "; refused a pointer: " + r.Refused
		}
	}
	return row
}

// drillTurns gives each config one drill-down at a time, for one kind of
// page (Server.insts, Server.staged: a config's per-instance page and its
// config page do not wait for each other). It lives on the Server so that
// a drill-down longer than a sample does not have the next sample's beside
// it: a load waits for its config's turn, and is served the answer of the
// load that asked while it waited, or one kept from the current sample,
// or else asks. One config's wait never holds up another's.
type drillTurns[V any] struct {
	s    *Server
	mu   sync.Mutex
	asks map[cuecast.ConfigPath]*drillTurn[V]
}

// drillTurn is one config's turn and its last answer (drillTurns.mu).
type drillTurn[V any] struct {
	turn  chan struct{} // holds a token while a load asks
	users int           // loads holding or waiting for turn
	kept  *keptAnswer[V]
}

// keptAnswer is the last answer of a drillTurn.
type keptAnswer[V any] struct {
	v   V
	err error
	at  time.Time // when it arrived
	// reuse: it may serve loads that come after it while the sample it
	// was asked in (seq) is the current one; a failure or a drill-down
	// not asked only serves the loads that waited for it.
	reuse bool
	seq   uint64
}

// errTurn: a load was closed while it waited for its config's turn.
var errTurn = errors.New("wait for another load's drill-down")

func newDrillTurns[V any](s *Server) *drillTurns[V] {
	return &drillTurns[V]{s: s, asks: map[cuecast.ConfigPath]*drillTurn[V]{}}
}

// answer returns cfg's answer, waiting for its turn until ctx is done
// (then errTurn, wrapping ctx's error). ask asks the regions, and says
// whether its answer may serve later loads of the same sample.
func (t *drillTurns[V]) answer(ctx context.Context, cfg cuecast.ConfigPath, ask func(context.Context) (V, bool, error)) (V, error) {
	start := time.Now()
	a, done := t.join(cfg)
	defer done()
	select {
	case a.turn <- struct{}{}:
	default:
		// Counted before it is logged: whoever sees the line sees the count.
		t.s.metrics.DrillDownWaited(metrics.DrillDownTurn)
		t.s.log.Debug("drill-down waits for its config's turn", "config", cfg)
		select {
		case a.turn <- struct{}{}:
		case <-ctx.Done():
			t.s.metrics.DrillDownNotAsked(metrics.DrillDownClosed)
			var zero V
			return zero, fmt.Errorf("%w into %s: %w", errTurn, cfg, ctx.Err())
		}
	}
	defer func() { <-a.turn }()
	t.mu.Lock()
	k := a.kept
	t.mu.Unlock()
	if k != nil && (k.at.After(start) || t.reusable(k)) {
		return k.v, k.err
	}
	seq, sampled := t.s.sample()
	v, reuse, err := ask(ctx)
	if ctx.Err() != nil { // a load closed while asking keeps nothing
		return v, err
	}
	// Before the first sample an answer serves the loads that waited only.
	k = &keptAnswer[V]{v: v, err: err, at: time.Now(), reuse: reuse && err == nil && sampled, seq: seq}
	t.mu.Lock()
	a.kept = k
	t.mu.Unlock()
	return v, err
}

// join returns cfg's drillTurn, made on first use, and the func the
// caller calls when done with it; the last user of a turn whose answer
// cannot serve a later load drops it.
func (t *drillTurns[V]) join(cfg cuecast.ConfigPath) (*drillTurn[V], func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.asks[cfg]
	if !ok {
		a = &drillTurn[V]{turn: make(chan struct{}, 1)}
		t.asks[cfg] = a
	}
	a.users++
	return a, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if a.users--; a.users == 0 && (a.kept == nil || !t.reusable(a.kept)) {
			delete(t.asks, cfg)
		}
	}
}

// reusable reports whether k may serve a load that came after it: it
// was asked in the current sample.
func (t *drillTurns[V]) reusable(k *keptAnswer[V]) bool {
	seq, sampled := t.s.sample()
	return k.reuse && sampled && k.seq == seq
}

// drop drops the turns no load is using, once a new sample makes their
// answers stale.
func (t *drillTurns[V]) drop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for cfg, a := range t.asks {
		if a.users == 0 {
			delete(t.asks, cfg)
		}
	}
}

// sample returns the current sample's number; false before the first.
func (s *Server) sample() (uint64, bool) {
	snap, _ := s.current()
	if snap == nil {
		return 0, false
	}
	return snap.seq, true
}

// instancesOf returns cfg's per-instance view, one drill-down at a time
// per config (drillTurns), waiting for its turn until ctx is done.
func (s *Server) instancesOf(ctx context.Context, cfg cuecast.ConfigPath) (instancesView, error) {
	return s.insts.answer(ctx, cfg, func(ctx context.Context) (instancesView, bool, error) {
		return s.askInstances(ctx, cfg)
	})
}

// askInstances reads cfg's instances: those reporting here from the
// report stream, and each summarised region's from the region, waiting
// at most DetailTimeout for a drill-down slot and as long again for the
// regions. reuse is false when the regions were not asked.
func (s *Server) askInstances(ctx context.Context, cfg cuecast.ConfigPath) (v instancesView, reuse bool, err error) {
	v = instancesView{Config: cfg, Asked: s.o.Regions != nil, Timeout: s.o.DetailTimeout, At: time.Now().UTC().Format("15:04:05 UTC")}
	reports, err := s.o.Fleet.Reports(ctx, cfg)
	if err != nil {
		return v, false, err
	}
	summarised := 0
	for _, r := range reports {
		if r.Count == 0 {
			v.Here = append(v.Here, instanceRowOf(r))
		} else {
			summarised += r.Count
		}
	}
	if s.o.Regions == nil {
		if summarised > 0 {
			v.Error = "this server cannot ask the regions: the " + strconv.Itoa(summarised) + " instances of summarised regions are counted on the config page only"
		}
		return v, true, nil
	}
	var regions []distributor.RegionDetail
	err = s.drill(ctx, cfg, s.o.DetailTimeout, func(ctx context.Context) (err error) {
		regions, err = s.o.Regions.DetailByRegion(ctx, cfg, distributor.DetailRequest{})
		return err
	})
	if noSlot(err) {
		if ctx.Err() != nil {
			return v, false, err
		}
		v.Error = "the regions were not asked: " + err.Error() + "; reload to ask again"
		return v, false, nil
	}
	if err != nil && !errors.Is(err, distributor.ErrDetailIncomplete) {
		return v, false, err
	}
	for _, rd := range regions {
		rr := regionRows{Region: rd.Region, More: rd.More, Unanswered: rd.Unanswered}
		for _, r := range rd.Reports {
			rr.Instances = append(rr.Instances, instanceRowOf(r))
		}
		v.Regions = append(v.Regions, rr)
	}
	return v, true, nil
}

// errDrillDownsBusy: a drill-down waited for a slot (drillSlot) and none
// was freed in time.
var errDrillDownsBusy = errors.New("this server's drill-downs stayed busy")

// noSlotError is drill's error when it did not ask: no slot was had; it
// says why as drillSlot did.
type noSlotError struct{ err error }

func (e *noSlotError) Error() string { return e.err.Error() }
func (e *noSlotError) Unwrap() error { return e.err }

// noSlot reports whether drill's err says it did not ask.
func noSlot(err error) bool {
	var ns *noSlotError
	return errors.As(err, &ns)
}

// drill runs ask with one of the server's drill-down slots (drillSlot,
// waiting at most wait for it) and ctx bounded by wait from when the slot
// was had, so that its timeout is the regions' alone; the slot is freed
// when ask returns. When no slot was had, the error is a *noSlotError
// saying why (drillSlot's), and ask was not called.
func (s *Server) drill(ctx context.Context, cfg cuecast.ConfigPath, wait time.Duration, ask func(context.Context) error) error {
	free, err := s.drillSlot(ctx, cfg, wait)
	if err != nil {
		return &noSlotError{err}
	}
	defer free()
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return ask(dctx)
}

// drillSlot waits for one of the server's Options.MaxDrillDowns
// drill-down slots, so that pages opened at once, of many configs, do
// not load the regions' summarizers at will; it waits until ctx is done
// or for wait, whichever comes first, and returns the func that frees
// the slot, or an error saying which ended the wait (errDrillDownsBusy,
// logged, or ctx's). Waits and give-ups are counted (metrics.DrillDownWaited,
// DrillDownNotAsked).
func (s *Server) drillSlot(ctx context.Context, cfg cuecast.ConfigPath, wait time.Duration) (func(), error) {
	free := func() { <-s.drills }
	select {
	case s.drills <- struct{}{}:
		return free, nil
	default:
	}
	s.metrics.DrillDownWaited(metrics.DrillDownSlot) // before the line, as in drillTurns.answer
	s.log.Debug("drill-down waits for a slot", "config", cfg, "in_flight", cap(s.drills))
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s.drills <- struct{}{}:
		return free, nil
	case <-ctx.Done():
		s.metrics.DrillDownNotAsked(metrics.DrillDownClosed)
		return nil, fmt.Errorf("wait for a drill-down slot: %w", ctx.Err())
	case <-t.C:
		s.metrics.DrillDownNotAsked(metrics.DrillDownBusy)
		s.log.Warn("drill-down not asked: all slots stayed busy", "config", cfg, "in_flight", cap(s.drills), "waited", wait)
		return nil, fmt.Errorf("%w: %d in flight (its cap) for %s", errDrillDownsBusy, cap(s.drills), wait)
	}
}

func (s *Server) instancesPage(w http.ResponseWriter, r *http.Request) {
	cfg, err := configParam(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v, err := s.instancesOf(r.Context(), cfg)
	if err != nil && r.Context().Err() != nil {
		return // closed: no one to tell
	}
	if err != nil {
		s.log.Warn("per-instance page", "config", cfg, "err", err)
		http.Error(w, "read the instances of "+string(cfg)+": "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; "+frameAncestors)
	if err := instancesTmpl.Execute(w, v); err != nil {
		s.log.Warn("per-instance page", "config", cfg, "err", err)
	}
}

var instancesTmpl = template.Must(template.New("instances").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Config}} · each instance · cuecast</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/style.css">
</head>
<body>
<header><a class="brand" href="/">cuecast</a></header>
<main id="view">
<section class="panel head"><h1><a href="/">configs</a> / <a href="/configs/{{.Config}}">{{.Config}}</a> / each instance</h1>
<p class="muted">Asked at {{.At}}: the instances reporting to this server, and each summarised region's, from the region; the loads of this page until the dashboard's next sample share one answer (reload to ask again).</p>
{{with .Error}}<p class="err">{{.}}</p>{{end}}
</section>
{{if .Here}}<section class="panel" id="here"><h2>Reporting here ({{len .Here}})</h2>{{template "rows" .Here}}</section>{{end}}
{{range .Regions}}<section class="panel{{if .Unanswered}} danger{{end}}" id="region-{{.Region}}" data-region="{{.Region}}">
{{if .Unanswered}}<h2>Region {{.Region}}: did not answer</h2>
<p class="err" data-unanswered="{{.Region}}">Region {{.Region}} did not answer within {{$.Timeout}}: the state of its instances is unknown (not healthy). The config page counts them from its last summary.</p>
{{else}}<h2>Region {{.Region}} ({{len .Instances}}{{if .More}}; {{.More}} more left out by the region{{end}})</h2>
{{if .Instances}}{{template "rows" .Instances}}{{else}}<p class="muted">No live instance in this region.</p>{{end}}
{{end}}</section>
{{end}}
{{if and (not .Here) (not .Regions)}}<p class="muted">No live instance reports on this config.</p>{{end}}
</main>
</body>
</html>
{{define "rows"}}<table><thead><tr><th>instance</th><th>version</th><th>staged</th><th>state</th><th>health</th><th>error</th><th>reported</th></tr></thead>
<tbody>{{range .}}<tr data-instance="{{.Instance}}"><td>{{.Instance}}</td><td>{{.Version}}</td><td>{{.Staged}}</td><td>{{.State}}</td>
<td>{{if .Healthy}}healthy{{else}}<span class="count danger">unhealthy</span>{{end}}</td><td class="err">{{.Error}}</td><td class="muted">{{.At}}</td></tr>
{{end}}</tbody></table>{{end}}`))

// stagedTimeout is Options.StagesTimeout's default, the rollout
// controller's own bound on the wait to show progress.
const stagedTimeout = 2 * time.Second

// stagedReports is what a rollout's stages are counted on.
type stagedReports struct {
	reports []cuecast.Report
	counted string // Rollout.Counted
}

// stagedReports returns the reports to count r's stages on: those of
// rollout.DrillDown, the controller's own drill-down, which asks the
// regions for the instances r's stages name or select when reports come
// from their summary groups (without it the page showed a named canary
// on a tree with no instances while `cuecast rollout status` counted
// it). It asks one at a time per config and at most once a sample
// (drillTurns: a drill-down longer than a sample serves the next
// sample's pages that waited for it), and waits at most
// Options.StagesTimeout (a live page, redrawn every sample, is not held up
// as long as the per-instance page may be); one config's wait never holds
// up another config's page, and it waits for one of the server's
// drill-down slots (drillSlot) at most as long, then counts by bucket and
// says why.
// Unlike the controller, which fails its step then, the page counts what
// did arrive: the instances of a region that did not answer, or left
// some out, stay in their groups, and counted says so.
func (s *Server) stagedReports(ctx context.Context, cfg cuecast.ConfigPath, r *rollout.Rollout, reports []cuecast.Report) stagedReports {
	if _, ok := rollout.NeedsDrillDown(r, reports); !ok || s.o.Regions == nil {
		return stagedReports{reports: reports}
	}
	st, err := s.staged.answer(ctx, cfg, func(ctx context.Context) (stagedReports, bool, error) {
		st, asked := s.askStaged(ctx, cfg, r, reports)
		return st, asked, nil
	})
	if err != nil { // the page was closed while another asked
		return stagedReports{reports: reports}
	}
	return st
}

// askStaged asks the regions for the instances r's stages name or
// select; asked is false when it did not (no drill-down slot).
func (s *Server) askStaged(ctx context.Context, cfg cuecast.ConfigPath, r *rollout.Rollout, reports []cuecast.Report) (st stagedReports, asked bool) {
	wait := min(s.o.DetailTimeout, s.o.StagesTimeout)
	var dr rollout.Drill
	err := s.drill(ctx, cfg, wait, func(ctx context.Context) (err error) {
		dr, err = rollout.DrillDown(ctx, s.o.Regions, cfg, r, reports)
		return err
	})
	if noSlot(err) {
		if ctx.Err() != nil {
			return stagedReports{reports: reports}, false
		}
		return stagedReports{reports: reports, counted: "the regions were not asked for the instances the stages name or select: " + err.Error() + "; those are counted by their bucket's summary group"}, false
	}
	st = stagedReports{reports: dr.Reports}
	if err != nil && !errors.Is(err, distributor.ErrDetailIncomplete) && !errors.Is(err, distributor.ErrDetailTruncated) {
		st.counted = "the instances the stages name or select are counted by their bucket's summary group: " + err.Error()
		s.log.Warn("ask the regions for a rollout's named instances", "config", cfg, "err", err)
	} else if len(dr.Short) > 0 {
		short := make([]string, 0, len(dr.Short))
		for _, rd := range dr.Short {
			if rd.Unanswered {
				short = append(short, rd.Region+" did not answer within "+wait.String())
			} else {
				short = append(short, fmt.Sprintf("%s left %d out", rd.Region, rd.More))
			}
		}
		st.counted = "asked the regions for the instances the stages name or select: " + strings.Join(short, ", ") + "; those are counted by their bucket's summary group"
	}
	return st, true
}
