package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	example "github.com/cuecast/cuecast/configs-example"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/revert"
)

// DemoOptions are the flags of `cuecast demo`.
type DemoOptions struct {
	Example string
	Keep    bool
	Timeout time.Duration
}

// The change the demo makes: one line of one config.
const (
	demoConfig = cuecast.ConfigPath("payments/checkout")
	demoFile   = "payments/checkout/checkout.cue"
	demoBefore = "max_amount_minor: 5_000_000"
	demoAfter  = "max_amount_minor: 2_500_000"
)

var demoInstances = []string{"checkout-1", "checkout-2", "checkout-3"}

// demoHold is how long the demo's canary stage holds before the change goes
// to everyone: long enough to see the other instances still on the old
// version, short enough for `make demo`.
const demoHold = 3 * time.Second

// demoPolicy is the staged rollout the demo's change takes: one named canary
// instance, a hold, then everyone (docs/ROLLOUT.md, named stages).
func demoPolicy() cuecast.Policy {
	return cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: demoInstances[:1], Hold: cuecast.Duration(demoHold)},
		{Name: "all", Percent: 100},
	}}
}

// demoPolicies rolls the first version out to everyone at once (no instance
// exists yet) and every later version of the demo's config in stages.
type demoPolicies struct{}

func (demoPolicies) Policy(_ context.Context, v cuecast.Version) (cuecast.Policy, cuecast.Consistency, error) {
	if v.Config == demoConfig && v.Version > 1 {
		return demoPolicy(), cuecast.Relaxed, nil
	}
	return cuecast.DefaultPolicy(), cuecast.Relaxed, nil
}

