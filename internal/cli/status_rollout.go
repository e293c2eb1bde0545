package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/termtext"
)

// This file extends `cuecast status` with the rollout's view: --wait
// CONFIG@VERSION for deploy pipelines, pins shown loudly, and for one named
// config the stages, stragglers, last-known-good instances and drift.

// parseWait splits CONFIG@VERSION.
func parseWait(s string) (cuecast.ConfigPath, uint64, error) {
	cfg, ver, ok := strings.Cut(s, "@")
	n, err := strconv.ParseUint(ver, 10, 64)
	if !ok || err != nil || n == 0 {
		return "", 0, usageErrorf("cuecast status --wait payments/checkout@42 --timeout 5m", "--wait %q: want CONFIG@VERSION", s)
	}
	p := cuecast.ConfigPath(cfg)
	if err := p.Validate(); err != nil {
		return "", 0, &UsageError{Err: err, Hint: "name configs by their directory, like payments/checkout"}
	}
	return p, n, nil
}

// waitOutcome is the end of a wait, as --output json prints it.
type waitOutcome struct {
	Config  cuecast.ConfigPath `json:"config"`
	Version uint64             `json:"version"`
	// Outcome is "applied" (exit 0), "halted" or "timed_out" (exit 4).
	Outcome   string `json:"outcome"`
	Reason    string `json:"reason,omitempty"`
	Instances int    `json:"instances"`
	OnVersion int    `json:"on_version"`
	// Behind are the instances counted that do not report the version.
	Behind []cuecast.Report `json:"behind"`
	Waited string           `json:"waited"`
}

// statusWait follows the live reports until every live instance reports
// version n of cfg (exit 0) or the timeout passes (exit 4, listing the
// stragglers). A halted rollout of that version ends the wait early. The
// reports are read once and then followed on core NATS: a wait looks four
// times a second, while a rollout is under way, and a read of the report
// stream per look would cost the server a consumer and every report. A
// config never published is wrong usage, as for status; a version not yet
// published is waited for.
func statusWait(ctx context.Context, env *Env, nc *nats.Conn, d *distributor.Distributor, opts *StatusOptions) error {
	cfg, n, err := parseWait(opts.Wait)
	if err != nil {
		return err
	}
	if _, err := d.Latest(ctx, cfg); errors.Is(err, cuecast.ErrNotFound) {
		return &UsageError{Err: fmt.Errorf("status --wait: %w", err), Hint: hintPublished}
	} else if err != nil {
		return fmt.Errorf("status --wait: %w", err)
	}
	ctl, err := readRollout(ctx, nc, d, env)
	if err != nil {
		return err
	}
	timeout := opts.Timeout
	start := time.Now()
	deadline := start.Add(timeout)
	live, stop, err := liveReports(ctx, env, d, cfg)
	if err != nil {
		return fmt.Errorf("status --wait: %w", err)
	}
	defer stop()
	var lastLine string
	var lastAt time.Time
	for {
		reports, err := live(ctx)
		if err != nil {
			return fmt.Errorf("status --wait: %w", err)
		}
		var behind []cuecast.Report
		for _, r := range reports {
			if r.Version != n {
				behind = append(behind, r)
			}
		}
		// A report made from a region's summary stands for several
		// instances (cuecast.Report.Count): count by weight.
		nLive, onVersion := distributor.Weigh(reports), distributor.Weigh(reports)-distributor.Weigh(behind)
		out := waitOutcome{Config: cfg, Version: n, Instances: nLive, OnVersion: onVersion, Behind: behind}
		if out.Behind == nil {
			out.Behind = []cuecast.Report{}
		}
		rec, recErr := ctl.Record(ctx, cfg)
		unsettled := unsettledStage(rec, recErr, n, reports)
		if len(reports) > 0 && len(behind) == 0 && unsettled == "" {
			out.Outcome, out.Waited = "applied", time.Since(start).Round(time.Millisecond).String()
			if opts.Output == "json" {
				return writeJSON(env.IO.Out, out)
			}
			fmt.Fprintf(env.IO.Out, "%s@%d: all %d live instances report it (%s)\n", cfg, n, nLive, out.Waited)
			return nil
		}
		halted, stage := "", ""
		if recErr == nil && rec.Current != nil && rec.Current.Version == n {
			if rec.Current.State == rollout.StateHalted {
				halted = rec.Current.Reason
			}
			if st := rec.Current.Stage; st < len(rec.Current.Policy.Stages) {
				stage = fmt.Sprintf("; rollout stage %d/%d %s: %s", st+1, len(rec.Current.Policy.Stages), rec.Current.Policy.Stages[st].Name, rec.Current.State)
			}
		}
		if env.IO.IsStderrTTY() {
			// A person watching sees the wait move; a pipeline's log
			// (stderr not a terminal) gets only the outcome.
			line := waitProgress(cfg, n, reports, behind) + stage
			if line != lastLine || time.Since(lastAt) >= 10*time.Second {
				fmt.Fprintf(env.IO.ErrOut, "%s (%s)\n", line, time.Since(start).Round(time.Second))
				lastLine, lastAt = line, time.Now()
			}
		}
		if halted != "" || !time.Now().Before(deadline) {
			out.Outcome, out.Reason, out.Waited = "timed_out", "", time.Since(start).Round(time.Millisecond).String()
			if halted != "" {
				out.Outcome, out.Reason = "halted", halted
				fmt.Fprintf(env.IO.ErrOut, "%s@%d: rollout HALTED: %s\n", cfg, n, termtext.Line(halted))
			} else {
				out.Reason = unsettled
				fmt.Fprintf(env.IO.ErrOut, "%s@%d: timed out after %s: %d of %d live instances report it\n", cfg, n, timeout, onVersion, nLive)
				if unsettled != "" {
					fmt.Fprintf(env.IO.ErrOut, "  %s (the controller counts the instances it knows are live; is serve running?)\n", unsettled)
				}
			}
			if len(reports) == 0 {
				fmt.Fprintln(env.IO.ErrOut, "  no live instance reports on this config")
			}
			for _, r := range behind {
				fmt.Fprintf(env.IO.ErrOut, "  straggler %s on v%d%s\n", weighted(r), r.Version, reportFlags(r))
			}
			if opts.Output == "json" {
				if err := writeJSON(env.IO.Out, out); err != nil {
					return err
				}
			}
			return &silentError{code: ExitHalted}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(250*time.Millisecond, time.Until(deadline)+time.Millisecond)):
		}
	}
}

