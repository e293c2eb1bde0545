package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/termtext"
	"github.com/cuecast/cuecast/tailer"
)

// RolloutOptions are the flags of `cuecast rollout <verb>`.
type RolloutOptions struct {
	Verb      string
	Config    cuecast.ConfigPath
	Variant   string // --variant: Config's variant
	NATS      string
	Output    string
	Reason    string
	Actor     string
	Emergency bool
	Interval  time.Duration
	// Version and Commit (watch): wait for the rollout of this version, or
	// of the version made from this commit, to begin before following it.
	Version uint64
	Commit  string
	// Prometheus (analyze) is the Prometheus to query; default
	// $CUECAST_PROMETHEUS_URL.
	Prometheus string
	// PrometheusTimeout (analyze) bounds each of its queries.
	PrometheusTimeout time.Duration
	// Conn: credentials and TLS (connflags.go).
	Conn ConnFlags
}

func newRolloutCmd(env *Env, runF func(*cobra.Command, *RolloutOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "See and steer staged rollouts: status, watch, advance, halt, resume, unpin, audit, analyze",
		Long: `Every new version rolls out stage by stage, as the namespace's policy in cuecast.cue
says: each stage's cohort gets the version, the controller waits until its instances
apply it, holds, compares their health with the rest of the fleet, and advances. On a
breach it halts and moves the cohort back to the version the whole fleet ran before
(none yet: the cohort stays; docs/ROLLOUT.md).

Operator actions need --reason and are recorded, with who and when, in the append-only
audit stream (cuecast rollout audit). Who is --as, default $CUECAST_ACTOR, your Git
identity, $USER, then the OS account@host.

Exit status 4 when a rollout shown (rollout status: any it lists, with or without a
CONFIG) or watched is halted; rollout analyze exits 1
when a metric could not be evaluated (outcome error: Prometheus unreachable, a query
refused), after printing every metric.`,
	}
	type verb struct {
		name, use, short string
		needCfg, act     bool
	}
	verbs := []verb{
		{"status", "status [CONFIG]", "Show each rollout: stage, coverage, holds, halts and pins", false, false},
		{"watch", "watch CONFIG", "Follow a rollout live until it completes or halts", true, false},
		{string(rollout.VerbAdvance), "advance CONFIG --reason TEXT [--emergency]", "Move to the next stage now (--emergency: to the last, skipping every hold)", true, true},
		{string(rollout.VerbHalt), "halt CONFIG --reason TEXT", "Stop the rollout and move its cohort back to the version the whole fleet ran", true, true},
		{string(rollout.VerbResume), "resume CONFIG --reason TEXT", "Restart a halted rollout at the stage it halted in", true, true},
		{string(rollout.VerbUnpin), "unpin CONFIG --reason TEXT", "Lift the pin of an emergency rollback; the newest held-back version rolls out", true, true},
		{"audit", "audit [CONFIG]", "List the recorded operator actions and automatic halts", false, false},
		{"analyze", "analyze CONFIG [--prometheus URL]", "Run the current stage's analysis queries now: cohort, baseline and verdict per metric", true, false},
	}
	for _, v := range verbs {
		opts := &RolloutOptions{Verb: v.name}
		sub := &cobra.Command{
			Use:   v.use,
			Short: v.short,
			Args: func(c *cobra.Command, args []string) error {
				if v.needCfg && len(args) != 1 {
					return usageErrorf(fmt.Sprintf("cuecast rollout %s payments/checkout", v.name), "rollout %s takes one CONFIG, got %d arguments", v.name, len(args))
				}
				if len(args) > 1 {
					return usageErrorf("name one config or none", "rollout %s takes at most one CONFIG", v.name)
				}
				return nil
			},
			RunE: func(c *cobra.Command, args []string) error {
				if len(args) == 1 {
					cfg, err := configArg(args[0], opts.Variant)
					if err != nil {
						return err
					}
					opts.Config = cfg
				} else if opts.Variant != "" {
					return usageErrorf(fmt.Sprintf("cuecast rollout %s payments/checkout --variant %s", v.name, opts.Variant), "--variant needs a CONFIG")
				}
				if v.act && strings.TrimSpace(opts.Reason) == "" {
					return usageErrorf(fmt.Sprintf("cuecast rollout %s %s --reason \"why\"", v.name, opts.Config), "rollout %s needs --reason: it is recorded in the audit stream", v.name)
				}
				if opts.Emergency && v.name != string(rollout.VerbAdvance) {
					return usageErrorf("only advance takes --emergency", "--emergency with rollout %s", v.name)
				}
				if err := validateOutput(opts.Output, "text", "json"); err != nil {
					return err
				}
				// The refresh ticker panics on a non-positive period.
				if v.name == "watch" {
					if err := positive("interval", opts.Interval, "1s"); err != nil {
						return err
					}
				}
				if v.name == "analyze" {
					if err := checkPrometheusTimeout(opts.PrometheusTimeout); err != nil {
						return err
					}
				}
				// A commit no version can be made from would be waited for
				// forever.
				if v.name == "watch" && opts.Commit != "" && !commitPrefix.MatchString(opts.Commit) {
					return usageErrorf("give the commit's hash or a prefix of it, like --commit 3f2a9c1", "--commit %q is not a commit hash", opts.Commit)
				}
				if err := resolveActor(env, &opts.Actor); err != nil {
					return err
				}
				if runF != nil {
					return runF(c, opts)
				}
				return rolloutRun(c.Context(), env, opts)
			},
		}
		sub.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "NATS server URL")
		registerVariant(sub.Flags(), &opts.Variant)
		opts.Conn.Register(sub.Flags())
		registerOutput(sub.Flags(), &opts.Output)
		if v.act {
			sub.Flags().StringVar(&opts.Reason, "reason", "", "why (required; recorded in the audit stream)")
			sub.Flags().StringVar(&opts.Actor, "as", "", "who is acting, for the audit trail (default $CUECAST_ACTOR, your Git identity, $USER, or the OS account@host)")
		}
		if v.name == string(rollout.VerbAdvance) {
			sub.Flags().BoolVar(&opts.Emergency, "emergency", false, "skip every remaining hold and go to the last stage (audited as an emergency)")
		}
		if v.name == "status" {
			sub.Long = rolloutStatusLong
		}
		if v.name == "analyze" {
			sub.Flags().StringVar(&opts.Prometheus, "prometheus", "", "base URL of the Prometheus to query (default $CUECAST_PROMETHEUS_URL)")
			registerPrometheusTimeout(sub.Flags(), &opts.PrometheusTimeout, "is the metric's error (exit 1)")
		}
		if v.name == "watch" {
			sub.Flags().Lookup("output").Usage = "output format: text, or json: JSON Lines, one object a line at each refresh (--interval), until the rollout completes or halts"
			sub.Long = "Follow a rollout live until it completes or halts.\n\n" +
				"With -o json, watch writes JSON Lines: one JSON object per line, the rollout's\n" +
				"progress at each refresh (--interval), until it completes or halts; read it a\n" +
				"line at a time, not as one document."
			sub.Flags().DurationVar(&opts.Interval, "interval", time.Second, "refresh interval")
			sub.Flags().Uint64Var(&opts.Version, "version", 0, "wait for this version's rollout (or a newer one) to begin, then follow it")
			sub.Flags().StringVar(&opts.Commit, "commit", "", "wait for the version made from this commit (a hash or a prefix of one), then follow its rollout; exit 2 when the tailer has taken the commit and made no version of CONFIG from it")
		}
		cmd.AddCommand(sub)
	}
	return cmd
}

