package tailer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/redact"
)

// Publisher stores versions. The distributor implements it.
type Publisher interface {
	// Latest returns the newest version of cfg, tombstones included, or an
	// error wrapping cuecast.ErrNotFound when it has none.
	Latest(ctx context.Context, cfg cuecast.ConfigPath) (cuecast.Version, error)
	// Publish stores v with content. It is create-only: v.Version must be
	// the latest plus one, else it returns an error wrapping
	// cuecast.ErrConflict; publishing an identical version again returns nil.
	Publish(ctx context.Context, v cuecast.Version, content []byte) error
}

// Deployer starts the rollout of a published version. The distributor
// implements it.
type Deployer interface {
	// Deploy starts v's rollout; it is idempotent.
	Deploy(ctx context.Context, v cuecast.Version) error
}

// ManifestRecorder is an optional capability of a Deployer: before the
// tailer publishes a commit's versions it hands over the manifest that
// commit compiled with, so a Deployer that resolves a version's rollout
// policy from its commit's manifest (serve's does) needs no second compile.
// It is called in commit order from the goroutine that publishes.
type ManifestRecorder interface {
	RecordManifest(commit string, m *compiler.Manifest)
}

// Lister is an optional capability of a Publisher: every config that has a
// version. When the tailer compiles a whole tree with nothing to diff against
// (after StartAt or an accepted rewrite) it tombstones the listed configs the
// tree no longer has; without a Lister it cannot know them.
type Lister interface {
	Configs(ctx context.Context) ([]cuecast.ConfigPath, error)
}

// Summary says what one Poll did.
type Summary struct {
	// Commits is how many commits were processed, rejected ones included.
	Commits int
	// Versions is how many versions were published, tombstones included;
	// Tombstones how many of them were tombstones.
	Versions   int
	Tombstones int
	// Rejected is how many commits did not compile.
	Rejected int
	// Cursor is the last commit processed after the poll.
	Cursor string
	// Halted is set when publishing is halted by a history rewrite.
	Halted bool
}

// Tailer follows one branch of one repository. Its methods are safe for
// concurrent use; polls never overlap.
type Tailer struct {
	cfg   Config
	src   *source
	store *store
	pub   Publisher
	dep   Deployer
	log   *slog.Logger
	wake  chan struct{}
	// cache keeps decoded trees and small blobs across commits: successive
	// commits share almost every tree.
	cache *gitfs.Cache
	// runaways is shared by every compile, so that a config whose
	// evaluation never finishes leaves at most one abandoned evaluation
	// running however many commits touch it (compiler.Runaways).
	runaways *compiler.Runaways

	mu sync.Mutex // serialises Poll and AcceptRewrite; guards the fields below
	// idx is the dependency index of the tree of commit idxCommit.
	idx       *compiler.Index
	idxCommit string
	// halted is the tip of the last rewrite logged, so Run logs it once.
	halted string
	// order gives the position of each commit of the current poll's batch;
	// a latest version made by a later commit of the batch means the stream
	// is ahead of the cursor (a lost or new cursor replaying history).
	order map[string]int

	// hw is the data directory's record of the version numbers taken;
	// verified is set once the first poll compared the stream with it (and
	// with the cursor's and the rollout records' numbers); gaps holds the
	// disagreement that stops publishing until Repair.
	hw       *highWater
	verified bool
	gaps     atomic.Pointer[InconsistentError]

	// afterPublish, when set (by tests), runs after each successful Publish
	// and before the cursor moves: the window a crash test aims at.
	afterPublish func(cuecast.Version)
}

