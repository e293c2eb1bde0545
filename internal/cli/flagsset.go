package cli

import (
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/mutator"
)

// FlagsSetOptions are the flags of `cuecast flags set`.
type FlagsSetOptions struct {
	SetOptions
	Flag            string
	Rollout         string
	Shares          []string
	Enable, Disable bool
	Rule            string
}

func newFlagsSetCmd(env *Env) *cobra.Command {
	opts := &FlagsSetOptions{}
	cmd := &cobra.Command{
		Use:   "set CONFIG FLAG (--rollout PERCENT | --share VARIANT=PERCENT… | --enable | --disable) --reason TEXT (--commit | --branch B | --github-pr)",
		Short: "Raise a rollout, or switch a flag on or off, as a verified commit or pull request",
		Long: `Flags set is cuecast set for a flag of a flag set (docs/FLAGS.md): --enable and
--disable set its kill switch (on); --rollout PERCENT serves the rollout's variant
other than the off variant to PERCENT of the users (to a thousandth: 12.5) and the off
variant to the rest; --share VARIANT=PERCENT, repeated, gives each variant of a
rollout of any size its share (they sum to 100). The fallthrough's rollout changes,
or with --rule the rollout of that rule (its id, or its index).

The flag is read as the branch head has it, and the change expects those values: if
someone changes the flag in between, it fails with exit 5 instead of overwriting
their change. A raised rollout only adds users (a user's bucket does not depend on
the weights); the report says what share of users changes variant.
` + setLong,
		Example: `  cuecast flags set growth/flags new-checkout --rollout 50 --reason "half the users" --commit
  cuecast flags set growth/flags new-checkout --disable --reason "incident 42" --commit
  cuecast flags set growth/flags new-checkout --share on=10 --share off=90 --reason "…" --github-pr`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Configs, opts.Flag = []string{args[0]}, args[1]
			if err := opts.validate(env); err != nil {
				return err
			}
			change := mutator.FlagChange{Flag: opts.Flag, Enable: opts.Enable, Disable: opts.Disable, Rule: opts.Rule}
			if opts.Rollout != "" {
				p, err := strconv.ParseFloat(strings.TrimSuffix(opts.Rollout, "%"), 64)
				if err != nil {
					return usageErrorf("write --rollout 50 (a percentage)", "--rollout %q: %v", opts.Rollout, err)
				}
				if math.IsNaN(p) || math.IsInf(p, 0) {
					// ParseFloat takes them; the sum check would call them a bad sum.
					return usageErrorf("write --rollout 50 (a percentage)", "--rollout %q: not a percentage (a number from 0 to 100)", opts.Rollout)
				}
				change.Rollout = &p
			}
			for _, s := range opts.Shares {
				v, p, ok := strings.Cut(s, "=")
				f, err := strconv.ParseFloat(strings.TrimSuffix(p, "%"), 64)
				if !ok || err != nil {
					return usageErrorf("write --share on=25 --share off=75", "--share %q is not VARIANT=PERCENT", s)
				}
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return usageErrorf("write --share on=25 --share off=75", "--share %q: not a percentage (a number from 0 to 100)", s)
				}
				if change.Shares == nil {
					change.Shares = map[string]float64{}
				}
				change.Shares[v] = f
			}
			m, id, err := opts.mutator(env)
			if err != nil {
				return err
			}
			req, err := opts.request([]mutator.Assignment{})
			if err != nil {
				return err
			}
			if req.Set, req.Expect, err = m.FlagAssignments(c.Context(), cuecast.ConfigPath(opts.Configs[0]), req.Variant, change); err != nil {
				return opts.print(env, nil, err)
			}
			req.Identity, req.Tool = id, "cuecast flags set"
			req.Subject = change.Subject(cuecast.ConfigPath(opts.Configs[0]))
			res, err := m.Set(c.Context(), req)
			return opts.print(env, res, err)
		},
	}
	opts.register(cmd.Flags(), env)
	cmd.Flags().StringVar(&opts.Rollout, "rollout", "", "percentage of users served the rollout's on variant (0–100)")
	cmd.Flags().StringArrayVar(&opts.Shares, "share", nil, "VARIANT=PERCENT for each variant of the rollout (repeatable)")
	cmd.Flags().BoolVar(&opts.Enable, "enable", false, "switch the flag on")
	cmd.Flags().BoolVar(&opts.Disable, "disable", false, "switch the flag off (serves its off variant)")
	cmd.Flags().StringVar(&opts.Rule, "rule", "", "change this rule's rollout (its id or index) instead of the fallthrough's")
	return cmd
}
