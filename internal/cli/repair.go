package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/tailer"
)

// RepairOptions are the flags of `cuecast repair`.
type RepairOptions struct {
	Repo   string
	Branch string
	Data   string
	Reason string
	Actor  string
	Output string
	Scale  ServeScale
}

// repairJSON is `repair --output json`: the commit the configs were rebuilt
// from, the configs renumbered above every number ever published, and the
// others published because their output changed.
type repairJSON struct {
	Commit     string               `json:"commit"`
	Renumbered []repairRenumberJSON `json:"renumbered"`
	Published  []repairPublishJSON  `json:"published"`
}

type repairRenumberJSON struct {
	Config cuecast.ConfigPath `json:"config"`
	// Stored is what the stream held (0: nothing), Published the highest
	// number ever taken, Version the new one.
	Stored    uint64 `json:"stored"`
	Published uint64 `json:"published"`
	Version   uint64 `json:"version"`
	Deleted   bool   `json:"deleted"`
}

type repairPublishJSON struct {
	Config  cuecast.ConfigPath `json:"config"`
	Version uint64             `json:"version"`
}

func newRepairCmd(env *Env, runF func(*cobra.Command, *RepairOptions) error) *cobra.Command {
	opts := &RepairOptions{}
	cmd := &cobra.Command{
		Use:   "repair --repo PATH --data DIR --reason TEXT",
		Short: "Rebuild configs whose version stream lost versions, numbered above all ever published",
		Long: `Serve refuses to publish when the CUECAST stream holds fewer versions of a config
than were published before: its files were truncated, damaged or deleted (a power
loss, a full disk, a restore of an old copy). Publishing the next number would give
a number that instances already hold a second meaning. Serve logs "version store
damaged", /readyz answers 503 and cuecast_versions_inconsistent is 1.

Repair is the way back. Stop serve first (it holds a lock on --data), then run
repair with serve's --repo, --branch and --data (and --nats for an external
server). A --secure serve's --data is opened in serve's own accounts, with the
users and TLS in --data/nats, on loopback only; a --data holding none of serve's
files (signing.nk, the highwater file, jetstream/) is refused. It compiles the tip of the branch; each config whose stream is behind gets
a version of the tip's content numbered one above the highest number ever
published (as recorded in the data directory's highwater file, the tailer's cursor
and the rollout records), after its remaining versions are purged; other configs
get a version only when their output changed. The cursor moves to the tip, every
new version is deployed (rolled out by serve's controller under the usual
policies), and each renumbered config gets an audit entry with --reason. Start
serve again afterwards. Repair also ends a history-rewrite halt: it resumes at
the tip.

Instances accept the new numbers because they are higher than anything they hold.
Versions between what the stream kept and the new number are gone: a rollback to
them is not possible.`,
		Example: `  cuecast repair --repo ~/src/configs --data /var/lib/cuecast --reason "stream lost after power cut"`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if opts.Reason == "" {
				return usageErrorf("say why with --reason; it goes to the audit stream", "no reason given")
			}
			if err := resolveActor(env, &opts.Actor); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return repairRun(c, env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Repo, "repo", ".", "the repository serve follows")
	cmd.Flags().StringVar(&opts.Branch, "branch", "main", "the branch serve follows")
	cmd.Flags().StringVar(&opts.Data, "data", ".cuecast", "serve's data directory")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why, for the audit stream (required)")
	cmd.Flags().StringVar(&opts.Actor, "as", "", "who is acting, for the audit trail (default $CUECAST_ACTOR, your Git identity, $USER, or the OS account@host)")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	opts.Scale.register(cmd.Flags())
	return cmd
}

func repairRun(c *cobra.Command, env *Env, opts *RepairOptions) error {
	ctx := c.Context()
	ext, err := opts.Scale.external(env)
	if err != nil {
		return err
	}
	emb, done, err := repairEmbedded(opts)
	if err != nil {
		return err
	}
	defer done()
	p, err := pipeline.Start(ctx, pipeline.Config{
		Repo:            opts.Repo,
		Branch:          opts.Branch,
		DataDir:         opts.Data,
		Listen:          "127.0.0.1:0", // only this process connects
		Policies:        pipeline.ManifestPolicies(opts.Repo, opts.Branch, opts.Data),
		Logger:          env.Logger(),
		External:        ext,
		EmbeddedConfig:  emb.conf,
		EmbeddedOptions: emb.connect,
	})
	if err != nil {
		return repoError(err, "the credentials")
	}
	defer p.Close()
	rep, err := p.Repair(ctx, opts.Actor, opts.Reason)
	if err != nil {
		if errors.Is(err, tailer.ErrInconsistent) {
			return fmt.Errorf("repair: %w", err)
		}
		return repoError(err, "the credentials")
	}
	w := env.IO.Out
	if opts.Output == "json" {
		out := repairJSON{Commit: rep.Commit, Renumbered: []repairRenumberJSON{}, Published: []repairPublishJSON{}}
		for _, r := range rep.Renumbered {
			out.Renumbered = append(out.Renumbered, repairRenumberJSON{Config: r.Config, Stored: r.Stored, Published: r.Published, Version: r.Version, Deleted: r.Deleted})
		}
		for _, v := range rep.Published {
			out.Published = append(out.Published, repairPublishJSON{Config: v.Config, Version: v.Version})
		}
		return writeJSON(w, out)
	}
	if len(rep.Renumbered) == 0 && len(rep.Published) == 0 {
		fmt.Fprintf(w, "nothing to repair at commit %s: the stream agrees with every record of published versions\n", cuecast.ShortCommit(rep.Commit))
		return nil
	}
	fmt.Fprintf(w, "repaired from commit %s\n", cuecast.ShortCommit(rep.Commit))
	for _, r := range rep.Renumbered {
		what := "content"
		if r.Deleted {
			what = "tombstone"
		}
		fmt.Fprintf(w, "  %s: stream held v%d, v%d was published; now v%d (%s), deployed, audited\n", r.Config, r.Stored, r.Published, r.Version, what)
	}
	for _, v := range rep.Published {
		fmt.Fprintf(w, "  %s: v%d published and deployed (output changed)\n", v.Config, v.Version)
	}
	return nil
}

// repairEmbedded is how repair opens serve's embedded store: in the
// accounts serve --secure keeps its streams in (account CUECAST, not the
// global one) when --data is a secure serve's, with the same users and
// namespaces, listening on loopback only; open otherwise. A store opened
// without them shows no CUECAST stream, and repair then rebuilt every
// config into a new one serve never reads. A --data without a store is
// refused: repair rebuilds serve's store, it does not start one.
func repairEmbedded(opts *RepairOptions) (emb embedded, done func(), err error) {
	done = func() {}
	if opts.Scale.NATS != "" {
		return emb, done, nil
	}
	// A lost jetstream/ is what repair is for; a directory with none of
	// serve's files is a typo.
	if !isServeData(opts.Data) {
		return emb, done, usageErrorf("pass serve's --data (the directory holding signing.nk, the highwater file and jetstream/)", "--data %s holds no serve store", opts.Data)
	}
	dir := filepath.Join(opts.Data, EmbeddedSecretsDir)
	if _, err := os.Stat(filepath.Join(dir, "nats.conf")); err != nil {
		return emb, done, nil // not a --secure serve's
	}
	so := &ServeOptions{Data: opts.Data, Listen: "127.0.0.1:0", Secure: true}
	prefix := natsconf.ServiceUser("")
	users, err := filepath.Glob(filepath.Join(dir, prefix+"*.password"))
	if err != nil {
		return emb, done, err
	}
	for _, u := range users {
		so.Namespaces = append(so.Namespaces, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(u), prefix), ".password"))
	}
	// Its own configuration file, so that serve's stays as serve wrote it.
	tmp, err := os.MkdirTemp("", "cuecast-repair-")
	if err != nil {
		return emb, done, fmt.Errorf("repair: %w", err)
	}
	done = func() { os.RemoveAll(tmp) }
	emb, err = secureEmbedded(so, dir, "127.0.0.1", filepath.Join(tmp, "nats.conf"))
	if err != nil {
		done()
		return emb, func() {}, err
	}
	return emb, done, nil
}

// isServeData says whether dir holds any of what serve keeps there: the
// store, the signing key, the highwater file of published numbers.
func isServeData(dir string) bool {
	for _, name := range []string{"jetstream", "signing.nk"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	hw, _ := filepath.Glob(filepath.Join(dir, "highwater.*"))
	return len(hw) > 0
}
