package tailer

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/cuecast/cuecast/internal/redact"
)

// Default poll intervals.
const (
	DefaultLocalInterval  = time.Second
	DefaultRemoteInterval = 5 * time.Second
)

// Config configures a Tailer. The zero value of every field but Repo has a
// default; see each field.
type Config struct {
	// Repo is the repository to follow: a local path (a work tree or a bare
	// repository), or a remote URL (file://, http://, https://, ssh://, or
	// scp-like user@host:path) that is cloned into DataDir and fetched from.
	Repo string
	// Branch is the branch to follow; default "main".
	Branch string
	// Interval is the time between polls; default 1s for a local repo and
	// 5s for a remote one. Wake polls at once.
	Interval time.Duration
	// StartAt, when the tailer has no cursor yet, is the first commit to
	// process (backfill from there): a SHA, possibly abbreviated, that the
	// branch tip descends from. That commit compiles every config; the
	// commits after it are processed one by one. Empty means the branch's
	// root commit. Ignored once a cursor exists.
	StartAt string
	// ID names the repository in the cursor key (cursor.<ID> in the KV bucket
	// cuecast-tailer); 1-64 of [A-Za-z0-9_-]; default "default". Two tailers
	// with one ID over one NATS store would fight over one cursor.
	ID string
	// DataDir holds clones of remote repositories (DataDir/repos/<ID>),
	// required for a remote Repo, and the high-water file of the version
	// numbers published (DataDir/highwater.<ID>.jsonl; without DataDir only
	// the cursor and the rollout records keep them).
	DataDir string
	// Auth authenticates fetches from a remote: for GitHub over HTTPS,
	// &http.BasicAuth{Username: "x-access-token", Password: token} (package
	// github.com/go-git/go-git/v5/plumbing/transport/http); for ssh://, an
	// ssh.PublicKeys. Nil fetches anonymously (and, for ssh, asks the
	// SSH agent).
	Auth transport.AuthMethod
	// CABundle is PEM certificates that verify an https remote besides the
	// system's roots: a Git server behind a private CA.
	CABundle []byte
	// Workers and Timeout are passed to the compiler; zero means its
	// defaults.
	Workers int
	Timeout time.Duration
	// sharedTimeout is the compiler's SharedTimeout: tests give a config a
	// limit a loaded machine's manifest evaluation could miss too.
	sharedTimeout time.Duration
	// Replicas of the cursor bucket; default 1, 3 on a cluster.
	Replicas int
	// Logger receives the tailer's logs; default discards them.
	Logger *slog.Logger
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Remote reports whether Repo is a URL to clone rather than a local path.
func (c Config) Remote() bool {
	if strings.Contains(c.Repo, "://") {
		return true
	}
	// scp-like: user@host:path, with no slash before the colon.
	at, colon := strings.Index(c.Repo, "@"), strings.Index(c.Repo, ":")
	slash := strings.Index(c.Repo, "/")
	return at > 0 && colon > at && (slash < 0 || slash > colon)
}

// Shown is Repo as it is printed, logged and stored in the State: a
// remote's token or password taken out (https://***@github.com/…).
func (c Config) Shown() string {
	if !c.Remote() {
		return c.Repo
	}
	return redact.URLs(c.Repo)
}

// GitDir is the repository the tailer reads: Repo itself for a local
// repository, and for a remote one its bare clone, DataDir/repos/<ID> (ID
// defaulting to "default"), whose branch tip as of the last fetch is
// refs/remotes/origin/<Branch>. Other readers of the same commits (lag
// metrics, the manifest for rollout policies) should use it rather than
// rebuild the path.
func (c Config) GitDir() string {
	c = c.withDefaults()
	if !c.Remote() {
		return c.Repo
	}
	return filepath.Join(c.DataDir, "repos", c.ID)
}

// withDefaults returns c with every default filled in.
func (c Config) withDefaults() Config {
	if c.Branch == "" {
		c.Branch = "main"
	}
	if c.Interval == 0 {
		c.Interval = DefaultLocalInterval
		if c.Remote() {
			c.Interval = DefaultRemoteInterval
		}
	}
	if c.ID == "" {
		c.ID = "default"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports a Config that cannot work; the error wraps
// ErrInvalidConfig. It checks the values, not the repository.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Repo == "":
		return fmt.Errorf("%w: a repository path or URL is required", ErrInvalidConfig)
	case !idRE.MatchString(c.ID):
		return fmt.Errorf("%w: id %q: use 1-64 of [A-Za-z0-9_-]", ErrInvalidConfig, c.ID)
	case c.Interval < 0:
		return fmt.Errorf("%w: interval %s: want a positive duration", ErrInvalidConfig, c.Interval)
	case c.Replicas < 0 || c.Replicas > 5:
		return fmt.Errorf("%w: replicas %d: want 1-5", ErrInvalidConfig, c.Replicas)
	case c.Remote() && c.DataDir == "":
		return fmt.Errorf("%w: remote repository %s needs a data directory to clone into", ErrInvalidConfig, c.Repo)
	case strings.ContainsAny(c.Branch, " ~^:?*[\\") || strings.HasPrefix(c.Branch, "-"):
		return fmt.Errorf("%w: branch %q is not a valid branch name", ErrInvalidConfig, c.Branch)
	}
	return nil
}
