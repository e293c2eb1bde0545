// Package compiler turns a CUE config repo into canonical JSON, one document
// per config, and tells callers which configs a change can affect.
//
// A config repo is a CUE module (cue.mod/module.cue) with a manifest,
// cuecast.cue, at its root. The manifest declares namespaces: top-level
// directories owned by a team. Every directory with .cue files below a
// namespace directory is a config, named by its path ("payments/checkout");
// everything else (schemas/, lib/, …) is a library that produces no output.
//
//	res, err := compiler.Compile(ctx, "configs", compiler.Options{Logger: log})
//	if err != nil {
//		return err // cuecast could not run: I/O, no cue.mod, ctx cancelled
//	}
//	for _, e := range res.Errors {
//		fmt.Println(e) // payments/checkout/checkout.cue:12:9: port: invalid value … [cue]
//	}
//	out := res.Outputs["payments/checkout"] // JSON, Checksum, Files
//
// # What Compile checks
//
//   - The manifest against the schema shipped in package schemas (closed:
//     unknown fields are errors).
//   - Config directory names: each segment [a-z0-9][a-z0-9_-]*.
//   - The namespace schema: each config is unified with the definition its
//     namespace names, whether or not the config imports it. The compiler
//     evaluates a generated wrapper package, "schema.#Def & config", which
//     gives the same value as Value.Unify on the evaluated config (tests
//     hold the two to the same results) in one evaluation instead of two.
//   - Concreteness: every exported value must be concrete.
//   - Lints, each with a stable ID and a one-line fix: secrets (secret/…),
//     size per namespace (size/config-too-large), files that are not UTF-8,
//     too large, or symlinks leaving the repo, dangling or looping
//     (file/…). A field opts out of a secret lint with
//     @cuecast(allow="secret/<id>", reason="…").
//
// # What Compile reads
//
// The repo as `cue export` reads it: files named _* or .* are ignored, a
// file whose build attribute is false (an @if before the package clause;
// no build tags are set, except a variant's dimension values, below) or
// that has @ignore() there is left out,
// packages vendored under cue.mod/pkg (usr, gen) are importable, and a
// package declaring @extern(embed) may @embed files below its directory.
// One walk lists the repo for compile, check and the tailer, with one
// symlink rule (configs-example/README.md states it): a CUE file that is a
// symlink is read when it resolves to a file inside the repo, a symlinked
// directory is never followed, and other symlinks are not looked at.
//
// # Output
//
// Canonical JSON: object keys sorted by their bytes, no insignificant
// whitespace, no HTML escaping, numbers as CUE renders them (1.50 stays
// 1.50), definitions, hidden and optional fields left out. The checksum is
// cuecast.Checksum of those bytes. Results do not depend on the number of
// workers or on scheduling.
//
// # Variants
//
// A namespace may declare dimensions (env: [staging, prod]) and the valid
// combinations of their values (docs/VARIANTS.md). A config uses a
// dimension when its own package has @tag(<dim>) on a field or a file it
// loads (its imports' too) has a build attribute @if naming one of the
// dimension's values; both are read as cue/load reads them (an @if after
// the package clause selects nothing, @tag's arguments may be quoted, a
// tag that is no dimension is left unset). It is
// then compiled once per combination of the dimensions it uses (the listed
// combinations projected onto them), with each value passed to the loader
// as a build tag: the shorthand form, `cue export -t prod`, which sets
// @tag(env,short=staging|prod) and turns on @if(prod) files at once. An
// @tag of a dimension that does not list every value as a shorthand is
// config/variant-tag. Each variant's output is at its variant path
// (payments/checkout/env=prod/region=eu) and the config's own path holds
// its VariantIndex. Errors of one variant name it ("payments/checkout
// [env=prod]: …" and Error.Config is the variant path); an error every
// variant has is reported once, against the config. Two defaults meeting on
// one field is config/two-defaults, naming both places.
//
// # Incremental compiles
//
// Result.Index maps files to the configs they can affect (configs, never
// variants: a config is compiled with all its variants). A caller that
// sees files change asks Index.Affected, then compiles only those configs
// with Options.Configs, which loads only them and their imports. A compile
// limited that way returns an Index covering only those configs; merge it
// into the previous one with Index.Merge. AffectsAll says which files
// (cue.mod/, the root's .cue files) affect every config, new ones included:
// the tailer and the PR check then compile everything. A file below a
// package that embeds files affects the configs loading that package.
// Options.ManifestOnly evaluates the manifest alone, for a caller that
// needs only Manifest.Policy.
//
// # Concurrency and limits
//
// Configs load and evaluate on a pool of Options.Workers goroutines (default
// one per CPU). The configs, sorted, are cut into batches of 50 neighbours;
// a worker loads a batch with one call of the CUE loader over only the files
// that batch can read (its configs' directories, their ancestors and
// imports, cue.mod/ and the root), evaluates it in a fresh CUE context of its
// own and drops both before the next batch. Offering the loader the whole
// repo instead made loading quadratic (it lists every ancestor directory of
// every package, and a namespace directory lists all its configs), and
// holding every loaded instance made memory grow with the repo; now neither
// does. Results are merged in config order, so serial and parallel compiles
// give the same bytes and the same errors in the same order.
// Options.Timeout bounds one config's evaluation; CUE cannot interrupt an
// evaluation, so a config that exceeds it is reported (config/timeout) and
// its goroutine is abandoned to finish in the background. CUE cannot say
// what it was evaluating either, so the error points at the costliest
// construct in the config's files (nested comprehensions, disjunctions
// unified with each other, list.Range) and says that this is a guess.
// Abandoned evaluations are counted by a Runaways (Options.Runaways), so
// that a config that never finishes cannot leave one more behind at every
// commit: at most one per config and DefaultMaxRunaways in all run at a
// time, and a config is not evaluated again while nothing it reads has
// changed since it timed out. Compile may be
// called from several goroutines at once; a Result and its Index are not
// modified after Compile returns.
package compiler
