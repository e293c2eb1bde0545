package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// variantFlagUsage is the --variant flag of the operator's commands.
const variantFlagUsage = "a variant of CONFIG, like --variant env=prod,region=eu (or name the variant path, CONFIG/env=prod/region=eu)"

func registerVariant(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "variant", "", variantFlagUsage)
}

// configArg is the path an operator's command acts on when named as arg
// and --variant: arg checked as a config path, then withVariant's.
func configArg(arg, variant string) (cuecast.ConfigPath, error) {
	cfg := cuecast.ConfigPath(arg)
	if err := cfg.Validate(); err != nil {
		return "", &UsageError{Err: err, Hint: "name configs by their directory, like payments/checkout"}
	}
	return withVariant(cfg, variant)
}

// withVariant is the path an operator's command acts on: cfg, or its
// variant of the dimension values variant ("env=prod,region=eu").
func withVariant(cfg cuecast.ConfigPath, variant string) (cuecast.ConfigPath, error) {
	if variant == "" {
		return cfg, nil
	}
	dims, err := cuecast.ParseVariant(variant)
	if err != nil {
		return "", &UsageError{Err: fmt.Errorf("--variant: %w", err), Hint: "write --variant env=prod,region=eu"}
	}
	if cfg.IsVariant() {
		return "", usageErrorf("name the config and --variant, or the variant path alone", "%s is already a variant and --variant %s was given", cfg, variant)
	}
	return cuecast.VariantPath(cfg, dims), nil
}

// variantsOf is cfg's variants when its newest version is a variant index
// (sorted, as the index lists them), else nil.
func variantsOf(ctx context.Context, d *distributor.Distributor, cfg cuecast.ConfigPath) ([]cuecast.ConfigPath, error) {
	if cfg.IsVariant() {
		return nil, nil
	}
	latest, err := d.Latest(ctx, cfg)
	if errors.Is(err, cuecast.ErrNotFound) || err == nil && latest.Deleted {
		// Not a config with variants; the caller reports a missing one.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cfg, err)
	}
	_, content, err := d.Version(ctx, cfg, latest.Version)
	if err != nil {
		return nil, fmt.Errorf("read %s@%d: %w", cfg, latest.Version, err)
	}
	ix, ok := cuecast.ParseVariantIndex(content)
	if !ok {
		return nil, nil
	}
	return ix.Variants, nil
}

// statusPaths are the paths status shows for its CONFIG argument a: a
// config with variants as its variants, one row each (its own path holds
// only their index); any other as itself.
func statusPaths(ctx context.Context, d *distributor.Distributor, a string) ([]cuecast.ConfigPath, error) {
	vs, err := variantsOf(ctx, d, cuecast.ConfigPath(a))
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if len(vs) == 0 {
		return []cuecast.ConfigPath{cuecast.ConfigPath(a)}, nil
	}
	return vs, nil
}
