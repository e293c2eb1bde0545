package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/termtext"
	"github.com/cuecast/cuecast/tailer"
)

// TailerOptions are the flags of `cuecast tailer status|accept-rewrite`.
type TailerOptions struct {
	NATS   string
	Output string
	ID     string
	// accept-rewrite: the commit to resume at, and the repository serve follows.
	To     string
	Repo   string
	Branch string
	Data   string
	Conn   ConnFlags
}

func newTailerCmd(env *Env, runF func(*cobra.Command, string, *TailerOptions) error) *cobra.Command {
	opts := &TailerOptions{}
	cmd := &cobra.Command{
		Use:   "tailer",
		Short: "Inspect the tailer, and resume it after a force push",
		Long: `The tailer turns each commit on the tracked branch into versions. Its state (the
last commit processed, commits rejected because they did not compile, a halt after
a history rewrite) lives in JetStream.

When the branch is force-pushed so that its tip no longer descends from the last
commit published, the tailer stops publishing and says so loudly; nothing is
republished until an operator chooses where to resume with accept-rewrite, or
pushes the old history back (the halt then clears by itself at the next poll).`,
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the tailer's cursor, rejected commits and any halt",
		Long: `Status shows where the tailer is on the branch serve follows (its cursor),
the commits it rejected (the newest five, with their first errors) and a halt
after a force push.

Exit status: 0 publishing; 4 halted by a history rewrite (text or json alike);
2 wrong usage, or no tailer of that --id has run against the server; 1 cuecast
failed (NATS).`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, "status", opts)
			}
			return tailerStatusRun(c, env, opts)
		},
	}
	registerOutput(status.Flags(), &opts.Output)
	accept := &cobra.Command{
		Use:   "accept-rewrite --to SHA --repo PATH",
		Short: "Resume publishing after a history rewrite, at a commit you choose",
		Long: `Accept-rewrite ends a halt caused by a force push. The tailer resumes at --to,
which the branch tip must be or descend from: that commit compiles every config and
publishes a version for each whose output differs from its latest (tombstones for
configs it lacks), attributed to it; the commits after it follow one by one.

Pass the same --repo, --branch and --data as serve (a remote repository is read
from serve's clone in --data). It works while serve runs.`,
		Example: `  cuecast tailer accept-rewrite --to 3f2a9c1 --repo ~/src/configs`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if opts.To == "" {
				return usageErrorf("pass --to with the commit to resume at (see `cuecast tailer status`)", "no commit to resume at")
			}
			if runF != nil {
				return runF(c, "accept-rewrite", opts)
			}
			return acceptRewriteRun(c, env, opts)
		},
	}
	accept.Flags().StringVar(&opts.To, "to", "", "commit to resume at")
	accept.Flags().StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	accept.Flags().StringVar(&opts.Repo, "repo", ".", "the repository serve follows")
	accept.Flags().StringVar(&opts.Branch, "branch", "main", "the branch serve follows")
	accept.Flags().StringVar(&opts.Data, "data", ".cuecast", "serve's data directory (where a remote repository is cloned)")
	for _, sub := range []*cobra.Command{status, accept} {
		sub.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "NATS server URL")
		sub.Flags().StringVar(&opts.ID, "id", "default", "the tailer's repository ID")
		opts.Conn.Register(sub.Flags())
	}
	cmd.AddCommand(status, accept)
	return cmd
}