// rolloutStatusLong is rollout status's help: a script running the runbook's
// `cuecast rollout status` (docs/OPERATIONS.md) relies on its exit status.
const rolloutStatusLong = `Show each rollout (or CONFIG's): stage, coverage, holds, halts and pins.

Exit status 4 when a rollout it shows is halted: CONFIG's or, without CONFIG, any
config's; in text and in JSON alike.`

// openController connects to NATS and opens the distributor and a
// controller that acts on the shared rollout state (it does not run).
// conn carries the credentials and TLS flags.
func openController(ctx context.Context, env *Env, url, name string, conn *ConnFlags) (*rollout.Controller, func(), error) {
	c, _, nc, err := openControllerAndDistributor(ctx, env, url, name, conn)
	if err != nil {
		return nil, nil, err
	}
	return c, nc.Close, nil
}

// openControllerAndDistributor is openController that also returns the
// distributor it opened and its connection (rollout watch reads versions
// and the tailer's state through them); the caller closes the connection.
func openControllerAndDistributor(ctx context.Context, env *Env, url, name string, conn *ConnFlags) (*rollout.Controller, *distributor.Distributor, *nats.Conn, error) {
	// Read-only opens: an operator steers rollouts without the right to
	// create or update any stream (docs/SECURITY.md).
	nc, d, err := dialStreams(ctx, env, url, name, conn)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := openRollout(ctx, nc, d, env)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return c, d, nc, nil
}

