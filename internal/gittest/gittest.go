// Package gittest builds real Git repositories with go-git for tests.
package gittest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Repo is a non-bare repository in a temporary directory, on branch main.
type Repo struct {
	Dir  string
	Git  *git.Repository
	t    testing.TB
	when time.Time
	// Author signs the next commits; the zero value means Ada Lovelace.
	Author object.Signature
}

// New initialises an empty repository on branch main in t.TempDir().
func New(t testing.TB) *Repo {
	t.Helper()
	dir := t.TempDir()
	if _, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	}); err != nil {
		t.Fatalf("git init: %v", err)
	}
	// Opened again with refs written as git writes them (atomicRefs).
	st := filesystem.NewStorage(atomicRefs{osfs.New(filepath.Join(dir, ".git"))}, cache.NewObjectLRUDefault())
	r, err := git.Open(st, osfs.New(dir))
	if err != nil {
		t.Fatalf("git open: %v", err)
	}
	return &Repo{Dir: dir, Git: r, t: t, when: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// atomicRefs is the file system of a repository's .git in which HEAD and
// every ref are written as git writes them: to a lock file renamed over
// the ref. go-git otherwise truncates a ref and writes it again in place,
// and a process reading the branch at that moment (a serve starting
// while a test commits) found no branch at all. Without the read-and-write
// capability go-git writes a ref by Create, not in place.
type atomicRefs struct{ billy.Filesystem }

func (fs atomicRefs) Capabilities() billy.Capability {
	return billy.Capabilities(fs.Filesystem) &^ billy.ReadAndWriteCapability
}

func (fs atomicRefs) Create(name string) (billy.File, error) {
	if name != "HEAD" && !strings.HasPrefix(filepath.ToSlash(name), "refs/") {
		return fs.Filesystem.Create(name)
	}
	f, err := fs.Filesystem.Create(name + ".lock")
	if err != nil {
		return nil, err
	}
	return &renameOnClose{File: f, fs: fs.Filesystem, to: name}, nil
}

// renameOnClose is a lock file that replaces its ref when closed.
type renameOnClose struct {
	billy.File
	fs billy.Filesystem
	to string
}

func (f *renameOnClose) Close() error {
	if err := f.File.Close(); err != nil {
		return err
	}
	return f.fs.Rename(f.Name(), f.to)
}

// CopyDir copies a directory tree (such as configs-example) into the work tree.
func (r *Repo) CopyDir(src string) {
	r.t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(r.Dir, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		r.t.Fatalf("copy %s: %v", src, err)
	}
}

// Write writes files (path relative to the repo root ▶ content) into the work
// tree; an empty content with Delete semantics is not implied: use Remove.
func (r *Repo) Write(files map[string]string) {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

// Edit replaces the first old in the work tree's file name (a path relative
// to the repo root) with new. It fails the test when old is not there, so a
// fixture cannot drift silently.
func (r *Repo) Edit(name, old, new string) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(name)))
	if err != nil {
		r.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		r.t.Fatalf("edit %s: %q not found", name, old)
	}
	r.Write(map[string]string{name: strings.Replace(string(b), old, new, 1)})
}

// Remove deletes files or directories from the work tree.
func (r *Repo) Remove(names ...string) {
	r.t.Helper()
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(r.Dir, filepath.FromSlash(name))); err != nil {
			r.t.Fatal(err)
		}
	}
}

// Commit stages every change in the work tree (additions, edits, deletions)
// and commits it as r.Author (a fixed one by default) with a clock that advances one
// second per commit. It returns the commit hash.
func (r *Repo) Commit(msg string) string {
	r.t.Helper()
	wt, err := r.Git.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		r.t.Fatalf("git add: %v", err)
	}
	r.when = r.when.Add(time.Second)
	author := object.Signature{Name: "Ada Lovelace", Email: "ada@example.com"}
	if r.Author.Name != "" {
		author = r.Author
	}
	author.When = r.when
	h, err := wt.Commit(msg, &git.CommitOptions{AllowEmptyCommits: true, Author: &author})
	if err != nil {
		r.t.Fatalf("git commit: %v", err)
	}
	return h.String()
}

// CommitFiles writes files and commits them in one step.
func (r *Repo) CommitFiles(msg string, files map[string]string) string {
	r.t.Helper()
	r.Write(files)
	return r.Commit(msg)
}

// Status is git status of the work tree and index against HEAD.
func (r *Repo) Status() git.Status {
	r.t.Helper()
	wt, err := r.Git.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	st, err := wt.Status()
	if err != nil {
		r.t.Fatalf("git status: %v", err)
	}
	return st
}

// Head returns the hash main points at.
func (r *Repo) Head() string {
	r.t.Helper()
	ref, err := r.Git.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		r.t.Fatal(err)
	}
	return ref.Hash().String()
}