func tailerStatusRun(c *cobra.Command, env *Env, opts *TailerOptions) error {
	ctx := c.Context()
	nc, err := dial(env, opts.NATS, "cuecast tailer", &opts.Conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	st, err := tailerState(ctx, nc, opts.ID)
	if err != nil {
		return err
	}
	if opts.Output == "json" {
		if err := writeJSON(env.IO.Out, st); err != nil {
			return err
		}
	} else {
		printTailerState(env.IO.Out, st)
	}
	// Halted is the exit status in either format: scripts read it.
	if st.Rewrite != nil {
		return &silentError{code: ExitHalted}
	}
	return nil
}

// printTailerState is shared with `cuecast status`, which shows a halt too.
func printTailerState(w io.Writer, st tailer.State) {
	if st.Rewrite != nil {
		fmt.Fprintf(w, "PUBLISHING HALTED: %s was rewritten (force push) at %s: tip %s does not descend from %s.\n",
			termtext.Line(st.Branch), st.Rewrite.DetectedAt.UTC().Format(time.RFC3339), cuecast.ShortCommit(st.Rewrite.Tip), cuecast.ShortCommit(st.Rewrite.Cursor))
		fmt.Fprintln(w, "  Nothing is published until: cuecast tailer accept-rewrite --to SHA (or the old history is pushed back)")
	}
	fmt.Fprintf(w, "tailer: %s %s at %s", termtext.Line(st.Repo), termtext.Line(st.Branch), cuecast.ShortCommit(st.Cursor))
	if st.Base != "" && st.Base != st.Cursor {
		fmt.Fprintf(w, " (last good %s)", cuecast.ShortCommit(st.Base))
	}
	fmt.Fprintln(w)
	if n := len(st.Rejected); n > 0 {
		fmt.Fprintf(w, "%d rejected commit(s), newest last:\n", n)
		for _, r := range st.Rejected[max(0, n-5):] {
			// The author, message and errors (file names in them) come from the
			// rejected commit: whoever pushed it chose their bytes.
			fmt.Fprintf(w, "  %s %s: %s (%d error(s))\n", cuecast.ShortCommit(r.Commit), termtext.Line(r.Author), termtext.Line(r.Message), r.Total)
			if len(r.Namespaces) > 0 {
				fmt.Fprintf(w, "    rejected in %s; its changes elsewhere were published\n", strings.Join(r.Namespaces, ", "))
			}
			for _, e := range r.Errors[:min(3, len(r.Errors))] {
				fmt.Fprintf(w, "    %s\n", termtext.Line(e.Error()))
			}
		}
	}
}

// acceptRewriteJSON is `tailer accept-rewrite --output json`: which tailer
// resumes, and at the commit given (--to), at serve's next poll.
type acceptRewriteJSON struct {
	Tailer    string `json:"tailer"`
	Repo      string `json:"repo"`
	Branch    string `json:"branch"`
	ResumesAt string `json:"resumes_at"`
}

func acceptRewriteRun(c *cobra.Command, env *Env, opts *TailerOptions) error {
	ctx := c.Context()
	// serve's streams and the tailer's bucket are serve's to create: on a
	// server where they are missing there is no halt to end, and opening
	// the tailer as serve does would create them there.
	nc, d, err := dialStreams(ctx, env, opts.NATS, "cuecast tailer", &opts.Conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	if _, err := tailerState(ctx, nc, opts.ID); err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("accept-rewrite: %w", err)
	}
	t, err := tailer.New(ctx, tailer.Config{Repo: opts.Repo, Branch: opts.Branch, DataDir: opts.Data, ID: opts.ID, Logger: env.Logger()}, js, d, nil)
	if err != nil {
		return repoError(err, "the credentials")
	}
	if err := t.AcceptRewrite(ctx, opts.To); err != nil {
		switch {
		case errors.Is(err, tailer.ErrNotHalted):
			return &UsageError{Err: err, Hint: "nothing to accept: `cuecast tailer status` shows it publishing"}
		case errors.Is(err, tailer.ErrNoCommit):
			return &UsageError{Err: err, Hint: "name the new tip or a commit before it (`cuecast tailer status` shows the tip seen)"}
		}
		return fmt.Errorf("accept-rewrite: %w", err)
	}
	if opts.Output == "json" {
		return writeJSON(env.IO.Out, acceptRewriteJSON{Tailer: opts.ID, Repo: (tailer.Config{Repo: opts.Repo}).Shown(), Branch: opts.Branch, ResumesAt: opts.To})
	}
	fmt.Fprintf(env.IO.Out, "accepted: the tailer resumes at %s; serve publishes from there at its next poll\n", opts.To)
	return nil
}

// tailerState reads the state of the tailer id by direct get, creating
// nothing: a server where no tailer, or none of that id, has run is wrong
// usage (--nats or --id), not an empty state.
func tailerState(ctx context.Context, nc *nats.Conn, id string) (tailer.State, error) {
	st, err := tailer.LoadState(ctx, distributor.NewDirectStream(nc, tailer.StateStream), id)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return st, &UsageError{Err: errors.New("no tailer has run against this NATS server"), Hint: "point --nats at serve's NATS (serve creates the tailer's state when it starts)"}
	case err != nil:
		return st, fmt.Errorf("read the tailer's state: %w", err)
	case st.Cursor == "" && st.Repo == "" && st.Rewrite == nil:
		return st, usageErrorf("leave out --id: serve's tailer is \"default\"", "no tailer %q has run against this NATS server", id)
	}
	return st, nil
}
