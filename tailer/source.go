package tailer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/redact"
)

// source is where commits come from: a local repository read in place, or a
// bare clone of a remote in the data directory, fetched before each read.
type source struct {
	repo   string // the path or URL as configured, for messages: Config.Shown
	url    string // the URL to fetch from, secrets and all
	auth   transport.AuthMethod
	ca     []byte // CABundle
	dir    string // the repository on disk
	branch string
	remote bool
	ref    plumbing.ReferenceName // the ref holding the branch tip
}

const remoteName = "origin"

func newSource(c Config) (*source, error) {
	s := &source{repo: c.Shown(), url: c.Repo, branch: c.Branch, remote: c.Remote(), auth: c.Auth, ca: c.CABundle}
	if s.remote {
		s.dir = c.GitDir()
		s.ref = plumbing.NewRemoteReferenceName(remoteName, c.Branch)
		return s, nil
	}
	abs, err := filepath.Abs(c.Repo)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", c.Repo, err)
	}
	s.dir = abs
	s.ref = plumbing.NewBranchReferenceName(c.Branch)
	return s, nil
}

// open opens the repository afresh. Opening per poll is cheap and makes
// packs written by other processes (git gc, a push) visible, which a
// long-lived go-git handle would miss. A remote is cloned on first use.
func (s *source) open(ctx context.Context) (*git.Repository, error) {
	if s.remote {
		return s.openClone(ctx)
	}
	// gitfs.Open: a linked worktree's branches are in the main .git.
	r, err := gitfs.Open(s.dir)
	if errors.Is(err, ErrNotRepo) {
		return nil, fmt.Errorf("open repository %s: %w", s.repo, ErrNotRepo)
	}
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w: %v", s.repo, ErrNotRepo, err)
	}
	return withSmallCache(r)
}

// objectCacheSize replaces go-git's default 96 MiB object cache: the tailer
// keeps decoded trees in its own cache (gitfs.Cache), so go-git's would only
// duplicate them.
const objectCacheSize = 8 * cache.MiByte

func withSmallCache(r *git.Repository) (*git.Repository, error) {
	fst, ok := r.Storer.(*filesystem.Storage)
	if !ok {
		return r, nil
	}
	small, err := git.Open(filesystem.NewStorage(fst.Filesystem(), cache.NewObjectLRU(objectCacheSize)), nil)
	if err != nil {
		return nil, fmt.Errorf("reopen repository: %w", err)
	}
	return small, nil
}

func (s *source) openClone(ctx context.Context) (*git.Repository, error) {
	r, err := git.PlainOpen(s.dir)
	if err == nil {
		if err := s.pointAt(r); err != nil {
			return nil, err
		}
		return withSmallCache(r)
	}
	if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("open clone %s of %s: %w", s.dir, s.repo, err)
	}
	if err := os.MkdirAll(filepath.Dir(s.dir), 0o755); err != nil {
		return nil, fmt.Errorf("create clone directory: %w", err)
	}
	// Init, add the remote, fetch: the clone only ever holds the tracked
	// branch, under refs/remotes/origin/<branch>.
	tmp, err := os.MkdirTemp(filepath.Dir(s.dir), ".clone-*")
	if err != nil {
		return nil, fmt.Errorf("create clone directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	r, err = git.PlainInit(tmp, true)
	if err != nil {
		return nil, fmt.Errorf("init clone of %s: %w", s.repo, err)
	}
	if _, err := r.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{s.url}}); err != nil {
		return nil, fmt.Errorf("add remote %s: %w", s.repo, err)
	}
	if err := s.fetchInto(ctx, r); err != nil {
		return nil, err
	}
	// Only a complete first fetch becomes the clone, so a crash mid-clone
	// leaves nothing half-made behind.
	if err := os.Rename(tmp, s.dir); err != nil {
		return nil, fmt.Errorf("move clone into place: %w", err)
	}
	return git.PlainOpen(s.dir)
}

// pointAt makes the clone's remote the configured URL: the repository may
// have moved (same ID, new URL) since the clone was made.
func (s *source) pointAt(r *git.Repository) error {
	cfg, err := r.Config()
	if err != nil {
		return fmt.Errorf("read clone config %s: %w", s.dir, err)
	}
	rc, ok := cfg.Remotes[remoteName]
	if ok && len(rc.URLs) == 1 && rc.URLs[0] == s.url {
		return nil
	}
	cfg.Remotes[remoteName] = &config.RemoteConfig{Name: remoteName, URLs: []string{s.url}}
	if err := r.SetConfig(cfg); err != nil {
		return fmt.Errorf("point clone %s at %s: %w", s.dir, s.repo, err)
	}
	return nil
}

