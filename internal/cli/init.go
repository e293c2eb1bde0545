package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
)

// InitOptions are the flags of `cuecast init`.
type InitOptions struct {
	Dir       string
	Module    string
	Namespace string
	Owner     string
}

func newInitCmd(env *Env, runF func(*cobra.Command, *InitOptions) error) *cobra.Command {
	opts := &InitOptions{}
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Create a config repo that compiles and passes check at once",
		Long: `Init writes a new config repository into DIR (default: the current directory),
which must be empty or not exist yet:

  cue.mod/module.cue                the CUE module (--module), no external dependencies
  cuecast.cue                       the manifest: namespace --namespace, its owners,
                                    its schema and a canary-then-all rollout
  schemas/schemas.cue               the constraints every config of the namespace meets
  lib/defaults/defaults.cue         a library: defaults several configs share
  <namespace>/example/example.cue   one config, payments/checkout-style: its directory is its path
  .github/workflows/cuecast-check.yml   the pull-request check (ci/README.md)
  .github/CODEOWNERS                the manifest's owners, so GitHub asks them to review
  README.md                         what is where, and the next commands

It also runs 'git init' (branch main) when DIR is not a Git repository yet; it
commits nothing. Then: 'cuecast compile --repo DIR', commit, and
'cuecast serve --repo DIR'.`,
		Example: `  cuecast init configs --module example.com/acme/configs --namespace payments --owner @acme/payments
  cuecast init --namespace search --owner search-team@example.com`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Dir = "."
			if len(args) == 1 {
				opts.Dir = args[0]
			}
			if !cuecast.ValidSegment(opts.Namespace) {
				return usageErrorf("use lower-case letters, digits, - and _, like payments", "--namespace %q is not a valid namespace", opts.Namespace)
			}
			// init writes these directories itself, with other packages.
			if dir, ok := map[string]string{"lib": "library", "schemas": "schemas"}[opts.Namespace]; ok {
				return usageErrorf("name the namespace for its team or service, like payments", "--namespace %q is the repo's %s directory", opts.Namespace, dir)
			}
			if !modulePath.MatchString(opts.Module) {
				return usageErrorf("name a module like example.com/acme/configs (a domain first)", "--module %q is not a CUE module path", opts.Module)
			}
			if !codeOwner.MatchString(opts.Owner) {
				return usageErrorf("name a GitHub team (@org/team), a user (@name) or an e-mail address", "--owner %q is not a GitHub user, team or e-mail address", opts.Owner)
			}
			if runF != nil {
				return runF(c, opts)
			}
			return initRun(env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Module, "module", "example.com/configs", "the CUE module path of the repo")
	cmd.Flags().StringVar(&opts.Namespace, "namespace", "app", "the first namespace (a top-level directory of configs)")
	cmd.Flags().StringVar(&opts.Owner, "owner", "@example/platform", "who approves changes: a GitHub team (@org/team) or an e-mail address")
	return cmd
}

// modulePath is what CUE accepts as a module path without a major version:
// a domain-like first element, then path elements.
// codeOwner is what CODEOWNERS takes as an owner: GitHub marks any other
// word as an error on the file and asks no one to review (and a quote or a
// backslash would break the manifest's CUE string).
var codeOwner = regexp.MustCompile(`^(@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:/[A-Za-z0-9][A-Za-z0-9._-]*)?|[^@\s"\\]+@[^@\s"\\]+\.[^@\s"\\]+)$`)

var modulePath = regexp.MustCompile(`^[a-z0-9-]+(\.[a-z0-9-]+)+(/[a-z0-9._~-]+)*$`)

func initRun(env *Env, opts *InitOptions) error {
	if err := requireEmpty(opts.Dir); err != nil {
		return err
	}
	files := initFiles(opts)
	for _, f := range files {
		path := filepath.Join(opts.Dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("init: %w", err)
		}
		if err := os.WriteFile(path, f.body, 0o644); err != nil {
			return fmt.Errorf("init: %w", err)
		}
	}
	gitNote := ""
	if _, err := git.PlainOpen(opts.Dir); errors.Is(err, git.ErrRepositoryNotExists) {
		if _, err := git.PlainInitWithOptions(opts.Dir, &git.PlainInitOptions{
			InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
		}); err != nil {
			return fmt.Errorf("init: git init %s: %w", opts.Dir, err)
		}
		gitNote = " (and an empty Git repository on branch main)"
	}
	fmt.Fprintf(env.IO.Out, "created a cuecast config repo in %s%s:\n", opts.Dir, gitNote)
	for _, f := range files {
		fmt.Fprintf(env.IO.Out, "  %s\n", f.name)
	}
	fmt.Fprintf(env.IO.Out, `next:
  cuecast compile --repo %[1]s
  git -C %[1]s add -A && git -C %[1]s commit -m "cuecast init"
  cuecast serve --repo %[1]s --http 127.0.0.1:8080
`, opts.Dir)
	return nil
}