func rolloutRun(ctx context.Context, env *Env, opts *RolloutOptions) error {
	c, d, nc, err := openControllerAndDistributor(ctx, env, opts.NATS, "cuecast rollout "+opts.Verb, &opts.Conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	switch opts.Verb {
	case "status":
		return rolloutStatus(ctx, env, c, opts)
	case "watch":
		return rolloutWatch(ctx, env, c, d, distributor.NewDirectStream(nc, tailer.StateStream), opts)
	case "analyze":
		return rolloutAnalyze(ctx, env, c, opts)
	case "audit":
		entries, err := c.Audit(ctx, opts.Config)
		if err != nil {
			return err
		}
		// No entries for a config that was never published is a config
		// misnamed (exit 2, as status and log have it), not a quiet trail.
		if opts.Config != "" && len(entries) == 0 {
			if _, err := d.Latest(ctx, opts.Config); errors.Is(err, cuecast.ErrNotFound) {
				return usageErrorf("name a config as `cuecast status` lists it", "rollout audit: %s has no versions: %w", opts.Config, err)
			} else if err != nil {
				return fmt.Errorf("rollout audit: read the latest version of %s: %w", opts.Config, err)
			}
		}
		if opts.Output == "json" {
			if entries == nil {
				entries = []rollout.AuditEntry{}
			}
			return writeJSON(env.IO.Out, entries)
		}
		tw := newTable(env.IO.Out)
		for _, e := range entries {
			action := e.Action
			if e.Emergency {
				action += " (emergency)"
			}
			tw.row(rollout.FormatTime(e.At), termtext.Line(e.Actor), action, termtext.Line(fmt.Sprintf("%s@%d", e.Config, e.Version)), termtext.Line(e.Reason))
		}
		tw.flush()
		return nil
	}
	verb, err := rollout.ParseVerb(opts.Verb)
	if err != nil {
		return err
	}
	rec, err := c.Act(ctx, rollout.Action{Verb: verb, Config: opts.Config, Actor: opts.Actor, Reason: opts.Reason, Emergency: opts.Emergency})
	if err != nil {
		return actionError(err)
	}
	if opts.Output == "json" {
		return writeJSON(env.IO.Out, rec)
	}
	fmt.Fprintf(env.IO.Out, "%s: %s by %s, recorded in the audit stream\n", termtext.Line(string(opts.Config)), opts.Verb, termtext.Line(opts.Actor))
	printRecord(env.IO.Out, rollout.Progress{Record: rec}, time.Now())
	return nil
}

// actionError explains an operator action that does not apply.
func actionError(err error) error {
	switch {
	case errors.Is(err, rollout.ErrNoReason):
		return &UsageError{Err: err, Hint: "add --reason \"why\""}
	case errors.Is(err, rollout.ErrNoRollout):
		return &UsageError{Err: err, Hint: "`cuecast status` lists the configs published; `cuecast rollout status` the rollouts"}
	case errors.Is(err, rollout.ErrState), errors.Is(err, rollout.ErrNotPinned):
		return &UsageError{Err: err, Hint: "see `cuecast rollout status CONFIG`"}
	}
	return err
}

func rolloutStatus(ctx context.Context, env *Env, c *rollout.Controller, opts *RolloutOptions) error {
	var recs []rollout.Record
	if opts.Config != "" {
		rec, err := c.Record(ctx, opts.Config)
		if err != nil {
			return actionError(err)
		}
		recs = []rollout.Record{rec}
	} else {
		var err error
		if recs, err = c.Records(ctx); err != nil {
			return err
		}
	}
	var all []rollout.Progress
	halted := false
	for _, rec := range recs {
		// From the record listed: reading each again was one request
		// more per rollout (TestRolloutStatusReadsEveryRecordOnce).
		p, err := c.ProgressOf(ctx, rec)
		if err != nil {
			return actionError(err)
		}
		if r := p.Record.Current; r != nil && r.State == rollout.StateHalted {
			halted = true
		}
		all = append(all, p)
	}
	if opts.Output == "json" {
		if all == nil {
			all = []rollout.Progress{}
		}
		if err := writeJSON(env.IO.Out, all); err != nil {
			return err
		}
	} else {
		if len(all) == 0 {
			fmt.Fprintln(env.IO.Out, "no rollouts yet")
		}
		for i, p := range all {
			if i > 0 {
				fmt.Fprintln(env.IO.Out)
			}
			printRecord(env.IO.Out, p, time.Now())
		}
	}
	// Any halted rollout, named or not: the runbook's `cuecast rollout
	// status` is how a script notices one (docs/OPERATIONS.md).
	if halted {
		return &silentError{code: ExitHalted}
	}
	return nil
}

// printRecord writes one config's rollout for people.
func printRecord(w io.Writer, p rollout.Progress, now time.Time) {
	rec := p.Record
	r := rec.Current
	if r == nil {
		fmt.Fprintf(w, "%s  no rollout\n", termtext.Line(string(rec.Config)))
	} else {
		head := fmt.Sprintf("%s  v%d %s", termtext.Line(string(rec.Config)), r.Version, strings.ToUpper(string(r.State)))
		if r.Consistency == cuecast.Strict {
			head += "  (strict: two-phase cutover)"
		}
		if r.Emergency {
			head += "  EMERGENCY"
		}
		fmt.Fprintln(w, head)
		fallback := fmt.Sprintf("falls back to v%d", r.From)
		if r.From == 0 {
			fallback = "nothing to fall back to: no version has reached the whole fleet"
		}
		fmt.Fprintf(w, "  commit %s by %s; %s\n", cuecast.ShortCommit(r.Commit), termtext.Line(r.Author), fallback)
		for _, s := range p.Stages {
			mark := map[string]string{"done": "done", "current": "now ", "pending": "    "}[s.Status]
			line := fmt.Sprintf("  %s %-12s %4s  %s %d/%d on v%d", mark, termtext.Line(s.Name), termtext.Line(s.Scope), bar(s.OnTarget, s.Instances, 20), s.OnTarget, s.Instances, r.Version)
			if s.Hold > 0 {
				line += "  hold " + s.Hold.String()
			}
			if s.Status == "current" && r.State == rollout.StateHolding && now.Before(r.HoldUntil) {
				line += fmt.Sprintf(" (%s left)", r.HoldUntil.Sub(now).Round(time.Second))
			}
			fmt.Fprintln(w, strings.TrimRight(line, " "))
		}
		if m := p.Cohort; r.State.Active() || r.State == rollout.StateHalted {
			fmt.Fprintf(w, "  cohort: %d instances, %d on v%d, %d unhealthy, %d failing; outside: %d instances, %d unhealthy\n",
				m.Instances, m.OnTarget, r.Version, m.Unhealthy, m.Failing, m.Outside, m.OutsideUnhealthy)
		}
		if p.WithoutDetail != "" {
			fmt.Fprintf(w, "  NOT EXACT: counted without the regions' detail (%s); an instance a stage names or selects by label is counted with its bucket's group\n", termtext.Line(p.WithoutDetail))
		}
		printAnalysis(w, r)
		if r.Note != "" {
			fmt.Fprintf(w, "  %s\n", termtext.Line(rollout.FormatTimes(r.Note)))
		}
		if r.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", termtext.Line(r.Reason))
		}
		if r.State == rollout.StateHalted {
			fmt.Fprintf(w, "  next: cuecast rollout resume|advance %s --reason TEXT, or cuecast rollback %s (--previous | --to VERSION) --reason TEXT\n", rec.Config, rec.Config)
		}
	}
	if pin := rec.Pin; pin != nil {
		fmt.Fprintf(w, "  !!! PINNED to v%d by %s at %s: %q\n", pin.Version, termtext.Line(pin.Actor), rollout.FormatTime(pin.At), pin.Reason)
		if rec.Pending > 0 {
			fmt.Fprintf(w, "  !!! v%d is compiled but held back by the pin\n", rec.Pending)
		}
		fmt.Fprintf(w, "  !!! lifted by a commit restoring v%d's content, or: cuecast rollout unpin %s --reason TEXT\n", pin.Version, rec.Config)
	}
}

