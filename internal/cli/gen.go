package cli

import (
	"errors"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast/bindings"
	"github.com/cuecast/cuecast/compiler"
)

// GenOptions are the arguments and flags of `cuecast gen`.
type GenOptions struct {
	Repo      string
	Out       string
	Package   string
	Language  string
	Namespace string
}

// genLanguages are gen's languages and the file each writes under --out.
var genLanguages = map[string]string{"go": ".go", "ts": ".ts", "jsonschema": ".schema.json"}

func newGenCmd(env *Env, runF func(*cobra.Command, *GenOptions) error) *cobra.Command {
	opts := &GenOptions{}
	cmd := &cobra.Command{
		Use:   "gen go|ts|jsonschema NAMESPACE",
		Short: "Generate typed bindings of a namespace's schema: Go, TypeScript, JSON Schema",
		Long: `Gen reads the schema definition the manifest names for NAMESPACE (cuecast.cue's
schema: field) from the repo on disk and writes its typed bindings, so that a
service reads the namespace's configs as its own types:

  go          Go structs, and Watch, which watches a config of the namespace
              decoded into them (client.Typed); cue exp gengotypes' mapping,
              with optional fields as pointers and the fields an open struct
              (...) does not name kept in Extra, so every config decodes
  ts          TypeScript types (interfaces, unions of string literals)
  jsonschema  JSON Schema (draft 2020-12), from CUE's own encoder, for any
              other language; a flag set's flags get cuecast's schema of its
              flag format, which the encoder cannot write

Without --out it prints the file; with --out DIR it writes DIR/NAMESPACE.go,
.ts or .schema.json. cuecast check warns in a pull request whose schema change
alters the bindings. See docs/GETTING-STARTED.md, "Typed bindings".

Exit status: 0 written; 2 unknown language or namespace, or a namespace with no
schema (or wrong usage); 3 the manifest or the schema is invalid (the errors are
printed); 1 cuecast failed.`,
		Example: `  cuecast gen go payments --out internal/configs/payments
  cuecast gen ts search --out web/src/configs
  cuecast gen jsonschema growth > growth.schema.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Language, opts.Namespace = args[0], args[1]
			if _, ok := genLanguages[opts.Language]; !ok {
				return usageErrorf("use go, ts or jsonschema", "gen: unknown language %q", opts.Language)
			}
			switch {
			case opts.Package != "" && opts.Language != "go":
				return usageErrorf("drop --package", "--package names the Go package: gen %s takes none", opts.Language)
			case opts.Package != "" && (!token.IsIdentifier(opts.Package) || opts.Package == "_"):
				return usageErrorf("use a Go identifier, like payments or paymentscfg", "--package %q is not a Go package name", opts.Package)
			}
			if runF != nil {
				return runF(c, opts)
			}
			return genRun(c, env, opts)
		},
	}
	registerCUERepo(cmd.Flags(), &opts.Repo)
	cmd.Flags().StringVar(&opts.Out, "out", "", "write the file under this directory instead of printing it")
	cmd.Flags().StringVar(&opts.Package, "package", "", "Go package name (default: the namespace)")
	return cmd
}

func genRun(c *cobra.Command, env *Env, opts *GenOptions) error {
	if err := needCUERepo(opts.Repo, ""); err != nil {
		return err
	}
	schemas, errs, err := compiler.Schemas(c.Context(), opts.Repo, compiler.Options{Logger: env.Logger()})
	if errors.Is(err, compiler.ErrNoModule) {
		schemas, errs, err = nil, []compiler.Error{compiler.NoModuleError()}, nil
	}
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	s, ok := schemas[opts.Namespace]
	switch {
	case !ok && len(errs) > 0:
		printCompileErrors(env.IO.ErrOut, errs)
		fmt.Fprintf(env.IO.ErrOut, "%d error(s); no bindings for namespace %s\n", len(errs), opts.Namespace)
		return errInvalid
	case !ok:
		names := make([]string, 0, len(schemas))
		for ns := range schemas {
			names = append(names, ns)
		}
		slices.Sort(names)
		return usageErrorf("the manifest declares "+strings.Join(names, ", "), "gen: no namespace %q in cuecast.cue", opts.Namespace)
	case s.Ref == "":
		return usageErrorf("name a schema definition in the namespace's schema: field in cuecast.cue",
			"gen: namespace %s names no schema, so there are no types to generate", opts.Namespace)
	}
	var out []byte
	switch opts.Language {
	case "go":
		out, err = bindings.Go(opts.Namespace, s.Ref, s.Value, bindings.GoOptions{Package: opts.Package})
	case "ts":
		out, err = bindings.TypeScript(opts.Namespace, s.Ref, s.Value)
	case "jsonschema":
		out, err = bindings.JSONSchema(s.Value)
	}
	if err != nil {
		return fmt.Errorf("gen %s %s: %w", opts.Language, opts.Namespace, err)
	}
	if opts.Out == "" {
		_, err := env.IO.Out.Write(out)
		return err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	file := filepath.Join(opts.Out, opts.Namespace+genLanguages[opts.Language])
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	fmt.Fprintf(env.IO.Out, "wrote %s (%s of %s)\n", file, opts.Language, s.Ref)
	return nil
}