// New checks that cfg.Repo is a Git repository with branch cfg.Branch (a
// remote is cloned into cfg.DataDir first), opens the cursor bucket in js,
// and returns a Tailer publishing through pub and deploying through dep (nil
// dep: versions are published, not deployed).
//
// It returns errors wrapping ErrInvalidConfig, ErrNotRepo (naming the path or
// URL), ErrNoBranch (naming the branch), ErrNoCommit (a StartAt the branch
// does not descend from), or the NATS error.
func New(ctx context.Context, cfg Config, js jetstream.JetStream, pub Publisher, dep Deployer) (*Tailer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	cfg = cfg.withDefaults()
	if pub == nil || js == nil {
		return nil, fmt.Errorf("new tailer: %w: a JetStream context and a Publisher are required", ErrInvalidConfig)
	}
	src, err := newSource(cfg)
	if err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	t := &Tailer{cfg: cfg, src: src, pub: pub, dep: dep, wake: make(chan struct{}, 1), cache: gitfs.NewCache(treeCacheSize),
		runaways: compiler.NewRunaways(0),
		log:      cfg.Logger.With("repo", cfg.Shown(), "branch", cfg.Branch)}
	r, err := src.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	if err := src.fetch(ctx, r); err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	tip, err := src.tip(r)
	if err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	hwPath := ""
	if cfg.DataDir != "" {
		hwPath = highWaterFile(cfg.DataDir, cfg.ID)
	}
	if t.hw, err = openHighWater(hwPath); err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	if t.store, err = openStore(ctx, js, cfg.ID, cfg.Replicas); err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	st, err := t.store.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("new tailer: %w", err)
	}
	if st.Repo != "" && (redact.URLs(st.Repo) != cfg.Shown() || st.Branch != cfg.Branch) {
		t.log.Warn("cursor was written for another repository or branch",
			"id", cfg.ID, "cursor_repo", st.Repo, "cursor_branch", st.Branch)
	}
	if cfg.StartAt != "" {
		from, err := t.onBranch(r, cfg.StartAt, tip)
		if err != nil {
			return nil, fmt.Errorf("new tailer: start at: %w", err)
		}
		switch {
		case st.rev != 0:
			t.log.Info("start-at ignored: the tailer already has a cursor", "start_at", cfg.StartAt, "cursor", st.Cursor)
		default:
			st.Repo, st.Branch, st.From = cfg.Shown(), cfg.Branch, from.String()
			if err := t.store.save(ctx, &st); err != nil {
				return nil, fmt.Errorf("new tailer: %w", err)
			}
		}
	}
	return t, nil
}

// onBranch resolves rev to a commit that tip is or descends from.
func (t *Tailer) onBranch(r *git.Repository, rev string, tip plumbing.Hash) (plumbing.Hash, error) {
	return onBranch(r, rev, tip, t.cfg.Branch)
}

// onBranch resolves rev to a commit that is tip or an ancestor of it, on
// branch.
func onBranch(r *git.Repository, rev string, tip plumbing.Hash, branch string) (plumbing.Hash, error) {
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("resolve %s: %w", rev, ErrNoCommit)
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", rev, ErrNoCommit)
	}
	if c.Hash == tip {
		return c.Hash, nil
	}
	tc, err := r.CommitObject(tip)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", tip, err)
	}
	ok, err := c.IsAncestor(tc)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("check ancestry of %s: %w", rev, err)
	}
	if !ok {
		return plumbing.ZeroHash, fmt.Errorf("commit %s is not on branch %s: %w", cuecast.ShortCommit(c.Hash.String()), branch, ErrNoCommit)
	}
	return c.Hash, nil
}

// treeCacheSize bounds the tree and blob cache (objects, not bytes).
const treeCacheSize = 8192

// Wake makes Run poll now instead of at the next interval. It never blocks.
func (t *Tailer) Wake() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Run polls every Config.Interval, and at once after Wake, until ctx is
// done; then it returns nil. Errors of a poll are logged, not returned: a
// missing branch or an unreachable remote may come back. A history rewrite
// is logged once, as an error naming both commits. The one error Run
// returns wraps cuecast.ErrFenced: the Publisher's store refused a version
// because another writer holds the fence now, and whatever this tailer
// read may be stale; the caller stops it (and starts one that reads its
// state afresh only once it holds the fence again).
func (t *Tailer) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-t.wake:
		}
		if _, err := t.Poll(ctx); err != nil && ctx.Err() == nil {
			if errors.Is(err, cuecast.ErrFenced) {
				return fmt.Errorf("tailer: %w", err)
			}
			var rw *RewriteError
			var ie *InconsistentError
			if !errors.As(err, &rw) && !errors.As(err, &ie) { // both are logged once where found
				t.log.Error("poll failed", "err", err)
			}
		}
		timer.Reset(t.cfg.Interval)
	}
}

