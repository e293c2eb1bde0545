package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/flags"
)

// FlagsEvalOptions are the flags of `cuecast flags eval`.
type FlagsEvalOptions struct {
	Config    string
	Flag      string
	Ctx       []string
	Repo      string
	Published bool
	Version   uint64
	NATS      string
	Output    string
	Conn      ConnFlags
}

func newFlagsCmd(env *Env, runF func(*cobra.Command, *FlagsEvalOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flags",
		Short: "Work with feature flag sets (docs/FLAGS.md)",
		Long: `A flag set is a config that compiles to schemas/flags.cue's #FlagSet; services
evaluate it in-process with the flags package or its OpenFeature provider.`,
	}
	cmd.AddCommand(newFlagsEvalCmd(env, runF), newFlagsSetCmd(env))
	return cmd
}

func newFlagsEvalCmd(env *Env, runF func(*cobra.Command, *FlagsEvalOptions) error) *cobra.Command {
	opts := &FlagsEvalOptions{}
	cmd := &cobra.Command{
		Use:   "eval CONFIG FLAG",
		Short: "Evaluate one flag for a context and say why it has that value",
		Long: `Eval evaluates FLAG of the flag set CONFIG for the context given with --ctx, exactly
as a service's evaluator does, and prints the value, the variant, the reason
(STATIC, DEFAULT, TARGETING_MATCH, SPLIT, DISABLED, PREREQUISITE_FAILED, ERROR), the
rule that matched and the bucket position a rollout used.

The flag set is compiled from --repo (the working tree, as cuecast compile does), or
with --published read from NATS: the newest published version, or --version N.

--ctx takes key=value, repeatable. A value that reads as a JSON number, true or
false is that; anything else is a string (quote it to force a string:
--ctx 'zip="02139"'). Rollouts bucket by targetingKey unless the flag names
another attribute.

Exit status: 0 evaluated (also when the reason is ERROR: it is printed), 1 cuecast
failed, 2 wrong usage or no such config, flag or version, or a config that is not a flag
set, 3 the flag set does not compile.`,
		Example: `  cuecast flags eval growth/flags new-checkout --ctx targetingKey=user-1 --ctx email=ann@example.com
  cuecast flags eval growth/flags new-checkout --ctx targetingKey=user-1 --published
  cuecast flags eval growth/flags new-checkout --ctx targetingKey=user-1 --output json`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Config, opts.Flag = args[0], args[1]
			if err := cuecast.ConfigPath(opts.Config).Validate(); err != nil {
				return &UsageError{Err: err, Hint: "name configs by their directory, like growth/flags"}
			}
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if opts.Version > 0 && !opts.Published {
				return usageErrorf("add --published to read a published version", "--version needs --published")
			}
			// Without --published the set is compiled from --repo: a
			// server named would be ignored, and the answer not its.
			if !opts.Published && (c.Flags().Changed("nats") || opts.Conn != (ConnFlags{})) {
				return usageErrorf("add --published to evaluate what the server published", "--nats and the credentials and TLS flags need --published")
			}
			if runF != nil {
				return runF(c, opts)
			}
			return flagsEvalRun(c, env, opts)
		},
	}
	cmd.Flags().StringArrayVar(&opts.Ctx, "ctx", nil, "an attribute of the evaluation context, key=value (repeatable)")
	cmd.Flags().StringVar(&opts.Repo, "repo", ".", "config repository root to compile the flag set from")
	cmd.Flags().BoolVar(&opts.Published, "published", false, "read the flag set from NATS (the newest published version) instead of compiling --repo")
	cmd.Flags().Uint64Var(&opts.Version, "version", 0, "with --published: this version instead of the newest")
	cmd.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "NATS server URL (with --published)")
	registerOutput(cmd.Flags(), &opts.Output)
	opts.Conn.Register(cmd.Flags())
	return cmd
}

// flagEval is `flags eval`'s result, also its --output json.
type flagEval struct {
	Config  cuecast.ConfigPath `json:"config"`
	Flag    string             `json:"flag"`
	Source  string             `json:"source"`
	Version uint64             `json:"version,omitempty"`
	Commit  string             `json:"commit,omitempty"`
	Context flags.Context      `json:"context"`
	Value   any                `json:"value"`
	Variant string             `json:"variant,omitempty"`
	Reason  flags.Reason       `json:"reason"`
	Error   flags.ErrorCode    `json:"error_code,omitempty"`
	Rule    *flagRule          `json:"rule,omitempty"`
	// Position is the bucket position in [0, flags.Whole) a rollout used.
	Position *int   `json:"position,omitempty"`
	BucketBy string `json:"bucket_by,omitempty"`
	Salt     string `json:"salt,omitempty"`
}

type flagRule struct {
	Index int    `json:"index"`
	ID    string `json:"id,omitempty"`
}