// unsettledStage says why the rollout controller is not done bringing the
// current stage of version n's rollout to n (rec, read with err): it is
// moving the stage's pointers, waiting for instances it heard to apply n,
// or staging a strict config; "" when it is done (holding or complete) or
// has no rollout of n. The rule of --wait (docs/ROLLOUT.md, "Waiting for a
// version"): the instances that reported are not all the instances the
// controller knows are live, so their count alone ended waits early.
func unsettledStage(rec rollout.Record, err error, n uint64, reports []cuecast.Report) string {
	if err != nil || rec.Current == nil || rec.Current.Version != n {
		return ""
	}
	r := rec.Current
	switch r.State {
	case rollout.StateMoving:
		return fmt.Sprintf("the rollout of v%d is still moving its stage %s", n, r.StageName())
	case rollout.StateStaging:
		return fmt.Sprintf("the rollout of v%d is still staging its stage %s", n, r.StageName())
	case rollout.StateWaiting:
		return fmt.Sprintf("the rollout of v%d is still waiting in its stage %s: %s", n, r.StageName(), rollout.FormatTimes(r.NoteFor(reports, time.Now())))
	}
	return ""
}

// waitProgress is one line of a wait's progress: how many live instances
// report the version, and the first stragglers.
func waitProgress(cfg cuecast.ConfigPath, n uint64, reports, behind []cuecast.Report) string {
	if len(reports) == 0 {
		return fmt.Sprintf("%s@%d: waiting: no live instance reports on this config yet", cfg, n)
	}
	line := fmt.Sprintf("%s@%d: waiting: %d of %d live instances report it", cfg, n, distributor.Weigh(reports)-distributor.Weigh(behind), distributor.Weigh(reports))
	var names []string
	for i, r := range behind {
		if i == 3 {
			names = append(names, fmt.Sprintf("%d more", len(behind)-i))
			break
		}
		names = append(names, fmt.Sprintf("%s on v%d", weighted(r), r.Version))
	}
	if len(names) > 0 {
		line += "; behind: " + strings.Join(names, ", ")
	}
	return line
}

