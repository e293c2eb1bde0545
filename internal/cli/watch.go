package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
)

// WatchOptions are the flags of `cuecast watch`.
type WatchOptions struct {
	Config string
	LKG    string
	serviceFlags
}

func newWatchCmd(env *Env, runF func(*cobra.Command, *WatchOptions) error) *cobra.Command {
	opts := &WatchOptions{}
	cmd := &cobra.Command{
		Use:   "watch --config PATH --instance ID",
		Short: "Subscribe to a config like a service would, printing each applied version",
		Long: `Watch runs the cuecast client library as one service instance: it starts from its
last-known-good file when there is one (so it works while NATS is down), then takes
the version its cohort's pointer names and every later one. Each version is verified
against its checksum, swapped in atomically, written to the last-known-good file and
reported back, and printed as one JSON line on stdout.

Only content signed by a trusted key is applied: pass serve's <data>/trusted-keys
as --trusted-keys-file (` + "`cuecast keys`" + ` prints it); watch refuses to start
without trusted keys unless told --insecure-skip-verify.

Problems (a corrupt last-known-good file, a rejected version, a lost connection) are
said on stderr; watch keeps running until interrupted. So is a config with no version
deployed to this instance: "not-found" says whether the config does not exist at all
(a misspelt --config) or its rollout has not reached the instance yet, at the start
and then about once a minute while it lasts.

A config with variants (docs/VARIANTS.md) is watched in the variant of this
instance's dimension values, given by --dim env=prod (repeatable) or --variant
env=prod,region=eu; they are reported as labels too. A value the config uses
that is not given, or a combination that is not one of its variants, is an
error (exit 2), never a default or another variant. --config may also name a
variant path itself, like payments/checkout/env=prod/region=eu. When the config's
variants change (it gains variants, or the variant watched is removed), watch
watches it again to pick the instance's variant, and says so on stderr; a second
re-watch with nothing applied since waits 1s, then twice as long each time, up to
a minute. A variant index that does not verify is refused (said on stderr and in
the instance's report), never taken for "no variants".`,
		Example: `  cuecast watch --config payments/checkout --instance web-1 --lkg /var/lib/app/checkout.json \
      --trusted-keys-file /etc/cuecast/trusted-keys
  cuecast watch --config payments/checkout --instance web-1 --dim env=prod --dim region=eu \
      --trusted-keys-file /etc/cuecast/trusted-keys`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := cuecast.ConfigPath(opts.Config).Validate(); err != nil {
				return &UsageError{Err: err, Hint: "pass --config <namespace>/<name>, like payments/checkout"}
			}
			if err := opts.validate(); err != nil {
				return err
			}
			if err := opts.validateTrust(); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return watchRun(c, env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Config, "config", "", "config path to watch, like payments/checkout")
	cmd.Flags().StringVar(&opts.LKG, "lkg", "", "last-known-good file: read at start, rewritten atomically on every apply (its directory is made if missing; a symlink another user owns on its path is refused)")
	opts.register(cmd.Flags(), env)
	return cmd
}

// appliedLine is what watch prints per applied version.
type appliedLine struct {
	Instance      string             `json:"instance"`
	Config        cuecast.ConfigPath `json:"config"`
	Version       uint64             `json:"version"`
	Checksum      string             `json:"checksum"`
	Deleted       bool               `json:"deleted,omitempty"`
	LastKnownGood bool               `json:"last_known_good,omitempty"`
	AppliedAt     time.Time          `json:"applied_at"`
}

func watchRun(c *cobra.Command, env *Env, opts *WatchOptions) error {
	ctx := c.Context()
	cfg := cuecast.ConfigPath(opts.Config)
	if opts.LKG != "" {
		// As agent --dir: otherwise every version is applied "but not
		// saved", and a restart has nothing to start from.
		if err := makeLKGDir(filepath.Dir(opts.LKG)); err != nil {
			return fmt.Errorf("--lkg %s: %w", opts.LKG, err)
		}
	}
	rewatch := newRewatchSignal(cfg)
	opts.rewatch = rewatch.notify
	nc, cl, err := opts.connect(env, "watch", cfg.Namespace())
	if err != nil {
		return err
	}
	defer nc.Close()
	reportConnection(ctx, env, nc, "watch "+opts.Instance)
	var wopts []client.WatchOption
	if opts.LKG != "" {
		wopts = append(wopts, client.LastKnownGood(opts.LKG))
	}
	pace := &rewatchBackoff{pause: env.rewatchPause}
	for {
		again, err := watchOnce(ctx, env, opts, cl, cfg, wopts, rewatch.of(cfg), pace)
		if err != nil || !again {
			return err
		}
	}
}

// watchOnce runs one watcher of cfg until ctx ends (again false) or its
// variants change (again true: watch cfg anew, docs/VARIANTS.md, once pace
// allows; the watcher keeps what it holds, and reports, until then).
func watchOnce(ctx context.Context, env *Env, opts *WatchOptions, cl *client.Client, cfg cuecast.ConfigPath, wopts []client.WatchOption, rewatch <-chan struct{}, pace *rewatchBackoff) (again bool, err error) {
	w, err := cl.Watch(ctx, cfg, wopts...)
	if err != nil {
		return false, opts.watchError(cfg, err)
	}
	defer w.Stop()
	again, err = untilRewatch(ctx, w, rewatch, func(s client.Snapshot) error {
		pace.applied(s)
		return printApplied(env, opts.Instance, s)
	})
	if !again || err != nil {
		return again, err
	}
	fmt.Fprintf(env.IO.ErrOut, "watch %s: %s's variants changed; watching it again to pick this instance's variant\n", opts.Instance, cfg.Base())
	return pace.wait(ctx) == nil, nil
}

// untilRewatch hands each version w applies to apply until ctx ends or w
// stops (again false) or cfg's variants change (again true: watch it
// anew, docs/VARIANTS.md). watch and agent share it.
func untilRewatch(ctx context.Context, w *client.Watcher, rewatch <-chan struct{}, apply func(client.Snapshot) error) (again bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-rewatch:
			return true, nil
		case s, ok := <-w.Updates():
			if !ok {
				return false, nil
			}
			if err := apply(s); err != nil {
				return false, err
			}
		}
	}
}