// requireEmpty refuses a directory that holds anything but .git: init never
// overwrites a file.
func requireEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			return usageErrorf("pick a new or empty directory", "init: %s is not empty (it has %s)", dir, e.Name())
		}
	}
	return nil
}

type initFile struct {
	name string
	body []byte
}

func initFiles(o *InitOptions) []initFile {
	def := definitionName(o.Namespace)
	r := strings.NewReplacer("%MODULE%", o.Module, "%NAMESPACE%", o.Namespace, "%DEF%", def, "%OWNER%", o.Owner)
	file := func(name, body string) initFile {
		return initFile{name: r.Replace(name), body: []byte(r.Replace(body))}
	}
	return []initFile{
		file("cue.mod/module.cue", `module: "%MODULE%@v0"
language: version: "v0.17.0"
`),
		file("cuecast.cue", `// The manifest: which top-level directories are namespaces, who owns them,
// what every config in them must satisfy and how changes roll out
// (docs/ROLLOUT.md). cuecast checks this file against its #Manifest schema.
package manifest

namespaces: "%NAMESPACE%": {
	owners: ["%OWNER%"]
	schema:      "%MODULE%/schemas#%DEF%"
	consistency: "relaxed"
	rollout: stages: [
		{name: "canary", percent: 10, hold: "5m", max_unhealthy: 0.0, max_apply_failures: 0.0},
		{name: "all", percent: 100},
	]
}
`),
		file("schemas/schemas.cue", `// Package schemas holds the constraints configs must meet. cuecast.cue names
// one definition per namespace; the compiler unifies every config of the
// namespace with it, whether or not the config imports this package.
package schemas

#Duration: =~"^[0-9]+(ms|s|m|h)$"

// #%DEF% is what every config in %NAMESPACE%/ must satisfy.
#%DEF%: {
	owner: string & !=""
	// Open: a config may add fields. Close it (no "...") when the services
	// reading it decode strictly.
	...
}
`),
		file("lib/defaults/defaults.cue", `// Package defaults is a library: it produces no config of its own, and every
// config importing it is recompiled when it changes.
package defaults

import "%MODULE%/schemas"

// #Timeouts are defaults (*) that a config may override with a concrete value.
#Timeouts: {
	read:  *"2s" | schemas.#Duration
	write: *"5s" | schemas.#Duration
}
`),
		file("%NAMESPACE%/example/example.cue", `// Package example is one config: its path is its directory, %NAMESPACE%/example,
// and it compiles to one JSON document.
package example

import "%MODULE%/lib/defaults"

owner:    "%OWNER%"
greeting: "hello"
timeouts: defaults.#Timeouts & {write: "10s"}
`),
		{name: ".github/workflows/cuecast-check.yml", body: ci.Workflow},
		file(".github/CODEOWNERS", `# From cuecast.cue's owners: GitHub asks them to review changes there.
/%NAMESPACE%/ %OWNER%
/cuecast.cue %OWNER%
/schemas/ %OWNER%
/lib/ %OWNER%
`),
		file("README.md", "# Configs\n\nConfiguration as code with [cuecast](https://github.com/cuecast/cuecast): CUE in Git,\n"+
			"compiled, reviewed by pull request and delivered to services over NATS.\n\n"+
			"- `cuecast.cue`: the manifest (namespaces, owners, schemas, rollout stages)\n"+
			"- `schemas/`: what the configs must satisfy\n"+
			"- `lib/`: libraries shared by configs\n"+
			"- `%NAMESPACE%/<name>/`: one config per directory; `%NAMESPACE%/example` is the first\n\n"+
			"```sh\ncuecast compile --repo .        # validate and compile every config\n"+
			"cuecast check --base main --head HEAD   # what a change does, as the PR check shows it\n"+
			"cuecast serve --repo .          # deliver main's configs to services\n```\n"),
	}
}

// definitionName is the schema definition of a namespace: its name in
// CamelCase, "fraud-rules" ▶ "FraudRules".
func definitionName(ns string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(ns, func(r rune) bool { return r == '-' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	if s := b.String(); s != "" && s[0] >= 'A' && s[0] <= 'Z' {
		return s
	}
	return "NS" + b.String()
}
