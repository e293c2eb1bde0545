package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/termtext"
	"github.com/cuecast/cuecast/mutator"
)

// LogOptions are the flags of `cuecast log`.
type LogOptions struct {
	Config  string
	Variant string
	Limit   int
	NATS    string
	Output  string
	Conn    ConnFlags
}

func newLogCmd(env *Env, runF func(*cobra.Command, *LogOptions) error) *cobra.Command {
	opts := &LogOptions{}
	cmd := &cobra.Command{
		Use:   "log CONFIG",
		Short: "List a config's versions, newest first, with the commits that made them",
		Long: `Log lists the retained versions of a config, newest first: version number, the
commit that made it, its author and date, the first line of its message and the
checksum of the compiled JSON. Git is the audit trail; this is its view per config.
A change made with cuecast set or cuecast flags set (or the HTTP API) says so after
its subject, "(by cuecast set)"; its author is who asked for it.
A tombstone (the config deleted on main) is marked as such.

Commits that did not compile publish nothing; the first commit after them that
compiles publishes their changes with its own. Its version lists them below it,
marked (carried), with their authors and subjects: they are part of that version,
and undoing it in Git means reverting them too (or cuecast rollback).`,
		Example: `  cuecast log payments/checkout
  cuecast log payments/checkout --limit 5 --output json
  cuecast log search/suggest --variant env=prod,region=eu`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cfg, err := configArg(args[0], opts.Variant)
			if err != nil {
				return err
			}
			opts.Config = string(cfg)
			if opts.Limit < 1 {
				return usageErrorf("pass a positive --limit", "--limit %d", opts.Limit)
			}
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return logRun(c, env, opts)
		},
	}
	registerVariant(cmd.Flags(), &opts.Variant)
	cmd.Flags().IntVarP(&opts.Limit, "limit", "n", 20, "show at most this many versions")
	cmd.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "NATS server URL")
	registerOutput(cmd.Flags(), &opts.Output)
	opts.Conn.Register(cmd.Flags())
	return cmd
}

// hintPublished is the hint of every command told of a config never
// published: a typo, most often.
const hintPublished = "see `cuecast status` for the configs published"

func logRun(c *cobra.Command, env *Env, opts *LogOptions) error {
	ctx := c.Context()
	nc, d, err := dialStreams(ctx, env, opts.NATS, "cuecast log", &opts.Conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	vs, err := d.Versions(ctx, cuecast.ConfigPath(opts.Config))
	if err != nil && !errors.Is(err, cuecast.ErrNotFound) {
		return fmt.Errorf("log %s: %w", opts.Config, err)
	}
	if len(vs) == 0 {
		return &UsageError{Err: fmt.Errorf("%s has no versions: %w", opts.Config, cuecast.ErrNotFound), Hint: hintPublished}
	}
	if len(vs) > opts.Limit {
		vs = vs[:opts.Limit]
	}
	if opts.Output == "json" {
		return writeJSON(env.IO.Out, vs)
	}
	tw := newTable(env.IO.Out)
	for _, v := range vs {
		sum := "sha256:" + v.Checksum[:min(12, len(v.Checksum))]
		if v.Deleted {
			sum = "(deleted)"
		}
		subject := cuecast.CommitSubject(v.Message)
		if tool, _ := mutator.Trailers(v.Message); tool != "" {
			subject += " (by " + tool + ")" // a change made through the mutator, not by hand
		}
		// The author and subject are whoever committed chose: a terminal
		// must not obey the controls in them.
		tw.row(fmt.Sprintf("v%d", v.Version), cuecast.ShortCommit(v.Commit), v.CommittedAt.UTC().Format("2006-01-02 15:04"), termtext.Line(v.Author), sum, termtext.Line(subject))
		for _, cc := range v.Carries {
			tw.row("", cuecast.ShortCommit(cc.Commit), "", termtext.Line(cc.Author), "(carried)", termtext.Line(cc.Message))
		}
	}
	tw.flush()
	return nil
}