// liveReports returns how statusWait reads cfg's live reports, and how it
// stops: from a report watch; or, where the NATS configuration does not let
// the user subscribe to reports (one generated before operators could), by
// reading the report stream each time.
func liveReports(ctx context.Context, env *Env, d *distributor.Distributor, cfg cuecast.ConfigPath) (read func(context.Context) ([]cuecast.Report, error), stop func(), err error) {
	w, err := d.WatchReports(ctx, cfg)
	if errors.Is(err, nats.ErrPermissionViolation) {
		env.Logger().Warn("cannot follow reports live, so reading the report stream on every look; regenerate the NATS configuration (cuecast nats-config) to let operators subscribe to them", "err", err)
		return func(ctx context.Context) ([]cuecast.Report, error) { return d.Reports(ctx, cfg) }, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return func(context.Context) ([]cuecast.Report, error) { return w.Live(), nil }, w.Stop, nil
}

func reportFlags(r cuecast.Report) string {
	var f []string
	if r.LastKnownGood {
		f = append(f, "last-known-good")
	}
	if !r.Healthy {
		f = append(f, "unhealthy")
	}
	if r.LastError != "" {
		f = append(f, "error: "+r.LastError)
	}
	if r.Refused != "" {
		f = append(f, "refused a pointer: "+r.Refused)
	}
	if len(f) == 0 {
		return ""
	}
	return " (" + strings.Join(f, "; ") + ")"
}

// statusRollout writes, after the status table, every pin loudly and, when
// one config is named, its rollout stages, stragglers, last-known-good
// instances and drift. recs and reports are what st was counted from: the
// pins and lists come from them, not from more reads, so they agree with
// the counts (TestStatusReadsEveryRecordOnce,
// TestStatusOfAConfigReadsTheFleetOnce). A rollout's stages are measured
// apart (ctl.Progress): in a tree they need the regions' per-instance
// detail, which the summaries counted here do not hold.
func statusRollout(ctx context.Context, env *Env, d *distributor.Distributor, ctl rolloutReader, named []cuecast.ConfigPath, st []distributor.ConfigStatus, recs []rollout.Record, reports []cuecast.Report) error {
	w := env.IO.Out
	byConfig := make(map[cuecast.ConfigPath]rollout.Record, len(recs))
	for _, rec := range recs {
		byConfig[rec.Config] = rec
	}
	for _, s := range st {
		rec, ok := byConfig[s.Config]
		if !ok {
			continue
		}
		if p := rec.Pin; p != nil && len(named) != 1 {
			fmt.Fprintf(w, "!!! %s PINNED to v%d by %s: %q", s.Config, p.Version, termtext.Line(p.Actor), p.Reason)
			if rec.Pending > 0 {
				fmt.Fprintf(w, " (v%d held back)", rec.Pending)
			}
			fmt.Fprintln(w)
		}
	}
	if len(named) != 1 || len(st) != 1 {
		return nil
	}
	s := st[0]
	reports = slices.DeleteFunc(slices.Clone(reports), func(r cuecast.Report) bool { return r.Config != s.Config })
	fmt.Fprintln(w)
	p, err := ctl.Progress(ctx, s.Config)
	switch {
	case errors.Is(err, rollout.ErrNoRollout):
		fmt.Fprintf(w, "%s: no rollout recorded by the controller\n", s.Config)
	case err != nil:
		return err
	default:
		printRecord(w, p, time.Now())
	}
	if len(s.Stragglers) > 0 {
		fmt.Fprintf(w, "  stragglers (not on the version the rollout means them to run, for too long):\n")
		for _, r := range s.Stragglers {
			fmt.Fprintf(w, "    %s on v%d%s\n", termtext.Line(r.Instance), r.Version, reportFlags(r))
		}
	}
	if s.Failing > 0 {
		fmt.Fprintf(w, "  failing to apply (their last apply failed):\n")
		for _, r := range reports {
			if r.LastError != "" {
				fmt.Fprintf(w, "    %s on v%d: %s\n", termtext.Line(r.Instance), r.Version, termtext.Line(r.LastError))
			}
		}
	}
	if len(s.Refused) > 0 {
		fmt.Fprintf(w, "  refused (a forged or unverifiable pointer, not applied; not an apply failure):\n")
		for _, r := range s.Refused {
			fmt.Fprintf(w, "    %s on v%d: %s\n", termtext.Line(r.Instance), r.Version, termtext.Line(r.Refused))
		}
	}
	if len(s.LastKnownGood) > 0 {
		fmt.Fprintf(w, "  on last-known-good (not confirmed by the distributor):\n")
		for _, r := range s.LastKnownGood {
			fmt.Fprintf(w, "    %s on v%d\n", termtext.Line(r.Instance), r.Version)
		}
	}
	return printDrift(ctx, w, d, s.Config, s.Latest.Version, reports)
}

// printDrift lists instances whose reported content is not what cuecast
// published for the version they say they run (distributor.DriftOf, the
// rule the dashboard and the metrics use): tampered files, a bad build of the
// client, a version from another store. reports are cfg's live reports.
func printDrift(ctx context.Context, w io.Writer, d *distributor.Distributor, cfg cuecast.ConfigPath, latest uint64, reports []cuecast.Report) error {
	vs, err := d.Versions(ctx, cfg)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	drift := distributor.DriftOf(reports, vs, latest)
	if len(drift) > 0 {
		fmt.Fprintf(w, "  DRIFT (reported content matches no version it should hold):\n")
		for _, r := range drift {
			fmt.Fprintf(w, "    %s\n", termtext.Line(r.Why))
		}
	}
	return nil
}

// weighted names the instances r stands for: one, or for a report made
// from a region's summary, one of them and how many more.
func weighted(r cuecast.Report) string {
	if w := r.Weight(); w > 1 {
		return fmt.Sprintf("%s (and %d like it)", termtext.Line(r.Instance), w-1)
	}
	return termtext.Line(r.Instance)
}
