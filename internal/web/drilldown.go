package web

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
)

// The per-instance page, /instances/<config>: in a tree whose regions
// summarise (docs/SCALING.md) the config page's rows from a region stand
// for many instances each (cuecast.Report.Count); this page asks the
// regions for each instance's own report when it is opened, as
// `cuecast status --instances` does, and names a region that does not
// answer: its instances' state is unknown, never shown as healthy. It is
// drawn on the server, so it shows the same without the page script.

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

// instancesOf reads cfg's instances: those reporting here from the
// report stream, and each summarised region's from the region, waiting
// at most DetailTimeout for them.
func (s *Server) instancesOf(ctx context.Context, cfg cuecast.ConfigPath) (instancesView, error) {
	v := instancesView{Config: cfg, Asked: s.o.Regions != nil, Timeout: s.o.DetailTimeout}
	reports, err := s.o.Fleet.Reports(ctx, cfg)
	if err != nil {
		return v, err
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
		return v, nil
	}
	dctx, cancel := context.WithTimeout(ctx, s.o.DetailTimeout)
	defer cancel()
	regions, err := s.o.Regions.DetailByRegion(dctx, cfg, distributor.DetailRequest{})
	if err != nil && !errors.Is(err, distributor.ErrDetailIncomplete) {
		return v, err
	}
	for _, rd := range regions {
		rr := regionRows{Region: rd.Region, More: rd.More, Unanswered: rd.Unanswered}
		for _, r := range rd.Reports {
			rr.Instances = append(rr.Instances, instanceRowOf(r))
		}
		v.Regions = append(v.Regions, rr)
	}
	return v, nil
}

func (s *Server) instancesPage(w http.ResponseWriter, r *http.Request) {
	cfg, err := configParam(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v, err := s.instancesOf(r.Context(), cfg)
	if err != nil {
		s.log.Warn("per-instance page", "config", cfg, "err", err)
		http.Error(w, "read the instances of "+string(cfg)+": "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
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
<p class="muted">Asked when this page was opened: the instances reporting to this server, and each summarised region's, from the region (reload to ask again).</p>
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

// stagedTimeout bounds the wait for the regions' answer on a config page,
// as the rollout controller bounds it to show progress.
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
// it). It asks at most once a sample per config, and waits at most
// stagedTimeout (a live page, redrawn every sample, is not held up as
// long as the per-instance page may be); one config's wait never holds
// up another config's page. Unlike the controller, which fails its step
// then, the page counts what did arrive: the instances of a region that
// did not answer, or left some out, stay in their groups, and counted
// says so.
func (s *Server) stagedReports(ctx context.Context, snap *snapshot, cfg cuecast.ConfigPath, r *rollout.Rollout, reports []cuecast.Report) stagedReports {
	if _, ok := rollout.NeedsDrillDown(r, reports); !ok || s.o.Regions == nil {
		return stagedReports{reports: reports}
	}
	ask := snap.stagedAskOf(cfg)
	select {
	case ask.turn <- struct{}{}:
		defer func() { <-ask.turn }()
	case <-ctx.Done(): // the page was closed while another asked
		return stagedReports{reports: reports}
	}
	if ask.st != nil {
		return *ask.st
	}
	wait := min(s.o.DetailTimeout, stagedTimeout)
	dctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	dr, err := rollout.DrillDown(dctx, s.o.Regions, cfg, r, reports)
	st := stagedReports{reports: dr.Reports}
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
	if ctx.Err() == nil { // a page closed while asking keeps nothing
		ask.st = &st
	}
	return st
}