// LinearSince returns the commits of main after base, oldest first, and
// fails the test unless each has one parent, the one before it: the
// history of writers landing one at a time.
func (r *Repo) LinearSince(base string) []string {
	r.t.Helper()
	var out []string
	for h := plumbing.NewHash(r.Head()); h.String() != base; {
		c, err := r.Git.CommitObject(h)
		if err != nil {
			r.t.Fatalf("read commit %s on the way to %s: %v", h, base, err)
		}
		if c.NumParents() != 1 {
			r.t.Fatalf("commit %s has %d parents: the history since %s is not linear", h, c.NumParents(), base)
		}
		out = append(out, h.String())
		h = c.ParentHashes[0]
	}
	slices.Reverse(out)
	return out
}

// Landed returns the requests that made main's commits after base, oldest
// first, where byCommit maps the commit each successful request reported to
// its index. It fails the test unless the history is linear (LinearSince)
// and its commits are the successes' one each: what concurrent writers
// through one landing strip must leave.
func (r *Repo) Landed(base string, byCommit map[string]int) []int {
	r.t.Helper()
	var order []int
	for _, h := range r.LinearSince(base) {
		i, ok := byCommit[h]
		if !ok {
			r.t.Fatalf("commit %s on main is no request's", h)
		}
		order = append(order, i)
	}
	if len(order) != len(byCommit) {
		r.t.Fatalf("%d commits on main, %d successes", len(order), len(byCommit))
	}
	return order
}

// Bare creates a bare clone of the repository in t.TempDir() and adds it as
// remote "origin", for tests of remote sources.
func (r *Repo) Bare() string {
	r.t.Helper()
	dir := r.t.TempDir()
	if _, err := git.PlainClone(dir, true, &git.CloneOptions{URL: r.Dir}); err != nil {
		r.t.Fatalf("bare clone: %v", err)
	}
	if _, err := r.Git.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{dir}}); err != nil {
		r.t.Fatalf("add remote: %v", err)
	}
	return dir
}

// PushElsewhere commits files in another clone of bare and pushes them to
// its main, as a colleague would: the remote moves ahead of r, and r's
// next push of main is refused until r pulls. It returns the commit.
func (r *Repo) PushElsewhere(bare, msg string, files map[string]string) string {
	r.t.Helper()
	dir := r.t.TempDir()
	g, err := git.PlainClone(dir, false, &git.CloneOptions{URL: bare})
	if err != nil {
		r.t.Fatalf("clone %s: %v", bare, err)
	}
	other := &Repo{Dir: dir, Git: g, t: r.t, when: r.when.Add(time.Hour)}
	h := other.CommitFiles(msg, files)
	if err := g.Push(&git.PushOptions{}); err != nil {
		r.t.Fatalf("push from another clone: %v", err)
	}
	return h
}

// LinkedWorktree lays out what `git worktree add DIR` makes, by hand (go-git
// cannot add one), with head checked out detached: DIR/.git is a file
// naming <repo>/.git/worktrees/<name>, which holds HEAD and a commondir
// pointing back at the repository's .git, where the objects and branches
// are. It returns DIR.
func (r *Repo) LinkedWorktree(name, head string) string {
	r.t.Helper()
	dir := r.t.TempDir()
	admin := filepath.Join(r.Dir, ".git", "worktrees", name)
	if err := os.MkdirAll(admin, 0o755); err != nil {
		r.t.Fatal(err)
	}
	for file, body := range map[string]string{
		filepath.Join(admin, "HEAD"):      head + "\n",
		filepath.Join(admin, "commondir"): "../..\n",
		filepath.Join(admin, "gitdir"):    filepath.Join(dir, ".git") + "\n",
		filepath.Join(dir, ".git"):        "gitdir: " + admin + "\n",
	} {
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	return dir
}

// ShallowClone clones branch of the repository with depth 1 into
// t.TempDir(), as actions/checkout with fetch-depth: 1 does, then fetches
// each branch of also with depth 1 as origin/NAME. The clone has each
// tip's commit and none of their parents, so a merge base below the tips
// is missing. It returns the clone's directory.
func (r *Repo) ShallowClone(branch string, also ...string) string {
	r.t.Helper()
	dir := r.t.TempDir()
	g, err := git.PlainClone(dir, false, &git.CloneOptions{
		URL: "file://" + r.Dir, ReferenceName: plumbing.NewBranchReferenceName(branch), SingleBranch: true, Depth: 1,
	})
	if err != nil {
		r.t.Fatalf("shallow clone of %s: %v", branch, err)
	}
	for _, b := range also {
		spec := config.RefSpec("+refs/heads/" + b + ":refs/remotes/origin/" + b)
		if err := g.Fetch(&git.FetchOptions{RefSpecs: []config.RefSpec{spec}, Depth: 1}); err != nil {
			r.t.Fatalf("shallow fetch of %s: %v", b, err)
		}
	}
	return dir
}
