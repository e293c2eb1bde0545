package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/termtext"
)

// ExplainOptions are the arguments and flags of `cuecast explain`.
type ExplainOptions struct {
	Repo    string
	Output  string
	Config  string
	Path    string
	Variant string
}

func newExplainCmd(env *Env, runF func(*cobra.Command, *ExplainOptions) error) *cobra.Command {
	opts := &ExplainOptions{}
	cmd := &cobra.Command{
		Use:   "explain CONFIG [PATH]",
		Short: "Show where each value of a compiled config comes from",
		Long: `Explain compiles one config from the repo on disk, offline, exactly as compile does,
and prints each value of its output (or of the subtree at PATH, a CUE path such
as server.port or hosts[0]) on one line:

  path = value  origin  file:line:col, file:line:col (role), ...

The origin is one of
  literal    written as a concrete value in a file
  default    no file sets it: the default (*value) of a disjunction, often a schema's
  reference  read from another field; "via" names the fields followed and, in
             parentheses, the origin where the chain ends
  tag        injected by the variant's dimension into a field marked @tag(<dimension>)
  computed   the result of an expression: arithmetic, interpolation, a call, a comprehension

Every position CUE has for the value is listed, the deciding ones first; the
others carry their role: (reference) a reference followed to the value or to
a struct or list enclosing it, (operand) an input of a
computed value, (default) a default the value overrode, (constraint) a
conjunct that only constrains it, such as the namespace schema's type.

A config that uses dimensions is explained per variant: name the dimension
values with --variant, or append them to CONFIG as its variant path does
(payments/checkout/env=prod/region=eu). Every variant compile publishes can be
explained, with the tags compile loads it with; an @tag that is no dimension
of the namespace, or one in an imported package, injects nothing. See
docs/VARIANTS.md.

Exit status: 0 explained, 2 unknown config, path or variant (or wrong usage),
3 the config does not compile (the errors are printed), 1 cuecast failed.`,
		Example: `  cuecast explain payments/checkout
  cuecast explain payments/checkout service.replicas
  cuecast explain --variant env=prod,region=eu search/suggest
  cuecast explain --repo configs-example --output json payments/checkout | jq '.values[] | select(.origin == "default")'`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("see 'cuecast explain --help'", "explain takes a config and an optional path, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Config = args[0]
			if len(args) == 2 {
				opts.Path = args[1]
			}
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return explainRun(c, env, opts)
		},
	}
	registerCUERepo(cmd.Flags(), &opts.Repo)
	cmd.Flags().StringVar(&opts.Variant, "variant", "", "the variant's dimension values, as env=prod,region=eu")
	registerOutput(cmd.Flags(), &opts.Output)
	return cmd
}

// explainFailure is --output json for a config that does not compile.
type explainFailure struct {
	Config cuecast.ConfigPath `json:"config"`
	Errors []compiler.Error   `json:"errors"`
}

func explainRun(c *cobra.Command, env *Env, opts *ExplainOptions) error {
	if err := needCUERepo(opts.Repo, ""); err != nil {
		return err
	}
	cfg, variant, err := explainTarget(opts.Config, opts.Variant)
	if err != nil {
		return err
	}
	ex, err := compiler.Explain(c.Context(), opts.Repo, cfg, compiler.ExplainOptions{
		Variant: variant,
		Path:    opts.Path,
		Logger:  env.Logger(),
	})
	var ce *compiler.CompileError
	switch {
	case errors.As(err, &ce):
		if opts.Output == "json" {
			if err := writeJSON(env.IO.Out, explainFailure{Config: cfg, Errors: ce.Errors}); err != nil {
				return err
			}
		}
		printCompileErrors(env.IO.ErrOut, ce.Errors)
		fmt.Fprintf(env.IO.ErrOut, "%s does not compile: %d error(s)\n", cfg, len(ce.Errors))
		return errInvalid
	case errors.Is(err, compiler.ErrUnknownConfig):
		return &UsageError{Err: err, Hint: "name a config by its directory, like payments/checkout; 'cuecast compile' lists them"}
	case errors.Is(err, compiler.ErrUnknownPath):
		return &UsageError{Err: err, Hint: "name a field of the compiled output, like server.port or hosts[0]; without PATH explain shows them all"}
	case errors.Is(err, compiler.ErrUnknownVariant):
		return &UsageError{Err: err, Hint: "name one of the variants compile publishes for the config, as --variant env=prod,region=eu; a config without variants takes no --variant"}
	case err != nil:
		return fmt.Errorf("explain %s: %w", cfg, err)
	}
	if opts.Output == "json" {
		if ex.Values == nil {
			ex.Values = []compiler.ExplainedValue{}
		}
		return writeJSON(env.IO.Out, ex)
	}
	// Positions name files a commit chose: escaped as compile's are.
	for _, v := range ex.Values {
		fmt.Fprintln(env.IO.Out, termtext.Line(v.String()))
	}
	return nil
}

// explainTarget splits CONFIG into the config's base path and the
// dimension values of its trailing dim=value segments (a variant path),
// merged with --variant.
func explainTarget(arg, flag string) (cuecast.ConfigPath, map[string]string, error) {
	variant, err := cuecast.ParseVariant(flag)
	if err != nil {
		return "", nil, &UsageError{Err: fmt.Errorf("--variant: %w", err), Hint: "write it as env=prod,region=eu"}
	}
	cfg := cuecast.ConfigPath(filepath.ToSlash(filepath.Clean(arg)))
	if err := cfg.Validate(); err != nil {
		return "", nil, &UsageError{Err: err, Hint: "name configs by their directory, like payments/checkout, or a variant by its path, like payments/checkout/env=prod"}
	}
	for _, dv := range cfg.Variant() {
		if old, ok := variant[dv.Dim]; ok && old != dv.Value {
			return "", nil, usageErrorf("give each dimension one value", "dimension %s is %s in the config path but %s in --variant", dv.Dim, dv.Value, old)
		}
		variant[dv.Dim] = dv.Value
	}
	if len(variant) == 0 {
		variant = nil
	}
	return cfg.Base(), variant, nil
}