// State returns the tailer's durable state as stored in JetStream.
func (t *Tailer) State(ctx context.Context) (State, error) {
	st, err := t.store.load(ctx)
	if err != nil {
		return State{}, fmt.Errorf("read state: %w", err)
	}
	return st, nil
}

// AcceptRewrite ends a halt caused by a history rewrite: the tailer resumes
// at commit sha (possibly abbreviated), which the branch tip must be or
// descend from. That commit compiles every config and publishes a version for
// each whose output differs from its latest (tombstones for configs it lacks,
// when the Publisher is a Lister), attributed to sha; the commits after it
// are then processed one by one. It works from another process than the one
// running Run: the state lives in JetStream.
//
// It returns errors wrapping ErrNotHalted, ErrNoCommit, or the Git or NATS
// error.
func (t *Tailer) AcceptRewrite(ctx context.Context, sha string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, tip, err := t.openTip(ctx)
	if err != nil {
		return fmt.Errorf("accept rewrite: %w", err)
	}
	h, err := t.onBranch(r, sha, tip)
	if err != nil {
		return fmt.Errorf("accept rewrite: %w", err)
	}
	st, err := t.store.load(ctx)
	if err != nil {
		return fmt.Errorf("accept rewrite: %w", err)
	}
	if st.Rewrite == nil {
		return fmt.Errorf("accept rewrite: %s: %w", t.cfg.Shown(), ErrNotHalted)
	}
	old := *st.Rewrite
	st.Cursor, st.Base, st.From, st.Rewrite = "", "", h.String(), nil
	if err := t.store.save(ctx, &st); err != nil {
		return fmt.Errorf("accept rewrite: %w", err)
	}
	t.idx, t.idxCommit, t.halted = nil, "", ""
	t.log.Warn("history rewrite accepted; resuming", "from", h.String(), "old_cursor", old.Cursor, "tip", old.Tip)
	t.Wake()
	return nil
}

func (t *Tailer) openTip(ctx context.Context) (*git.Repository, plumbing.Hash, error) {
	r, err := t.src.open(ctx)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	if err := t.src.fetch(ctx, r); err != nil {
		return nil, plumbing.ZeroHash, err
	}
	tip, err := t.src.tip(r)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	return r, tip, nil
}

// Poll fetches (for a remote), then processes every first-parent commit after
// the cursor, oldest first, and moves the cursor after each. A cancelled ctx
// stops it between two steps; whatever was published stays published and the
// next Poll carries on exactly where this one stopped.
//
// It returns an error wrapping ErrNotRepo, ErrNoBranch, ErrRewrite (a
// *RewriteError; Summary.Halted is set), ctx.Err(), or a Git, compiler, NATS
// or Publisher error. Commits that do not compile are not errors: they are
// counted in Summary.Rejected and recorded in the State.
func (t *Tailer) Poll(ctx context.Context) (Summary, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sum Summary
	r, tip, err := t.openTip(ctx)
	if err != nil {
		return sum, fmt.Errorf("poll: %w", err)
	}
	st, err := t.store.load(ctx)
	if err != nil {
		return sum, fmt.Errorf("poll: %w", err)
	}
	st.Repo, st.Branch = t.cfg.Shown(), t.cfg.Branch
	sum.Cursor = st.Cursor
	if !t.verified {
		// Once per process: a store that lost versions while it was down.
		err := t.verify(ctx, &st)
		var ie *InconsistentError
		if err != nil && !errors.As(err, &ie) {
			return sum, fmt.Errorf("poll: %w", err)
		}
		t.verified = true
	}
	if e := t.gaps.Load(); e != nil {
		return sum, fmt.Errorf("poll: %w", e)
	}
	// While halted, each poll still looks at the tip: when the old history
	// is pushed back (the cursor is again on it) the halt ends by itself.
	commits, err := t.pending(r, st, tip)
	var rw *RewriteError
	if errors.As(err, &rw) {
		if st.Rewrite == nil {
			st.Rewrite = &Rewrite{Cursor: rw.Cursor, Tip: rw.Tip, DetectedAt: time.Now().UTC()}
			if serr := t.store.save(ctx, &st); serr != nil {
				return sum, fmt.Errorf("poll: %w", serr)
			}
		}
		sum.Halted = true
		return sum, t.rewriteError(st.Rewrite)
	}
	if err != nil {
		return sum, fmt.Errorf("poll: %w", err)
	}
	if st.Rewrite != nil {
		old := *st.Rewrite
		st.Rewrite = nil
		if err := t.store.save(ctx, &st); err != nil {
			return sum, fmt.Errorf("poll: %w", err)
		}
		t.halted = ""
		t.log.Warn("history restored: the cursor is on the branch again; halt cleared", "cursor", st.Cursor, "tip", tip.String(), "rewritten_tip", old.Tip)
	}
	// Versions left undeployed by a run that stopped mid-batch go first.
	if err := t.deployPending(ctx, &st); err != nil {
		return sum, fmt.Errorf("poll: %w", err)
	}
	t.order = make(map[string]int, len(commits))
	for i, c := range commits {
		t.order[c.Hash.String()] = i
	}
	if err := t.run(ctx, r, &st, commits, &sum); err != nil {
		return sum, fmt.Errorf("poll: %w", err)
	}
	if err := t.deployPending(ctx, &st); err != nil {
		return sum, fmt.Errorf("poll: %w", err)
	}
	return sum, nil
}