// reportConnection says on stderr when the connection to NATS is lost and
// when it is back: while it is down the watcher keeps what it applied (and
// nothing else says so), and its help promises a lost connection is told.
func reportConnection(ctx context.Context, env *Env, nc *nats.Conn, who string) {
	say := func(format string, a ...any) {
		if ctx.Err() == nil && !nc.IsClosed() {
			fmt.Fprintf(env.IO.ErrOut, who+": "+format+"\n", a...)
		}
	}
	nc.SetDisconnectErrHandler(func(_ *nats.Conn, err error) {
		if err == nil {
			err = errors.New("disconnected")
		}
		say("lost the connection to NATS (%v); keeping what is applied, reconnecting", err)
	})
	nc.SetReconnectHandler(func(c *nats.Conn) { say("reconnected to NATS at %s", c.ConnectedUrlRedacted()) })
	if nc.IsConnected() {
		return
	}
	// Started while NATS is down (the client retries the first connect): the
	// first connection is not a reconnect, so it is watched for here.
	say("not connected to NATS yet; keeping the last-known-good version if any, retrying")
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for !nc.IsConnected() {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		say("connected to NATS at %s", nc.ConnectedUrlRedacted())
	}()
}

func printApplied(env *Env, instance string, s client.Snapshot) error {
	line := appliedLine{
		Instance:      instance,
		Config:        s.Config,
		Version:       s.Version,
		Checksum:      s.Checksum,
		Deleted:       s.Deleted,
		LastKnownGood: s.FromLastKnownGood,
		AppliedAt:     s.AppliedAt.UTC(),
	}
	enc := jsonLine(env.IO.Out)
	return enc.Encode(line)
}

// makeLKGDir makes dir, refusing a symlink on its path that another user
// (not this one, not root) owns: they could point it anywhere, and a
// watch run by root would then make directories, and write its file,
// wherever they chose.
func makeLKGDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	uid := os.Geteuid()
	cur := string(filepath.Separator)
	for _, name := range strings.Split(strings.TrimPrefix(abs, cur), string(filepath.Separator)) {
		cur = filepath.Join(cur, name)
		fi, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return err
		}
		if owner := ownerOf(fi); fi.Mode()&fs.ModeSymlink != 0 && owner != uid && owner != 0 {
			return fmt.Errorf("%s is a symlink owned by uid %d, who can point it anywhere; use a path without it", cur, owner)
		}
	}
	return os.MkdirAll(abs, 0o755)
}
