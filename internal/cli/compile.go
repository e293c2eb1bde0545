package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/termtext"
)

// CompileOptions are the flags of `cuecast compile`.
type CompileOptions struct {
	Repo    string
	Out     string
	Output  string
	Configs []string
}

func newCompileCmd(env *Env, runF func(*cobra.Command, *CompileOptions) error) *cobra.Command {
	opts := &CompileOptions{}
	cmd := &cobra.Command{
		Use:   "compile [CONFIG...]",
		Short: "Validate configs and write their canonical JSON",
		Long: `Compile loads the config repo, validates every config (or the ones named) against
its namespace schema and the lints, and prints each config's checksum.

With --out DIR it writes DIR/<config path>.json for every config compiled and
DIR/index.json listing paths, checksums and sizes. DIR becomes an exact mirror of the
compile: it is written anew and swapped in, so the JSON of a deleted config (or of a
config not named) does not remain. DIR must be new, empty or an earlier --out.
Nothing is written unless every config compiles.

Errors are printed as file:line:col: message [ID], like a compiler's.
Exit status: 0 valid; 3 invalid configs (a repo without cue.mod/module.cue too,
at cue.mod/module.cue:1:1); 2 wrong usage (no cue.mod/ directory, a config named
that the repo does not have); 1 cuecast failed.`,
		Example: `  cuecast compile --repo configs-example
  cuecast compile --repo . --out build/ payments/checkout
  cuecast compile --output json | jq '.errors'`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Configs = args
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return compileRun(c, env, opts)
		},
	}
	registerCUERepo(cmd.Flags(), &opts.Repo)
	cmd.Flags().StringVar(&opts.Out, "out", "", "write compiled JSON and index.json under this directory")
	registerOutput(cmd.Flags(), &opts.Output)
	return cmd
}

// needCUERepo is the usage error of a command that reads the CUE module at
// dir, --repo on disk, when dir holds no cue.mod/ directory; orElse ends
// the hint with another way to run the command (", or pass --published").
func needCUERepo(dir, orElse string) error {
	if _, err := os.Stat(filepath.Join(dir, "cue.mod")); err != nil {
		return usageErrorf("point --repo at the directory that holds cue.mod/"+orElse, "%s is not a CUE config repo: no cue.mod/ directory", dir)
	}
	return nil
}

// registerCUERepo is the --repo flag of a command that reads the CUE module
// on disk (needCUERepo checks it).
func registerCUERepo(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "repo", ".", "config repository root (the directory holding cue.mod/)")
}

// printCompileErrors prints errs to w as compile does, one
// file:line:col: message [ID] a line, each with its fix under it. A file
// name and a message quote what a commit chose (CI prints them): their
// terminal controls are escaped (termtext.Line).
func printCompileErrors(w io.Writer, errs []compiler.Error) {
	for _, e := range errs {
		fmt.Fprintln(w, termtext.Line(e.Error()))
		if e.Fix != "" {
			fmt.Fprintf(w, "\tfix: %s\n", termtext.Line(e.Fix))
		}
	}
}

func validateOutput(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return usageErrorf(fmt.Sprintf("use one of %v", allowed), "unknown --output %q", got)
}

// compiledConfig is one row of the index and of --output json.
type compiledConfig struct {
	Config   cuecast.ConfigPath `json:"config"`
	Checksum string             `json:"checksum"`
	Size     int                `json:"size"`
}

type compileReport struct {
	Configs []compiledConfig `json:"configs"`
	Errors  []compiler.Error `json:"errors"`
	// Undeclared are directories holding CUE that are no namespace and
	// that no config imports (compiler.Result.Undeclared).
	Undeclared []string `json:"undeclared,omitempty"`
}

func compileRun(c *cobra.Command, env *Env, opts *CompileOptions) error {
	ctx := c.Context()
	if err := needCUERepo(opts.Repo, ""); err != nil {
		return err
	}
	var paths []cuecast.ConfigPath
	for _, a := range opts.Configs {
		p := cuecast.ConfigPath(filepath.ToSlash(filepath.Clean(a)))
		if err := p.Validate(); err != nil {
			return &UsageError{Err: err, Hint: "name configs by their directory, like payments/checkout"}
		}
		paths = append(paths, p)
	}
	progress := newProgress(env.IO.ErrOut, env.IO.IsStderrTTY(), "compiling")
	res, err := compiler.Compile(ctx, opts.Repo, compiler.Options{
		Configs:  paths,
		Logger:   env.Logger(),
		Progress: progress.update,
	})
	progress.done()
	if errors.Is(err, compiler.ErrNoModule) {
		// Invalid like any config error (check says the same, exit 3).
		res, err = &compiler.Result{Errors: []compiler.Error{compiler.NoModuleError()}}, nil
	}
	if err != nil {
		return fmt.Errorf("compile: %w", err) // the compiler's error names the repo
	}
	if err := unknownConfigs(paths, res.Configs); err != nil {
		return err
	}
	rep := compileReport{Configs: []compiledConfig{}, Errors: res.Errors, Undeclared: res.Undeclared}
	if rep.Errors == nil {
		rep.Errors = []compiler.Error{}
	}
	for _, p := range sortedOutputs(res.Outputs) {
		o := res.Outputs[p]
		rep.Configs = append(rep.Configs, compiledConfig{Config: p, Checksum: o.Checksum, Size: len(o.JSON)})
	}
	if res.OK() && opts.Out != "" {
		if err := writeCompiled(opts.Out, res.Outputs, rep.Configs); err != nil {
			return err
		}
	}
	if opts.Output == "json" {
		if err := writeJSON(env.IO.Out, rep); err != nil {
			return err
		}
	} else {
		printCompileText(env, rep, opts.Out, res.OK())
	}
	if !res.OK() {
		return errInvalid
	}
	return nil
}