func (t *Tailer) rewriteError(rw *Rewrite) error {
	err := &RewriteError{Repo: t.cfg.Shown(), Branch: t.cfg.Branch, Cursor: rw.Cursor, Tip: rw.Tip}
	if t.halted != rw.Tip {
		t.halted = rw.Tip
		t.log.Error("history rewrite: publishing halted", "cursor", rw.Cursor, "tip", rw.Tip, "err", err)
	}
	return err
}

// pending returns the commits to process, oldest first: the first-parent
// chain from tip back to the cursor (exclusive), or, with no cursor, back to
// State.From or the root (inclusive). When the tip descends from the cursor
// but not along first parents (the branch was fast-forwarded to a merge that
// has the old tip as a second parent) only the tip is processed: it is
// diffed against the last good commit, so nothing is lost.
func (t *Tailer) pending(r *git.Repository, st State, tip plumbing.Hash) ([]*object.Commit, error) {
	if st.Cursor == tip.String() {
		return nil, nil
	}
	stop := st.Cursor
	inclusive := false
	if stop == "" {
		stop, inclusive = st.From, true
	}
	var out []*object.Commit
	c, err := r.CommitObject(tip)
	if err != nil {
		return nil, fmt.Errorf("read tip %s: %w", tip, err)
	}
	for {
		if c.Hash.String() == stop {
			if inclusive {
				out = append(out, c)
			}
			break
		}
		out = append(out, c)
		if c.NumParents() == 0 {
			if stop == "" {
				break // the root: everything is new
			}
			return t.offChain(r, st, tip)
		}
		if c, err = c.Parent(0); err != nil {
			return nil, fmt.Errorf("read parent of %s: %w", cuecast.ShortCommit(out[len(out)-1].Hash.String()), err)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// offChain handles a stop commit that is not on tip's first-parent chain.
func (t *Tailer) offChain(r *git.Repository, st State, tip plumbing.Hash) ([]*object.Commit, error) {
	if st.Cursor == "" {
		return nil, fmt.Errorf("commit %s is not on the first-parent history of %s: %w", cuecast.ShortCommit(st.From), t.cfg.Branch, ErrNoCommit)
	}
	tc, err := r.CommitObject(tip)
	if err != nil {
		return nil, fmt.Errorf("read tip %s: %w", tip, err)
	}
	cc, err := r.CommitObject(plumbing.NewHash(st.Cursor))
	if err == nil {
		ok, err := cc.IsAncestor(tc)
		if err != nil {
			return nil, fmt.Errorf("check ancestry of %s: %w", cuecast.ShortCommit(st.Cursor), err)
		}
		if ok {
			return []*object.Commit{tc}, nil
		}
	} else if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("read cursor %s: %w", cuecast.ShortCommit(st.Cursor), err)
	}
	return nil, &RewriteError{Repo: t.cfg.Shown(), Branch: t.cfg.Branch, Cursor: st.Cursor, Tip: tip.String()}
}