// fetch brings the remote's branch up to date; a no-op for a local source.
func (s *source) fetch(ctx context.Context, r *git.Repository) error {
	if !s.remote {
		return nil
	}
	return s.fetchInto(ctx, r)
}

func (s *source) fetchInto(ctx context.Context, r *git.Repository) error {
	spec := config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/%s/%s", s.branch, remoteName, s.branch))
	err := r.FetchContext(ctx, &git.FetchOptions{RemoteName: remoteName, RefSpecs: []config.RefSpec{spec}, Force: true, Auth: s.auth, CABundle: s.ca})
	var noMatch git.NoMatchingRefSpecError
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.As(err, &noMatch):
		return fmt.Errorf("fetch %s: branch %q: %w", s.repo, s.branch, ErrNoBranch)
	}
	return remoteError(ctx, "fetch", s.repo, redact.Error(err, s.url))
}

// remoteError sorts an error from talking to a remote into ErrAuth,
// ErrNotRepo or a plain failure; a cancelled ctx is returned as is.
func remoteError(ctx context.Context, verb, repo string, err error) error {
	switch {
	case errors.Is(err, ctx.Err()) && ctx.Err() != nil:
		return err
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		// x/crypto/ssh has no typed error for a rejected key.
		strings.Contains(err.Error(), "ssh: unable to authenticate"):
		return fmt.Errorf("%s %s: %w: %v", verb, repo, ErrAuth, err)
	case strings.Contains(err.Error(), "knownhosts: "):
		// x/crypto/ssh/knownhosts: an unknown or a changed host key.
		return fmt.Errorf("%s %s: %w: %v", verb, repo, ErrHostKey, err)
	case errors.Is(err, git.ErrRepositoryNotExists), errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%s %s: %w: %v", verb, repo, ErrNotRepo, err)
	default:
		return fmt.Errorf("%s %s: %w", verb, repo, err)
	}
}

// CheckRepo reports whether cfg's repository can be followed: a local one
// opens and has the branch, a remote one lists the branch among its refs. It
// writes nothing (a remote is asked for its refs, not cloned), so a command
// can check its inputs before it creates a data directory. The error wraps
// ErrInvalidConfig, ErrNotRepo, ErrNoBranch or ErrAuth, or is a failure to
// reach the remote.
func CheckRepo(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("check repository: %w", err)
	}
	cfg = cfg.withDefaults()
	src, err := newSource(cfg)
	if err != nil {
		return fmt.Errorf("check repository: %w", err)
	}
	if !src.remote {
		r, err := src.open(ctx)
		if err != nil {
			return err
		}
		tip, err := src.tip(r)
		if err != nil || cfg.StartAt == "" {
			return err
		}
		// A remote's commits are known only once cloned, by New.
		if _, err := onBranch(r, cfg.StartAt, tip, cfg.Branch); err != nil {
			return fmt.Errorf("start at: %w", err)
		}
		return nil
	}
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: remoteName, URLs: []string{cfg.Repo}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: cfg.Auth, CABundle: cfg.CABundle})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return fmt.Errorf("list refs of %s: empty repository, no branch %q: %w", cfg.Shown(), cfg.Branch, ErrNoBranch)
	}
	if err != nil {
		return remoteError(ctx, "list refs of", cfg.Shown(), redact.Error(err, cfg.Repo))
	}
	want := plumbing.NewBranchReferenceName(cfg.Branch)
	for _, ref := range refs {
		if ref.Name() == want {
			return nil
		}
	}
	return fmt.Errorf("list refs of %s: branch %q: %w", cfg.Shown(), cfg.Branch, ErrNoBranch)
}

// tip returns the commit the branch points at.
func (s *source) tip(r *git.Repository) (plumbing.Hash, error) {
	ref, err := r.Reference(s.ref, true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, fmt.Errorf("read branch %q of %s: %w", s.branch, s.repo, ErrNoBranch)
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read branch %q of %s: %w", s.branch, s.repo, err)
	}
	return ref.Hash(), nil
}
