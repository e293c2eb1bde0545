package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/tailer"
)

// StatusOptions are the flags of `cuecast status`.
type StatusOptions struct {
	Configs []string
	// Variant narrows each CONFIG to its variant (--variant env=prod).
	Variant string
	NATS    string
	Output  string
	// Wait is CONFIG@VERSION: wait until every live instance reports it
	// (status_rollout.go); Timeout bounds the wait.
	Wait    string
	Timeout time.Duration
	// Instances lists each instance of the CONFIGs, fetching those of
	// summarised regions from the regions (status_instances.go).
	Instances bool
	// Conn: credentials and TLS (connflags.go).
	Conn ConnFlags
}

func newStatusCmd(env *Env, runF func(*cobra.Command, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{}
	cmd := &cobra.Command{
		Use:   "status [CONFIG...]",
		Short: "Show each config's current version and how much of the fleet runs it",
		Long: `Status reads the versions published and the live reports of instances, and shows
for each config the version its fleet is meant to end on (the latest, or a pin's or a
halted rollout's, with the latest beside it) and how many live instances report it.
During a staged rollout it adds how many are where the rollout means them now.
It counts apart the instances failing to apply a version (their last error) and
those that refused a pointer as forged or unverifiable ("refused": something is
sending them what serve did not sign; they apply nothing from it and stay
healthy); with one CONFIG named it lists both by instance.
Stragglers are counted against that same rule (docs/ROLLOUT.md, "What status counts").

An instance is live while its reports keep arriving (they expire after a few missed
heartbeats).

--wait CONFIG@VERSION waits until every live instance reports VERSION and the
rollout controller is done with the current stage of VERSION's rollout (it may
still wait for an instance whose report the wait has not seen): exit 0, or exit
4 listing the stragglers at --timeout or when the rollout halts; exit 2 for a
config never published (docs/ROLLOUT.md, "Waiting for a version"). On a
terminal it prints its progress to stderr whenever it changes (and every 10s);
when stderr is not a terminal it prints only the outcome; --output json prints
the outcome as one JSON document on stdout.

A config with variants (docs/VARIANTS.md) is shown as one row per variant, its
path ending in the variant's dimension values (payments/checkout/env=prod/region=eu);
--variant env=prod,region=eu narrows each CONFIG to that variant.

In a tree whose regions summarise (docs/SCALING.md) the hub holds one summary per
region, not each instance's report: the rows above count them all the same.
--instances lists each instance of the CONFIGs named, one row each (version, staged
version, health, last error): the reports held here, and those of each summarised
region, asked of the region at once. A region that does not answer within --timeout
(default 5s for --instances) is named on stderr, with exit 1.`,
		Example: `  cuecast status
  cuecast status payments/checkout --output json
  cuecast status search/suggest --variant env=prod,region=eu
  cuecast status payments/checkout --instances --output json`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Configs = args
			if opts.Wait != "" {
				if _, _, err := parseWait(opts.Wait); err != nil {
					return err
				}
			}
			if opts.Instances && (len(args) == 0 || opts.Wait != "") {
				return usageErrorf("cuecast status payments/checkout --instances", "--instances lists the instances of the CONFIGs named (and not with --wait)")
			}
			if opts.Variant != "" && len(args) == 0 {
				return usageErrorf("cuecast status payments/checkout --variant "+opts.Variant, "--variant needs a CONFIG")
			}
			for i, a := range args {
				cfg, err := configArg(a, opts.Variant)
				if err != nil {
					return err
				}
				args[i] = string(cfg)
			}
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if err := positive("timeout", opts.Timeout, "5m"); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return statusRun(c, env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "NATS server URL")
	registerOutput(cmd.Flags(), &opts.Output)
	registerVariant(cmd.Flags(), &opts.Variant)
	cmd.Flags().StringVar(&opts.Wait, "wait", "", "CONFIG@VERSION: wait until every live instance reports it and its rollout's stage is done; exit 4 listing stragglers at --timeout")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long --wait waits (--instances: how long the regions have to answer, 5s unless given)")
	cmd.Flags().BoolVar(&opts.Instances, "instances", false, "list each instance of the CONFIGs named, fetching those of summarised regions from the regions")
	opts.Conn.Register(cmd.Flags())
	return cmd
}

func statusRun(c *cobra.Command, env *Env, opts *StatusOptions) error {
	ctx := c.Context()
	nc, d, err := dialStreams(ctx, env, opts.NATS, "cuecast status", &opts.Conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	if opts.Wait != "" {
		return statusWait(ctx, env, nc, d, opts)
	}
	if opts.Instances {
		return statusInstances(c, env, d, opts)
	}
	var cfgs []cuecast.ConfigPath
	for _, a := range opts.Configs {
		vs, err := statusPaths(ctx, d, a)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, vs...)
	}
	// Each instance is counted against the version the rollout controller
	// means it to run now (rollout.Record.Intent), as the dashboard and the
	// metrics count it.
	ctl, err := readRollout(ctx, nc, d, env)
	if err != nil {
		return err
	}
	recs, err := ctl.Records(ctx)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	// The counts and the lists below them (failing to apply, drift) come
	// from one read of the fleet, so the lists add up to the counts.
	st, reports, err := d.StatusAndReports(ctx, rollout.IntentsOf(recs), cfgs...)
	if errors.Is(err, cuecast.ErrNotFound) {
		// As log does: naming a config that was never published is wrong
		// usage (a typo, most often), not a failure of cuecast.
		return &UsageError{Err: fmt.Errorf("status: %w", err), Hint: hintPublished}
	}
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if opts.Output == "json" {
		if st == nil {
			st = []distributor.ConfigStatus{}
		}
		return writeJSON(env.IO.Out, st)
	}
	if len(st) == 0 {
		fmt.Fprintln(env.IO.Out, "no configs published yet")
		return nil
	}
	// A base path listed with its variants holds their index, which no
	// instance applies: its row says so rather than "0/0 instances".
	variants := distributor.VariantCounts(st)
	tw := newTable(env.IO.Out)
	for _, s := range st {
		count := countColumn(s)
		if n := variants[s.Config]; n > 0 && !s.Config.IsVariant() && !s.Latest.Deleted {
			count = fmt.Sprintf("variant index: %d variants (their rows follow)", n)
		}
		tw.row(string(s.Config), targetColumn(s), count, cuecast.ShortCommit(s.Latest.Commit))
	}
	tw.flush()
	// A halted tailer is the loudest news: nothing new reaches the fleet.
	if ts, err := tailer.LoadState(ctx, distributor.NewDirectStream(nc, tailer.StateStream), "default"); err == nil && (ts.Rewrite != nil || len(ts.Rejected) > 0) {
		fmt.Fprintln(env.IO.Out)
		printTailerState(env.IO.Out, ts)
	}
	return statusRollout(ctx, env, d, ctl, cfgs, st, recs, reports)
}

// targetColumn is the version the config's fleet is meant to end on, and
// the latest when that is another (a pin, a halt).
func targetColumn(s distributor.ConfigStatus) string {
	ver := fmt.Sprintf("v%d", s.Target)
	if s.Target != s.Latest.Version {
		ver += fmt.Sprintf(" (latest v%d)", s.Latest.Version)
	}
	if s.Latest.Deleted {
		ver += " (deleted)"
	}
	return ver
}

// countColumn counts the instances on the target, and where a staged
// rollout means some to be elsewhere for now, those where it means them.
func countColumn(s distributor.ConfigStatus) string {
	c := fmt.Sprintf("%d/%d instances", s.OnTarget, s.Instances)
	if s.OnIntended != s.OnTarget {
		c += fmt.Sprintf(", %d/%d where the rollout means them now", s.OnIntended, s.Instances)
	}
	// Two different troubles, never one count: an apply that failed, and
	// a pointer refused as forged or unverifiable (nothing applied).
	if s.Failing > 0 {
		c += fmt.Sprintf(", %d failing to apply", s.Failing)
	}
	if n := len(s.Refused); n > 0 {
		c += fmt.Sprintf(", %d refused a pointer", n)
	}
	return c
}
