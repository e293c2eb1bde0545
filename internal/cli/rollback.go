package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
)

// RollbackOptions are the flags of `cuecast rollback`.
type RollbackOptions struct {
	Config  cuecast.ConfigPath
	Variant string
	To      uint64
	// Previous: go back to the version the current rollout falls back to
	// (its previous version) instead of To.
	Previous bool
	Reason   string
	Actor    string
	NATS     string
	Output   string
	// Conn: credentials and TLS (connflags.go).
	Conn ConnFlags
}

func newRollbackCmd(env *Env, runF func(*cobra.Command, *RollbackOptions) error) *cobra.Command {
	opts := &RollbackOptions{}
	cmd := &cobra.Command{
		Use:   "rollback CONFIG (--to VERSION | --previous) --reason TEXT",
		Short: "Emergency: point every instance at a retained version now, and pin the config there",
		Long: `Rollback points every cohort at VERSION at once, with the rollback flag that lets
instances go backwards, skipping every stage and hold. --previous takes the version the
current rollout falls back to (the one before it), as the dashboard's rollback does. Use it when seconds matter; the
lasting fix is a revert commit (cuecast revert), which flows through the pipeline.

The config is then PINNED: new commits are compiled and published but not rolled out,
until a commit restores content equal to VERSION (the revert), which lifts the pin, or
an operator runs cuecast rollout unpin. cuecast status and rollout status show the pin.

The action is recorded in the audit stream with --as and --reason.`,
		Example: `  cuecast rollback payments/checkout --to 41 --reason "checkout 5xx since v42"
  cuecast rollback payments/checkout --previous --reason "checkout 5xx since the last push"`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("cuecast rollback payments/checkout --to 41 --reason TEXT", "rollback takes one CONFIG, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := configArg(args[0], opts.Variant)
			if err != nil {
				return err
			}
			opts.Config = cfg
			if opts.To > 0 && opts.Previous {
				return usageErrorf("name a version with --to, or take the rollout's previous one with --previous", "--to and --previous exclude each other")
			}
			if opts.To == 0 && !opts.Previous {
				return usageErrorf("list the retained versions with 'cuecast log "+args[0]+"', or use --previous", "rollback needs --to VERSION or --previous")
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return usageErrorf("add --reason \"why\"", "rollback needs --reason: it is recorded in the audit stream")
			}
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if err := resolveActor(env, &opts.Actor); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return rollbackRun(c, env, opts)
		},
	}
	registerVariant(cmd.Flags(), &opts.Variant)
	cmd.Flags().Uint64Var(&opts.To, "to", 0, "the retained version to go back to (this or --previous)")
	cmd.Flags().BoolVar(&opts.Previous, "previous", false, "go back to the version the current rollout falls back to")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (required; recorded in the audit stream)")
	cmd.Flags().StringVar(&opts.Actor, "as", "", "who is acting, for the audit trail (default $CUECAST_ACTOR, your Git identity, $USER, or the OS account@host)")
	cmd.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "NATS server URL")
	registerOutput(cmd.Flags(), &opts.Output)
	opts.Conn.Register(cmd.Flags())
	return cmd
}

func rollbackRun(c *cobra.Command, env *Env, opts *RollbackOptions) error {
	ctx := c.Context()
	ctl, closeFn, err := openController(ctx, env, opts.NATS, "cuecast rollback", &opts.Conn)
	if err != nil {
		return err
	}
	defer closeFn()
	start := time.Now()
	rec, err := ctl.Act(ctx, rollout.Action{Verb: rollout.VerbRollback, Config: opts.Config, Version: opts.To, Actor: opts.Actor, Reason: opts.Reason})
	if errors.Is(err, cuecast.ErrNotFound) || errors.Is(err, cuecast.ErrPurged) || (opts.Previous && errors.Is(err, rollout.ErrState)) {
		return &UsageError{Err: err, Hint: fmt.Sprintf("name a retained version with --to (list them with 'cuecast log %s')", opts.Config)}
	}
	if err != nil {
		return actionError(err)
	}
	if opts.Output == "json" {
		return writeJSON(env.IO.Out, rec)
	}
	to := opts.To
	if rec.Pin != nil {
		to = rec.Pin.Version
	}
	fmt.Fprintf(env.IO.Out, "%s: every cohort points at v%d (rollback) after %s; recorded in the audit stream\n",
		opts.Config, to, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(env.IO.Out, "PINNED: new commits to %s compile but do not roll out until one restores v%d's content\n", opts.Config, to)
	fmt.Fprintf(env.IO.Out, "  (cuecast revert COMMIT makes that commit) or: cuecast rollout unpin %s --reason TEXT\n", opts.Config)
	fmt.Fprintf(env.IO.Out, "  confirm: cuecast status --wait %s@%d --timeout 60s\n", opts.Config, to)
	return nil
}