func flagsEvalRun(c *cobra.Command, env *Env, opts *FlagsEvalOptions) error {
	ctx := c.Context()
	evalCtx, err := parseFlagContext(opts.Ctx)
	if err != nil {
		return err
	}
	cfg := cuecast.ConfigPath(opts.Config)
	out := flagEval{Config: cfg, Flag: opts.Flag, Context: evalCtx}
	var content []byte
	if opts.Published {
		d, done, err := readStreams(ctx, env, opts.NATS, "cuecast flags eval", &opts.Conn)
		if err != nil {
			return err
		}
		defer done()
		n := opts.Version
		if n == 0 {
			v, err := d.Latest(ctx, cfg)
			if errors.Is(err, cuecast.ErrNotFound) {
				return &UsageError{Err: fmt.Errorf("%s has no published version", cfg), Hint: hintPublished}
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", cfg, err)
			}
			n = v.Version
		}
		v, body, err := d.Version(ctx, cfg, n)
		if errors.Is(err, cuecast.ErrNotFound) {
			return &UsageError{Err: fmt.Errorf("%s@%d is not stored", cfg, n), Hint: fmt.Sprintf("see `cuecast log %s` for the versions kept", cfg)}
		}
		if err != nil {
			return fmt.Errorf("read %s@%d: %w", cfg, n, err)
		}
		if v.Deleted {
			return &UsageError{Err: fmt.Errorf("%s@%d is a tombstone: the config was deleted", cfg, n)}
		}
		out.Source, out.Version, out.Commit, content = "published", v.Version, v.Commit, body
	} else {
		if err := needCUERepo(opts.Repo, ", or pass --published"); err != nil {
			return err
		}
		res, err := compiler.Compile(ctx, opts.Repo, compiler.Options{Configs: []cuecast.ConfigPath{cfg}, Logger: env.Logger()})
		if err != nil {
			return fmt.Errorf("compile %s: %w", opts.Repo, err)
		}
		if err := unknownConfigs([]cuecast.ConfigPath{cfg}, res.Configs); err != nil {
			return err
		}
		if !res.OK() {
			for _, e := range res.Errors {
				fmt.Fprintln(env.IO.ErrOut, e.Error())
			}
			return errInvalid
		}
		o, ok := res.Outputs[cfg]
		if !ok {
			return &UsageError{Err: fmt.Errorf("%s is not a config of %s", cfg, opts.Repo), Hint: "name configs by their directory, like growth/flags"}
		}
		out.Source, content = "compiled from "+opts.Repo, o.JSON
	}

	ev, err := flags.Compile(content)
	if errors.Is(err, flags.ErrUnsupportedSchema) {
		// A wrong name, like a flag that does not exist, not a broken set.
		return &UsageError{Err: fmt.Errorf("%s is not a flag set: %w", cfg, err), Hint: "name a config whose output is a flag set (schema: \"" + flags.Schema + "\", docs/FLAGS.md), like growth/flags"}
	}
	if err != nil {
		fmt.Fprintf(env.IO.ErrOut, "%s: %v\n", cfg, err)
		return errInvalid
	}
	f, ok := ev.Set().Flags[opts.Flag]
	if !ok {
		return &UsageError{Err: fmt.Errorf("%s has no flag %q", cfg, opts.Flag), Hint: "its flags: " + strings.Join(ev.Keys(), ", ")}
	}
	r := ev.Evaluate(opts.Flag, evalCtx)
	out.Value, out.Variant, out.Reason, out.Error = r.Value, r.Variant, r.Reason, r.ErrorCode
	if r.Rule >= 0 {
		out.Rule = &flagRule{Index: r.Rule, ID: r.RuleID}
	}
	if r.Position >= 0 {
		pos := r.Position
		out.Position, out.Salt, out.BucketBy = &pos, f.Salt, flags.DefaultBucketBy
		if ro := servedRollout(f, r.Rule); ro != nil && ro.BucketBy != "" {
			out.BucketBy = ro.BucketBy
		}
	}
	if opts.Output == "json" {
		return writeJSON(env.IO.Out, out)
	}
	printFlagEval(env, out)
	return nil
}

// servedRollout is the rollout of the rule that matched (rule ≥ 0) or of
// the fallthrough.
func servedRollout(f flags.Flag, rule int) *flags.Rollout {
	if rule >= 0 && rule < len(f.Rules) {
		return f.Rules[rule].Rollout
	}
	if f.Fallthrough != nil {
		return f.Fallthrough.Rollout
	}
	return nil
}

func printFlagEval(env *Env, e flagEval) {
	w := env.IO.Out
	if e.Reason == flags.ReasonError {
		fmt.Fprintf(w, "%s: no value (%s): the caller's default applies\n", e.Flag, e.Error)
	} else {
		val, _ := json.Marshal(e.Value)
		fmt.Fprintf(w, "%s = %s (variant %q)\n", e.Flag, val, e.Variant)
	}
	tw := newTable(w)
	tw.row("reason:", string(e.Reason))
	if e.Rule != nil {
		rule := fmt.Sprintf("#%d", e.Rule.Index)
		if e.Rule.ID != "" {
			rule += fmt.Sprintf(" (%s)", e.Rule.ID)
		}
		tw.row("rule:", rule)
	}
	if e.Position != nil {
		tw.row("position:", fmt.Sprintf("%d of %d (salt %q, bucketed by %s=%v)", *e.Position, flags.Whole, e.Salt, e.BucketBy, e.Context[e.BucketBy]))
	}
	if e.Version > 0 {
		tw.row("from:", fmt.Sprintf("%s@%d (commit %s)", e.Config, e.Version, cuecast.ShortCommit(e.Commit)))
	} else {
		tw.row("from:", fmt.Sprintf("%s, %s", e.Config, e.Source))
	}
	tw.flush()
}

// parseFlagContext reads --ctx key=value pairs: JSON numbers and booleans
// are typed, anything else (or a JSON string) is a string.
func parseFlagContext(pairs []string) (flags.Context, error) {
	ctx := flags.Context{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageErrorf("write --ctx key=value", "--ctx %q has no key=value", p)
		}
		ctx[k] = v
		dec := json.NewDecoder(bytes.NewReader([]byte(v)))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil || dec.More() {
			continue
		}
		switch x := x.(type) {
		case json.Number, bool, string:
			ctx[k] = x
		}
	}
	return ctx, nil
}
