package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags"
	"github.com/cuecast/cuecast/mutator"
)

// The demo's flag flip: configs-example's flag set, one rollout raised.
const (
	demoFlagsConfig = cuecast.ConfigPath("growth/flags")
	demoFlag        = "new-checkout"
	demoFlagRollout = 50 // percent, from configs-example's 20
	demoUsers       = 1000
)

// flipFlag has every instance evaluate demoFlag in-process for demoUsers
// users, raises its rollout from 20% to 50% by a commit, and shows the
// instances evaluating the new version: about half the users on, every one
// who was on still on, and the three instances agreeing user by user.
func (d *demo) flipFlag(ctx context.Context, repoDir string) error {
	d.say("Feature flags: every instance evaluates %s's %q in-process, no network call per evaluation.", demoFlagsConfig, demoFlag)
	var ws []*client.TypedWatcher[*flags.Evaluator]
	for i, cl := range d.clients {
		w, err := client.Typed[*flags.Evaluator](ctx, cl, demoFlagsConfig, client.LastKnownGood(filepath.Join(d.dir, demoInstances[i]+"-flags.lkg")))
		if err != nil {
			return fmt.Errorf("watch %s on %s: %w", demoFlagsConfig, demoInstances[i], err)
		}
		defer w.Stop()
		if err := w.WaitReady(ctx); err != nil {
			return fmt.Errorf("%s: %s: %w", demoInstances[i], demoFlagsConfig, err)
		}
		ws = append(ws, w)
	}
	before, err := d.evalUsers(ws, 0)
	if err != nil {
		return err
	}

	// The change a tool (or the dashboard) would make: cuecast flags set,
	// through the mutator, which edits the weights where they are written
	// and checks the result before it commits.
	d.say("Running `cuecast flags set %s %s --rollout 50`: %q from 20%% to 50%% of users, committed on main.", demoFlagsConfig, demoFlag, demoFlag)
	t0 := time.Now()
	m := mutator.New(repoDir, mutator.Options{})
	rollout := float64(demoFlagRollout)
	fc := mutator.FlagChange{Flag: demoFlag, Rollout: &rollout}
	set, expect, err := m.FlagAssignments(ctx, demoFlagsConfig, nil, fc)
	if err != nil {
		return fmt.Errorf("raise %s: %w", demoFlag, err)
	}
	res, err := m.Set(ctx, mutator.Request{
		Configs: []cuecast.ConfigPath{demoFlagsConfig}, Set: set, Expect: expect,
		Reason:   "The one-page checkout converts better: serve it to half the users.",
		Identity: mutator.Identity{Name: "Demo Engineer", Email: "engineer@example.com"},
		Mode:     mutator.ModeCommit, Tool: "cuecast flags set", Subject: fc.Subject(demoFlagsConfig),
	})
	if err != nil {
		return fmt.Errorf("raise %s: %w", demoFlag, err)
	}
	change := plumbing.NewHash(res.Commit)
	for _, v := range res.Values {
		d.detail("%s: %s -> %s at %s", v.Path, v.Old, v.New, v.Edited)
	}
	d.pipe.Tailer.Wake()
	v, err := d.waitVersion(ctx, demoFlagsConfig, func(v cuecast.Version) bool { return v.Commit == change.String() })
	if err != nil {
		return err
	}
	if err := d.poll(ctx, func() (bool, error) {
		for _, w := range ws {
			if _, s := w.Value(); s.Version != v.Version {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	d.detail("commit %s became %s v%d; every instance compiled and swapped it in %s", change.String()[:10], demoFlagsConfig, v.Version, time.Since(t0).Round(time.Millisecond))
	after, err := d.evalUsers(ws, v.Version)
	if err != nil {
		return err
	}
	for u := range before {
		if before[u] && !after[u] {
			return fmt.Errorf("user-%d had %s on at 20%% and lost it at 50%%", u, demoFlag)
		}
	}
	d.detail("every user who had it at 20%% still has it: a user's bucket position does not depend on the weights")
	d.explainHint(repoDir)
	return nil
}

// programName is how the reader runs this binary again: as it was started
// (bin/cuecast from make demo), or cuecast when it was a temporary build of
// go run, which is gone once the demo exits.
func programName() string {
	p := os.Args[0]
	if strings.ContainsRune(p, filepath.Separator) {
		if rel, err := filepath.Rel(os.TempDir(), p); err == nil && !strings.HasPrefix(rel, "..") {
			return "cuecast"
		}
	}
	return p
}

// explainHint prints a flags eval the reader can run after the demo has
// stopped: it compiles the repository, since the demo's NATS server is gone
// by then (a --published hint failed for everyone who tried it).
func (d *demo) explainHint(repoDir string) {
	eval := fmt.Sprintf("%s flags eval %s %s --ctx targetingKey=user-1 --repo ", programName(), demoFlagsConfig, demoFlag)
	if d.opts.Keep {
		d.detail("explain one: %s%s", eval, repoDir)
		return
	}
	// This run's repository is removed when it ends.
	d.detail("explain one: run the demo with --keep, then %s<the directory it keeps>/repo", eval)
}

// evalUsers evaluates demoFlag for user-0… on every instance, checks that
// they agree user by user and, when version is set, that each evaluates
// it; it narrates the share on and returns who is on.
func (d *demo) evalUsers(ws []*client.TypedWatcher[*flags.Evaluator], version uint64) ([]bool, error) {
	on := make([]bool, demoUsers)
	count := 0
	var at uint64
	for i, w := range ws {
		e, snap := w.Value()
		if version > 0 && snap.Version != version {
			return nil, fmt.Errorf("%s evaluates v%d, want v%d", demoInstances[i], snap.Version, version)
		}
		at = snap.Version
		for u := range demoUsers {
			got, res := e.Bool(demoFlag, flags.Context{"targetingKey": fmt.Sprintf("user-%d", u)}, false)
			if res.Reason == flags.ReasonError {
				return nil, fmt.Errorf("%s: %s: %s", demoInstances[i], demoFlag, res.ErrorCode)
			}
			switch {
			case i == 0:
				on[u] = got
				if got {
					count++
				}
			case got != on[u]:
				return nil, fmt.Errorf("%s and %s disagree on user-%d", demoInstances[0], demoInstances[i], u)
			}
		}
	}
	d.detail("%s (v%d), user by user alike: %s on for %d of %d users", strings.Join(demoInstances, ", "), at, demoFlag, count, demoUsers)
	return on, nil
}