// unknownConfigs refuses named configs the repo does not have, as explain
// does: a misspelt name must not pass as "0 config(s) compiled".
func unknownConfigs(named, found []cuecast.ConfigPath) error {
	var missing []string
	for _, p := range named {
		if _, ok := slices.BinarySearch(found, p.Base()); !ok {
			missing = append(missing, string(p))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &UsageError{Err: fmt.Errorf("compile %s: %w", strings.Join(missing, ", "), compiler.ErrUnknownConfig),
		Hint: "name a config by its directory, like payments/checkout; 'cuecast compile' lists them"}
}

func printCompileText(env *Env, rep compileReport, out string, ok bool) {
	for _, d := range rep.Undeclared {
		fmt.Fprintf(env.IO.ErrOut, "warning: %s/ holds CUE packages but is not a namespace in cuecast.cue and no config imports it; nothing in it is compiled (declare it if it holds configs)\n", termtext.Line(d))
	}
	printCompileErrors(env.IO.ErrOut, rep.Errors)
	if !ok {
		fmt.Fprintf(env.IO.ErrOut, "%d error(s); nothing written\n", len(rep.Errors))
		return
	}
	tw := newTable(env.IO.Out)
	for _, c := range rep.Configs {
		tw.row(string(c.Config), "sha256:"+c.Checksum[:12], humanBytes(c.Size))
	}
	tw.flush()
	if out != "" {
		fmt.Fprintf(env.IO.Out, "%d config(s) compiled, written to %s\n", len(rep.Configs), out)
	} else {
		fmt.Fprintf(env.IO.Out, "%d config(s) compiled\n", len(rep.Configs))
	}
}

// writeCompiled makes dir an exact mirror of this compile: every output, the
// index, and nothing else, so a deleted config's JSON does not outlive it.
// It writes a new directory next to dir and swaps it in, so a reader sees
// either the old tree or the new one, never a mix. A dir that exists must
// be an earlier --out (it holds index.json) or empty: anything else might
// be files of the user's that the swap would delete.
func writeCompiled(dir string, outs map[cuecast.ConfigPath]compiler.Output, index []compiledConfig) error {
	dir = filepath.Clean(dir)
	exists := false
	switch fi, err := os.Stat(dir); {
	case err == nil && !fi.IsDir():
		return usageErrorf("name a directory for --out", "--out %s is not a directory", dir)
	case err == nil:
		exists = true
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("read %s: %w", dir, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "index.json")); len(ents) > 0 && err != nil {
			return usageErrorf("point --out at an empty or new directory, or at an earlier --out",
				"--out %s holds files but no index.json; it is replaced by the compile, so cuecast will not touch it", dir)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".new-*")
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp) // gone after the swap; cleans up a failure
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for p, o := range outs {
		if err := writeFileAtomic(filepath.Join(tmp, filepath.FromSlash(string(p))+".json"), o.JSON); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return fmt.Errorf("encode index: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(tmp, "index.json"), append(b, '\n')); err != nil {
		return err
	}
	if !exists {
		if err := os.Rename(tmp, dir); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
		return nil
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return fmt.Errorf("replace %s: %w (and the old tree is left at %s: %v)", dir, err, old, rerr)
		}
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("remove the previous %s: %w", dir, err)
	}
	return nil
}

// writeFileAtomic replaces path with a file holding data, mode 0600
// (os.CreateTemp's) whatever the umask and whatever path was before: a
// reader sees the old file or the whole new one, and nobody else the
// secrets a nats-config configuration holds.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// progress prints "compiling 12/200" in place on a terminal once an operation
// has taken more than a second; on a pipe it prints nothing.
type progress struct {
	w     io.Writer
	tty   bool
	label string
	start time.Time
	mu    sync.Mutex
	shown bool
}

func newProgress(w io.Writer, tty bool, label string) *progress {
	return &progress{w: w, tty: tty, label: label, start: time.Now()}
}

func (p *progress) update(done, total int) {
	if !p.tty || time.Since(p.start) < time.Second {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown = true
	fmt.Fprintf(p.w, "\r%s %d/%d", p.label, done, total)
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