// bar draws done/total as a fixed-width progress bar.
func bar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = done * width / total
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// rolloutWatch redraws the rollout in place on a terminal, or prints a line
// whenever it changes when piped, until it is no longer active.
func rolloutWatch(ctx context.Context, env *Env, c *rollout.Controller, d *distributor.Distributor, tailerState tailer.LastMsgReader, opts *RolloutOptions) error {
	tty := env.IO.IsStdoutTTY()
	lines := 0
	last := ""
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	waitingSaid := false
	// The version waited for, once known: it does not change, so the
	// config's versions and the tailer's cursor are read only until then.
	var want uint64
	for {
		if want == 0 {
			var err error
			if want, err = watchTarget(ctx, d, tailerState, opts); err != nil {
				return err
			}
		}
		p, err := c.Progress(ctx, opts.Config)
		if err != nil && (want == 0 || !errors.Is(err, rollout.ErrNoRollout)) {
			return actionError(err)
		}
		r := p.Record.Current
		// Right after a commit the record still shows the previous
		// rollout, complete: following it would end the watch at once
		// with success. With --version or --commit, wait for the new one.
		if want > 0 && (r == nil || r.Version < want) && p.Record.Stable < want {
			if !waitingSaid {
				fmt.Fprintf(env.IO.ErrOut, "waiting for the rollout of %s v%d to begin…\n", opts.Config, want)
				waitingSaid = true
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		switch {
		case opts.Output == "json":
			if err := jsonLine(env.IO.Out).Encode(p); err != nil {
				return err
			}
		case tty:
			var b strings.Builder
			printRecord(&b, p, time.Now())
			if lines > 0 {
				fmt.Fprintf(env.IO.Out, "\x1b[%dA\x1b[J", lines)
			}
			fmt.Fprint(env.IO.Out, b.String())
			lines = strings.Count(b.String(), "\n")
		default:
			line := summary(p)
			if line != last {
				fmt.Fprintf(env.IO.Out, "%s %s\n", time.Now().Format(time.TimeOnly), line)
				last = line
			}
		}
		if r == nil || !r.State.Active() {
			if r != nil && r.State == rollout.StateHalted {
				return &silentError{code: ExitHalted}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// watchTarget is the version a watch waits for: --version, or the version
// made from --commit once it is published (0 until then), or 0 when neither
// is given. A commit the tailer has taken (its cursor) without making a
// version of the config is wrong usage: nothing will ever come to wait for.
func watchTarget(ctx context.Context, d *distributor.Distributor, tailerState tailer.LastMsgReader, opts *RolloutOptions) (uint64, error) {
	if opts.Version > 0 || opts.Commit == "" {
		if opts.Version == 0 {
			return 0, nil
		}
		// A config never published has no rollout to begin (status --wait
		// has it so too); a version not yet published is waited for.
		if _, err := d.Latest(ctx, opts.Config); errors.Is(err, cuecast.ErrNotFound) {
			return 0, usageErrorf("name a config as `cuecast status` lists it", "watch: %s has no versions: %w", opts.Config, err)
		} else if err != nil {
			return 0, fmt.Errorf("watch: read the latest version of %s: %w", opts.Config, err)
		}
		return opts.Version, nil
	}
	// The cursor before the versions: the tailer moves it after it has
	// published the commit's versions, so they are all read below.
	st, err := tailer.LoadState(ctx, tailerState, "default")
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, fmt.Errorf("watch: %w", err)
	}
	taken := st.Cursor != "" && strings.HasPrefix(st.Cursor, opts.Commit)
	vs, err := d.Versions(ctx, opts.Config)
	if err != nil && !errors.Is(err, cuecast.ErrNotFound) {
		return 0, fmt.Errorf("watch: read versions of %s: %w", opts.Config, err)
	}
	for _, v := range vs {
		if strings.HasPrefix(v.Commit, opts.Commit) {
			return v.Version, nil
		}
	}
	if taken {
		why := "it leaves the config's output as it was"
		for _, r := range st.Rejected {
			if r.Commit == st.Cursor {
				why = "the tailer rejected it (cuecast tailer status says why)"
			}
		}
		return 0, usageErrorf("watch the config a commit changes, or leave out --commit to follow the current rollout",
			"commit %s made no version of %s: %s", cuecast.ShortCommit(st.Cursor), opts.Config, why)
	}
	// Not published yet: wait for any rollout newer than the newest now.
	var newest uint64
	for _, v := range vs {
		newest = max(newest, v.Version)
	}
	return newest + 1, nil
}

// summary is one plain line for a piped watch.
func summary(p rollout.Progress) string {
	r := p.Record.Current
	if r == nil {
		return fmt.Sprintf("%s no rollout", p.Record.Config)
	}
	s := fmt.Sprintf("%s v%d %s stage %d/%d %s: %d/%d live instances on v%d",
		p.Record.Config, r.Version, r.State, r.Stage+1, len(r.Policy.Stages), r.StageName(), p.OnTarget, p.Live, r.Version)
	if r.Note != "" {
		s += "; " + rollout.FormatTimes(r.Note)
	}
	if r.Reason != "" {
		s += "; reason: " + r.Reason
	}
	return s
}

// commitPrefix is a Git commit hash or a prefix of one, as log prints them.
var commitPrefix = regexp.MustCompile(`^[0-9a-f]{4,40}$`)