func newDemoCmd(env *Env, runF func(*cobra.Command, *DemoOptions) error) *cobra.Command {
	opts := &DemoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline end to end on configs-example/, narrated",
		Long: `Demo shows the pipeline working on one machine with nothing installed but Go.

It copies the example config repo into a new Git repository in a temporary
directory, starts serve (embedded NATS on a free port, the tailer, the
distributor), starts three service instances watching payments/checkout, commits a
change and rolls it out in stages, a canary (checkout-1, held 3s) then all, showing
which instance runs what at each stage, then commits a revert and shows every
instance back on the old content as a newer version. Last, the instances evaluate a
feature flag of growth/flags in-process for 1,000 users, a commit raises its rollout
from 20% to 50%, and they evaluate the new version: the users who had it keep it.
It cleans up after itself and exits 0 when every step checked out, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := positive("step-timeout", opts.Timeout, "30s"); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return demoRun(c.Context(), env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Example, "example", "", "the example config repo to copy (default: the copy of configs-example built into cuecast)")
	cmd.Flags().BoolVar(&opts.Keep, "keep", false, "keep the temporary repository and data directory")
	cmd.Flags().DurationVar(&opts.Timeout, "step-timeout", 30*time.Second, "how long any one step may take")
	return cmd
}

// demo is one run's state; each step narrates to out.
type demo struct {
	out      io.Writer
	opts     *DemoOptions
	dir      string
	repo     *git.Repository
	pipe     *pipeline.Pipeline
	trust    string // the trusted-keys file, as serve writes it
	watchers []*client.Watcher
	clients  []*client.Client // one per instance, for the flag step
	conns    []*nats.Conn
	step     int
	started  time.Time
}

func demoRun(ctx context.Context, env *Env, opts *DemoOptions) error {
	if opts.Example != "" {
		if _, err := os.Stat(filepath.Join(opts.Example, "cuecast.cue")); err != nil {
			return usageErrorf("pass the directory holding cuecast.cue, or no --example for the built-in one", "%s is not an example config repo: %v", opts.Example, err)
		}
	}
	dir, err := os.MkdirTemp("", "cuecast-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d := &demo{out: env.IO.Out, opts: opts, dir: dir, started: time.Now()}
	defer d.cleanup()
	if opts.Example == "" {
		// The copy built into the binary: the demo needs no source tree.
		opts.Example = filepath.Join(dir, "configs-example")
		if err := os.CopyFS(opts.Example, example.FS); err != nil {
			return fmt.Errorf("demo: unpack the built-in example: %w", err)
		}
	}
	fmt.Fprintln(d.out, "cuecast demo: the whole pipeline on one machine, end to end.")
	if err := d.run(ctx, env); err != nil {
		fmt.Fprintf(d.out, "\nThe demo failed: %v\n", err)
		return &silentError{code: ExitFailure}
	}
	fmt.Fprintf(d.out, "\nDone in %s. Every step checked out.\n", time.Since(d.started).Round(time.Millisecond))
	return nil
}

// demoSteps is the number of d.say calls in a run.
const demoSteps = 10

func (d *demo) say(format string, args ...any) {
	d.step++
	fmt.Fprintf(d.out, "\n[%d/%d] %s\n", d.step, demoSteps, fmt.Sprintf(format, args...))
}

func (d *demo) detail(format string, args ...any) {
	fmt.Fprintf(d.out, "      %s\n", fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context, env *Env) error {
	repoDir := filepath.Join(d.dir, "repo")
	d.say("Copying %s into a new Git repository at %s and committing it.", d.opts.Example, repoDir)
	if err := copyTree(d.opts.Example, repoDir); err != nil {
		return err
	}
	r, err := git.PlainInitWithOptions(repoDir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		return fmt.Errorf("git init: %w", err)
	}
	d.repo = r
	first, err := d.commit("Import the example configs")
	if err != nil {
		return err
	}
	d.detail("commit %s  %q", cuecast.ShortCommit(first.String()), "Import the example configs")

	d.say("Starting cuecast serve: embedded NATS with JetStream, the tailer and the distributor.")
	logger := env.Logger()
	if env.LogLevel == "info" {
		// The narration is the demo's output; keep routine logs out of it.
		logger = slog.New(slog.NewTextHandler(env.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	d.pipe, err = pipeline.Start(ctx, pipeline.Config{
		Repo:     repoDir,
		Branch:   "main",
		DataDir:  filepath.Join(d.dir, "data"),
		Listen:   "127.0.0.1:0",
		Logger:   logger,
		Policies: demoPolicies{},
	})
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runErr := make(chan error, 1)
	go func() { runErr <- d.pipe.Run(runCtx) }()
	d.detail("NATS at %s, data in %s", d.pipe.ClientURL(), filepath.Join(d.dir, "data"))
	// As serve does: the public key in <data>/trusted-keys, which is what
	// services are given and what the instances below verify against.
	d.trust = filepath.Join(d.dir, "data", distributor.TrustedKeysFile)
	if _, err := distributor.TrustKey(d.trust, d.pipe.PublicKey); err != nil {
		return err
	}
	d.detail("signing key %s, listed in %s; the instances accept only what it signed", d.pipe.PublicKey, d.trust)
	d.detail("rollout: the first version to everyone at once; the change after it in stages, %s", stageLine(demoPolicy()))
	d.detail("(serve follows the manifest's stages the same way; see docs/ROLLOUT.md)")
	if err := d.waitCursor(ctx, first.String()); err != nil {
		return err
	}
	v1, err := d.waitVersion(ctx, demoConfig, func(v cuecast.Version) bool { return v.Commit == first.String() })
	if err != nil {
		return err
	}
	cfgs, err := d.pipe.Distributor.Configs(ctx)
	if err != nil {
		return fmt.Errorf("list configs: %w", err)
	}
	d.detail("the tailer compiled the commit and published %d configs as version 1:", len(cfgs))
	for _, c := range cfgs {
		d.detail("  %s", c)
	}

	d.say("Starting three service instances watching %s (the client library, as `cuecast watch` runs it).", demoConfig)
	for _, id := range demoInstances {
		w, err := d.startWatcher(ctx, env, id)
		if err != nil {
			return err
		}
		d.watchers = append(d.watchers, w)
	}
	if err := d.waitApplied(ctx, v1); err != nil {
		return err
	}
	for i, w := range d.watchers {
		s := w.Current()
		d.detail("%s applied v%d (sha256:%s), last-known-good file written", demoInstances[i], s.Version, s.Checksum[:12])
	}

	d.say("Committing a change to %s: %s  ▶  %s", demoFile, demoBefore, demoAfter)
	if err := d.edit(repoDir); err != nil {
		return err
	}
	t0 := time.Now()
	change, err := d.commit("checkout: halve the maximum amount")
	if err != nil {
		return err
	}
	// A push webhook would wake the tailer the same way; polling would add up
	// to one interval.
	d.pipe.Tailer.Wake()
	v2, err := d.waitVersion(ctx, demoConfig, func(v cuecast.Version) bool { return v.Commit == change.String() })
	if err != nil {
		return err
	}
	published := time.Since(t0)
	d.detail("commit %s became %s v%d (author %s) in %s", cuecast.ShortCommit(change.String()), demoConfig, v2.Version, v2.Author, published.Round(time.Millisecond))
	if err := d.staged(ctx, v1, v2); err != nil {
		return err
	}
	d.detail("all three instances applied v%d %s after the commit", v2.Version, time.Since(t0).Round(time.Millisecond))

	d.say("Asking `cuecast status` how much of the fleet runs it.")
	if err := d.waitStatus(ctx, v2.Version, len(demoInstances)); err != nil {
		return err
	}

	d.say("Rolling back the way cuecast means it: a revert commit, through the same pipeline.")
	rev, err := revert.Commit(d.repo, change.String(), &object.Signature{Name: "Demo Operator", Email: "oncall@example.com", When: time.Now()})
	if err != nil {
		return err
	}
	t1 := time.Now()
	d.pipe.Tailer.Wake()
	v3, err := d.waitVersion(ctx, demoConfig, func(v cuecast.Version) bool { return v.Commit == rev.String() })
	if err != nil {
		return err
	}
	if err := d.waitApplied(ctx, v3); err != nil {
		return err
	}
	if v3.Checksum != v1.Checksum {
		return fmt.Errorf("after the revert v%d has checksum %s, want v1's %s", v3.Version, v3.Checksum, v1.Checksum)
	}
	d.detail("revert commit %s became v%d; its content is byte-for-byte v1's (sha256:%s)", cuecast.ShortCommit(rev.String()), v3.Version, v3.Checksum[:12])
	d.detail("it took the same stages, %s: on every instance %s after the commit", stageLine(demoPolicy()), time.Since(t1).Round(time.Millisecond))
	for i, w := range d.watchers {
		s := w.Current()
		d.detail("%s is on v%d, the original content", demoInstances[i], s.Version)
	}
	if err := d.waitStatus(ctx, v3.Version, len(demoInstances)); err != nil {
		return err
	}

	if err := d.flipFlag(ctx, repoDir); err != nil {
		return err
	}

	d.say("Stopping the instances and the server.")
	stopRun()
	if err := <-runErr; err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// staged narrates v2's staged rollout: the canary stage with only its
// instance on v2 while the others stay on v1, then the last stage with
// everyone on v2. It fails when a stage does not look like that.
func (d *demo) staged(ctx context.Context, v1, v2 cuecast.Version) error {
	d.say("Rolling v%d out in stages: %s.", v2.Version, stageLine(demoPolicy()))
	canary := demoInstances[0]
	var rec rollout.Record
	err := d.poll(ctx, func() (bool, error) {
		var err error
		rec, err = d.pipe.Rollout.Record(ctx, demoConfig)
		if err != nil {
			return false, nil
		}
		r := rec.Current
		if r == nil || r.Version != v2.Version {
			return false, nil
		}
		if r.Stage > 0 || r.State == rollout.StateComplete {
			return false, fmt.Errorf("v%d left the canary stage before %s applied it", v2.Version, canary)
		}
		return d.watchers[0].Current().Version == v2.Version, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the canary stage of v%d: %w", v2.Version, err)
	}
	d.detail("stage 1/2 canary (%s):", canary)
	for i, w := range d.watchers {
		s := w.Current()
		switch {
		case i == 0:
			d.detail("  %s applied v%d", demoInstances[i], s.Version)
		case s.Version == v1.Version:
			d.detail("  %s still on v%d: not in the canary", demoInstances[i], s.Version)
		default:
			return fmt.Errorf("%s is on v%d during the canary stage, want v%d", demoInstances[i], s.Version, v1.Version)
		}
	}
	d.detail("  the stage holds %s with its instance healthy, then the change goes to everyone", demoHold)
	if err := d.waitApplied(ctx, v2); err != nil {
		return fmt.Errorf("waiting for stage all of v%d: %w", v2.Version, err)
	}
	err = d.poll(ctx, func() (bool, error) {
		rec, err = d.pipe.Rollout.Record(ctx, demoConfig)
		if err != nil {
			return false, err
		}
		return rec.Current != nil && rec.Current.Version == v2.Version && rec.Current.State == rollout.StateComplete, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for v%d's rollout to complete: %w", v2.Version, err)
	}
	d.detail("stage 2/2 all (100%%): every instance applied v%d; the rollout is %s", v2.Version, rec.Current.State)
	return nil
}

// stageLine is a policy's stages as one line: "canary (checkout-1, hold 3s) ▶ all (100%)".
func stageLine(p cuecast.Policy) string {
	parts := make([]string, len(p.Stages))
	for i, st := range p.Stages {
		var what []string
		if st.Percent > 0 {
			what = append(what, fmt.Sprintf("%d%%", st.Percent))
		}
		what = append(what, st.Instances...)
		if st.Hold > 0 {
			what = append(what, "hold "+st.Hold.String())
		}
		parts[i] = fmt.Sprintf("%s (%s)", st.Name, strings.Join(what, ", "))
	}
	return strings.Join(parts, " ▶ ")
}

func (d *demo) commit(msg string) (plumbing.Hash, error) {
	wt, err := d.repo.Worktree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git: %w", err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git add: %w", err)
	}
	h, err := wt.Commit(msg, &git.CommitOptions{
		Author: &object.Signature{Name: "Demo Engineer", Email: "engineer@example.com", When: time.Now()},
	})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("git commit: %w", err)
	}
	return h, nil
}

func (d *demo) edit(repoDir string) error {
	path := filepath.Join(repoDir, filepath.FromSlash(demoFile))
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("edit %s: %w", demoFile, err)
	}
	if !strings.Contains(string(b), demoBefore) {
		return fmt.Errorf("edit %s: the line %q is not there; the demo and configs-example disagree", demoFile, demoBefore)
	}
	return os.WriteFile(path, []byte(strings.Replace(string(b), demoBefore, demoAfter, 1)), 0o644)
}

func (d *demo) startWatcher(ctx context.Context, env *Env, id string) (*client.Watcher, error) {
	nc, err := nats.Connect(d.pipe.ClientURL(), nats.Name("demo "+id))
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", id, err)
	}
	d.conns = append(d.conns, nc)
	cl, err := client.New(nc,
		client.WithInstance(id),
		client.WithTrustedKeysFile(d.trust),
		client.WithEvents(func(ev client.Event) {
			// EventNotFound: the instance starts a moment before the
			// first version's pointers exist, and says so; the demo
			// waits for them anyway, so only real trouble is shown.
			if ev.Err != nil && ev.Kind != client.EventNotFound {
				fmt.Fprintf(env.IO.ErrOut, "      %s: %s\n", id, ev)
			}
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", id, err)
	}
	w, err := cl.Watch(ctx, demoConfig, client.LastKnownGood(filepath.Join(d.dir, id+".lkg")))
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", id, err)
	}
	d.clients = append(d.clients, cl)
	return w, nil
}

// waitVersion polls the distributor until the config's latest version
// satisfies ok.
func (d *demo) waitVersion(ctx context.Context, cfg cuecast.ConfigPath, ok func(cuecast.Version) bool) (cuecast.Version, error) {
	var last cuecast.Version
	err := d.poll(ctx, func() (bool, error) {
		v, err := d.pipe.Distributor.Latest(ctx, cfg)
		if errors.Is(err, cuecast.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		last = v
		return ok(v), nil
	})
	if err != nil {
		return last, fmt.Errorf("waiting for a new version of %s (latest v%d): %w", cfg, last.Version, err)
	}
	return last, nil
}

// waitCursor waits until the tailer has fully processed commit sha.
func (d *demo) waitCursor(ctx context.Context, sha string) error {
	err := d.poll(ctx, func() (bool, error) {
		st, err := d.pipe.Tailer.State(ctx)
		if err != nil {
			return false, err
		}
		return st.Cursor == sha, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the tailer to process %s: %w", sha[:10], err)
	}
	return nil
}

func (d *demo) waitApplied(ctx context.Context, v cuecast.Version) error {
	return d.poll(ctx, func() (bool, error) {
		for _, w := range d.watchers {
			s := w.Current()
			if s.Version != v.Version || s.Checksum != v.Checksum {
				return false, nil
			}
		}
		return true, nil
	})
}

func (d *demo) waitStatus(ctx context.Context, version uint64, want int) error {
	var line string
	err := d.poll(ctx, func() (bool, error) {
		st, err := d.pipe.Distributor.Status(ctx, demoConfig)
		if err != nil {
			return false, err
		}
		if len(st) != 1 {
			return false, nil
		}
		s := st[0]
		line = fmt.Sprintf("%s  v%d  %d/%d instances", s.Config, s.Latest.Version, s.OnLatest, s.Instances)
		return s.Latest.Version == version && s.OnLatest == want && s.Instances == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for status to show v%d on %d/%d (last: %s): %w", version, want, want, line, err)
	}
	d.detail("$ cuecast status %s", demoConfig)
	d.detail("%s", line)
	return nil
}

// poll calls cond every 10ms until it is true, fails, or the step times out.
func (d *demo) poll(ctx context.Context, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no progress after %s", d.opts.Timeout)
		case <-tick.C:
		}
	}
}

func (d *demo) cleanup() {
	for _, w := range d.watchers {
		w.Stop()
	}
	for _, nc := range d.conns {
		nc.Close()
	}
	if d.pipe != nil {
		d.pipe.Close()
	}
	if d.opts.Keep {
		fmt.Fprintf(d.out, "Kept %s.\n", d.dir)
		return
	}
	os.RemoveAll(d.dir)
}

// copyTree copies a directory of regular files.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		return os.WriteFile(target, b, 0o644)
	})
}
