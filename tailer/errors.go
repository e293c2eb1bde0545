package tailer

import (
	"errors"
	"fmt"

	"github.com/cuecast/cuecast"
)

// Sentinel errors. Callers match them with errors.Is.
var (
	// ErrNotRepo: Config.Repo is not a Git repository (or a remote that
	// cannot be cloned). The error names the path or URL. It is
	// cuecast.ErrNotRepo.
	ErrNotRepo = cuecast.ErrNotRepo
	// ErrNoBranch: the tracked branch does not exist in the repository.
	// The error names the branch.
	ErrNoBranch = errors.New("no such branch")
	// ErrAuth: the remote wants credentials (Config.Auth) or refused them.
	ErrAuth = errors.New("remote authentication failed")
	// ErrHostKey: an ssh remote's host key is not the one its known_hosts
	// lists (unknown, or changed: possibly someone in between).
	ErrHostKey = errors.New("remote host key not trusted")
	// ErrRewrite: the branch tip does not descend from the cursor (a force
	// push). Nothing is published until AcceptRewrite, or until the old
	// history is pushed back. The error is a
	// *RewriteError naming both commits.
	ErrRewrite = errors.New("history rewritten")
	// ErrNotHalted: AcceptRewrite on a tailer that is not halted.
	ErrNotHalted = errors.New("tailer is not halted by a history rewrite")
	// ErrNoCommit: a SHA (Config.StartAt, AcceptRewrite's argument) that is
	// not a commit of the repository, or not on the branch's history.
	ErrNoCommit = errors.New("no such commit")
	// ErrInvalidConfig: a Config that cannot work (see Config.Validate).
	ErrInvalidConfig = errors.New("invalid tailer config")
)

// RewriteError reports that the tracked branch was rewritten: its tip Tip
// does not descend from Cursor, the last commit the tailer processed.
type RewriteError struct {
	Repo, Branch string
	Cursor, Tip  string
}

func (e *RewriteError) Error() string {
	return fmt.Sprintf("%s: branch %s was rewritten: tip %s does not descend from cursor %s; publishing is halted until `cuecast tailer accept-rewrite --to SHA`",
		e.Repo, e.Branch, cuecast.ShortCommit(e.Tip), cuecast.ShortCommit(e.Cursor))
}

// Unwrap makes errors.Is(err, ErrRewrite) true.
func (e *RewriteError) Unwrap() error { return ErrRewrite }
