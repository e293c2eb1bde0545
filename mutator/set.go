package mutator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/parser"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/publish"
	"github.com/cuecast/cuecast/internal/termtext"
)

// edits are the changes to one file: splices of literals and fields
// appended (Request.At).
type edits struct {
	splices []splice
	appends []string
}

// change is what planning a request found: the new content of each file
// and the values set.
type change struct {
	files  map[string][]byte
	before map[string][]byte // the head's content; nil for a new file
	values []Value
}

// unchanged says no file of the change differs from the head's (a new
// file always does).
func (ch *change) unchanged() bool {
	for name, b := range ch.files {
		if old := ch.before[name]; old == nil || !bytes.Equal(old, b) {
			return false
		}
	}
	return true
}

func (m *Mutator) set(ctx context.Context, req Request) (*Result, error) {
	r, err := gitfs.Open(m.dir)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", m.dir, err)
	}
	branch, base, prBase, err := m.target(r, req)
	// baseIsBranch: base is branch's own head (not HEAD's, for a new branch).
	baseIsBranch := false
	if ref, err := r.Storer.Reference(branch); err == nil && branch != "" && ref.Hash() == base {
		baseIsBranch = true
	}
	if err != nil {
		return nil, err
	}
	baseC, err := r.CommitObject(base)
	if err != nil {
		return nil, fmt.Errorf("read head commit %s: %w", base, err)
	}
	fsys, err := gitfs.New(r.Storer, baseC.TreeHash, baseC.Committer.When)
	if err != nil {
		return nil, fmt.Errorf("read head tree: %w", err)
	}
	ch, err := m.plan(ctx, fsys, base.String(), req)
	if err != nil {
		return nil, err
	}
	if err := m.checkPolicy(ctx, fsys, req, ch); err != nil {
		return nil, err
	}
	if ch.unchanged() {
		// Every value is already the one asked for: an empty commit
		// would carry nothing but a version and an audit line for it.
		return &Result{Base: base.String(), Values: ch.values, Unchanged: true}, nil
	}
	// After the policy: whether the caller may make this change at all is
	// the answer due first (403, not 400 for a missing remote).
	if req.Mode == ModePR {
		if _, err := publish.RemoteURL(r, m.opts.Remote); err != nil {
			return nil, badRequest("a pull request needs the remote %q to push its branch to: %v", m.opts.Remote, err)
		}
	}
	var wt *git.Worktree
	if !req.DryRun && req.Mode != ModePR {
		if wt, err = checkedOut(r, branch); err != nil {
			return nil, err
		}
		if wt != nil {
			// Early, to refuse before the check's work; under
			// index.lock, so that another writer's change on its way
			// into the work tree reads as the conflict it is.
			il, err := lockIndex(r)
			if err != nil {
				return nil, err
			}
			err = stillAt(r, branch, plumbing.NewHashReference(branch, base))
			if err == nil {
				err = cleanInWorkTree(r, wt, ch.before)
			}
			il.release()
			if err != nil {
				return nil, err
			}
		}
	}
	tree, err := writeTree(r.Storer, baseC.TreeHash, ch.files)
	if err != nil {
		return nil, fmt.Errorf("write tree: %w", err)
	}
	now := m.opts.Now()
	commit, err := writeCommit(r.Storer, &object.Commit{
		Author:       object.Signature{Name: req.Identity.Name, Email: req.Identity.Email, When: now},
		Committer:    object.Signature{Name: m.opts.Committer.Name, Email: m.opts.Committer.Email, When: now},
		Message:      message(req, ch.values),
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{base},
	})
	if err != nil {
		return nil, err
	}
	rep, err := ci.Check(ctx, m.dir, ci.Options{Base: base.String(), Head: commit.String(), Timeout: m.opts.Timeout, Logger: m.opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("check the change: %w", err)
	}
	if rep.Failed() {
		return nil, &CompileError{Errors: errorsAt(rep), Report: rep}
	}
	if err := checkScope(req, rep); err != nil {
		return nil, err
	}
	res := &Result{Base: base.String(), Commit: commit.String(), Values: ch.values, Report: rep}
	if req.DryRun {
		return res, nil
	}
	if req.Mode == ModePR && branch == "" {
		branch = plumbing.NewBranchReferenceName("cuecast/set-" + cuecast.ShortCommit(commit.String()))
	}
	// The branch must still be where the change was verified: old is the
	// head read before planning, not the branch as it is now, or a writer
	// outside this process landing in between would be overwritten.
	var old *plumbing.Reference
	if req.Mode != ModePR && baseIsBranch {
		old = plumbing.NewHashReference(branch, base)
	}
	// Another writer (another process: this one's requests are serialised)
	// may have moved or created the branch since it was read: moveRef
	// compares and moves under the ref's lock, or fails with ErrConflict.
	var il *indexLock
	if wt != nil {
		// The work tree follows the branch under index.lock; checked
		// again under it, the branch is where the change was made and
		// the files are as the change found them, so no other writer's
		// change is on its way in.
		if il, err = lockIndex(r); err != nil {
			return nil, err
		}
		defer il.release()
		if err := stillAt(r, branch, old); err != nil {
			return nil, err
		}
		if err := cleanInWorkTree(r, wt, ch.before); err != nil {
			return nil, err
		}
	}
	if err := land(r, wt, il, branch, commit, old, ch.files, ch.before); err != nil {
		return nil, err
	}
	res.Branch = branch.Short()
	err = m.publish(ctx, r, req, branch, prBase, res)
	var pe *pushError
	var pre *prError
	switch {
	case errors.As(err, &pre):
		// The branch was pushed for a pull request GitHub did not open:
		// left there, it would be a stray on the remote and here, and
		// every retry would leave another.
		pre.withdrawn, pre.gone = publish.Withdraw(ctx, r, m.opts.Remote, branch, m.opts.Auth)
	case !errors.As(err, &pe):
		return res, err
	}
	// The remote refused (it moved on, or the credentials do not reach
	// it): take the commit back, so that a failed request wrote nothing and
	// a retry starts again from the head.
	if uerr := undo(r, wt, branch, old, commit, ch.before, ch.files); uerr != nil {
		return nil, fmt.Errorf("%w; undoing the local commit failed too: %v", err, uerr)
	}
	return nil, err
}

// prError is a pull request GitHub did not open after its branch was
// pushed; Set then deletes the branch from the remote and undoes it here.
type prError struct {
	err       error
	withdrawn string // what became of the pushed branch (publish.Withdraw)
	gone      bool   // it was deleted
}

func (e *prError) Error() string {
	if !e.gone {
		return fmt.Sprintf("%v; %s; nothing else changed", e.err, e.withdrawn)
	}
	return fmt.Sprintf("%v; %s; nothing changed: send the request again", e.err, e.withdrawn)
}
func (e *prError) Unwrap() error { return e.err }

// pushError is a push the remote refused; Set then undoes the commit.
type pushError struct{ err error }

func (e *pushError) Error() string {
	return e.err.Error() + "; nothing changed: pull, and send the request again"
}
func (e *pushError) Unwrap() error { return e.err }

// land moves branch from old to commit and, when wt is the branch's work
// tree, brings the work tree and the index along (the caller holds il).
// When they cannot follow, the branch is moved back (compared with commit
// under its lock, as any move) and the error says so: a branch at the new
// commit over a work tree and index at the old one read as a staged
// change undoing the commit.
func land(r *git.Repository, wt *git.Worktree, il *indexLock, branch plumbing.ReferenceName, commit plumbing.Hash, old *plumbing.Reference, files, before map[string][]byte) error {
	if err := moveRef(r, branch, commit, old); err != nil {
		return err
	}
	if wt == nil {
		return nil
	}
	err := syncWorkTree(r, wt, files, before, il)
	if err == nil {
		return nil
	}
	back := plumbing.ZeroHash
	if old != nil {
		back = old.Hash()
	}
	if berr := moveRef(r, branch, back, plumbing.NewHashReference(branch, commit)); berr != nil {
		return fmt.Errorf("%w; moving %s back failed too (%v): it is at %s, the work tree and index at %s", err, branch.Short(), berr, cuecast.ShortCommit(commit.String()), cuecast.ShortCommit(back.String()))
	}
	return fmt.Errorf("%w; the commit was taken back: %s is where it was, nothing changed", err, branch.Short())
}

// undo moves branch back from commit to old (deleting it when it is new)
// and restores the files of the work tree that followed it.
func undo(r *git.Repository, wt *git.Worktree, branch plumbing.ReferenceName, old *plumbing.Reference, commit plumbing.Hash, before, files map[string][]byte) error {
	back := plumbing.ZeroHash // deletes the branch the change created
	if old != nil {
		back = old.Hash()
	}
	var il *indexLock
	if wt != nil {
		var err error
		if il, err = lockIndex(r); err != nil {
			return fmt.Errorf("move %s back: %w", branch.Short(), err)
		}
		defer il.release()
	}
	if err := moveRef(r, branch, back, plumbing.NewHashReference(branch, commit)); err != nil {
		return fmt.Errorf("move %s back: %w", branch.Short(), err)
	}
	if wt == nil {
		return nil
	}
	return syncWorkTree(r, wt, before, files, il)
}

// stillAt fails with ErrConflict when branch is no longer at old (nil:
// when it exists now).
func stillAt(r *git.Repository, branch plumbing.ReferenceName, old *plumbing.Reference) error {
	cur, err := r.Storer.Reference(branch)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		if old == nil {
			return nil
		}
		return conflictf("%s was deleted while the change was verified; nothing changed: send it again", branch.Short())
	case err != nil:
		return fmt.Errorf("read %s: %w", branch.Short(), err)
	case old == nil:
		return conflictf("branch %s was created while the change was verified; nothing changed: send it again", branch.Short())
	case cur.Hash() != old.Hash():
		return conflictf("%s moved while the change was verified; nothing changed: send it again", branch.Short())
	}
	return nil
}

// target returns the branch the commit goes on, the commit it is made on
// and, for a pull request, the branch it goes into.
func (m *Mutator) target(r *git.Repository, req Request) (branch plumbing.ReferenceName, base plumbing.Hash, prBase plumbing.ReferenceName, err error) {
	head, err := r.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		// HEAD names a branch with no commit yet: nothing to change.
		return "", plumbing.ZeroHash, "", badRequest("%s has no commits yet: commit the configs first", m.dir)
	}
	if err != nil {
		return "", plumbing.ZeroHash, "", fmt.Errorf("read HEAD of %s: %w", m.dir, err)
	}
	if req.DryRun && req.Branch == "" && !head.Name().IsBranch() {
		// A dry run only verifies, on HEAD's commit: no branch moves.
		return "", head.Hash(), "", nil
	}
	switch req.Mode {
	case ModeCommit:
		branch = head.Name()
		if req.Branch != "" {
			branch = plumbing.NewBranchReferenceName(req.Branch)
		}
		if !branch.IsBranch() {
			return "", plumbing.ZeroHash, "", badRequest("HEAD of %s is detached: check out the branch to commit on", m.dir)
		}
		ref, err := r.Reference(branch, true)
		if err != nil {
			return "", plumbing.ZeroHash, "", badRequest("branch %s: %v", branch.Short(), err)
		}
		return branch, ref.Hash(), "", nil
	case ModeBranch:
		branch = plumbing.NewBranchReferenceName(req.Branch)
		if ref, err := r.Reference(branch, true); err == nil {
			return branch, ref.Hash(), "", nil
		}
		return branch, head.Hash(), "", nil
	default: // ModePR; its remote is looked for after the policy (set)
		if !head.Name().IsBranch() {
			return "", plumbing.ZeroHash, "", badRequest("HEAD of %s is detached: check out the branch the pull request goes into", m.dir)
		}
		if req.Branch != "" {
			branch = plumbing.NewBranchReferenceName(req.Branch)
			if _, err := r.Reference(branch, false); err == nil {
				return "", plumbing.ZeroHash, "", badRequest("branch %s exists: a pull request starts a new one", req.Branch)
			}
		}
		return branch, head.Hash(), head.Name(), nil
	}
}

// plan explains every value the request reads, checks its expectations
// and computes the edited files.
func (m *Mutator) plan(ctx context.Context, fsys fs.FS, head string, req Request) (*change, error) {
	// Which configs each path is read in, in the order first named.
	var paths []string
	cfgsOf := map[string][]cuecast.ConfigPath{}
	for _, a := range append(slices.Clone(req.Set), req.Expect...) {
		if _, ok := cfgsOf[a.Path]; !ok {
			paths = append(paths, a.Path)
		}
		for _, c := range a.configs(req.Configs) {
			if !slices.Contains(cfgsOf[a.Path], c) {
				cfgsOf[a.Path] = append(cfgsOf[a.Path], c)
			}
		}
	}
	// values[cfg][path] is the explained leaf.
	values := map[cuecast.ConfigPath]map[string]compiler.ExplainedValue{}
	for _, p := range paths {
		want := normPath(p)
		err := compiler.ExplainEach(ctx, m.dir, cfgsOf[p], compiler.ExplainOptions{Variant: req.Variant, Path: p, FS: fsys, Timeout: m.opts.Timeout},
			func(cfg cuecast.ConfigPath, ex *compiler.Explanation, err error) error {
				if err != nil {
					return explainErr(err)
				}
				for _, ev := range ex.Values {
					if normPath(ev.Path) == want {
						if values[cfg] == nil {
							values[cfg] = map[string]compiler.ExplainedValue{}
						}
						values[cfg][p] = ev
						return nil
					}
				}
				return badRequest("%s: %s is a struct or a list, not a value: name one of its fields (cuecast explain %s %s)", cfg, p, cfg, p)
			})
		if err != nil {
			return nil, err
		}
	}
	cc := newContext()
	for _, e := range req.Expect {
		for _, cfg := range e.configs(req.Configs) {
			ev := values[cfg][e.Path]
			want, err := parseValue(cc, e.Value, ev.JSON)
			if err != nil {
				return nil, badRequest("%s: expect %s: %v", cfg, e.Path, err)
			}
			if !sameJSON(want.json, ev.JSON) {
				return nil, &ConflictError{Config: cfg, Path: e.Path, Expected: want.json, Current: ev.JSON, Head: head}
			}
		}
	}
	ch := &change{files: map[string][]byte{}, before: map[string][]byte{}}
	byFile := map[string]*edits{}
	for _, a := range req.Set {
		for _, cfg := range a.configs(req.Configs) {
			ev := values[cfg][a.Path]
			nv, err := parseValue(cc, a.Value, ev.JSON)
			if err != nil {
				return nil, badRequest("%s: %s: %v", cfg, a.Path, err)
			}
			v := Value{Config: cfg, Path: a.Path, Old: ev.JSON, New: nv.json, Origin: ev.Origin}
			pos, refusal := editable(cfg, ev)
			if refusal != nil && ev.Origin == compiler.OriginComputed && signedNumber(fsys, refusal.Positions) {
				pos, refusal = refusal.Positions, nil // -5 is a unary minus to CUE, a literal to people
			}
			switch {
			case refusal != nil && req.At == "":
				return nil, refusal
			case req.At != "":
				// An override wherever --at is given: a literal edited in
				// place instead would change every variant sharing it,
				// where the caller named one file for one variant. Over
				// a concrete value it conflicts, and the check says so.
				if err := atFile(cfg, req.At); err != nil {
					return nil, err
				}
				field, err := overrideField(a.Path, nv.text)
				if err != nil {
					return nil, badRequest("%s: %v", cfg, err)
				}
				e := fileEdits(byFile, req.At)
				e.appends = append(e.appends, field)
				v.Edited = compiler.Position{File: req.At, Role: compiler.RoleValue}
			default:
				for _, p := range pos {
					src, err := fs.ReadFile(fsys, p.File)
					if err != nil {
						return nil, fmt.Errorf("read %s: %w", p.File, err)
					}
					start, end, err := literalSpan(p.File, src, p.Line, p.Column, ev.Origin == compiler.OriginComputed)
					if err != nil {
						return nil, fmt.Errorf("%s: %s: %w", cfg, a.Path, err)
					}
					e := fileEdits(byFile, p.File)
					e.splices = append(e.splices, splice{start: start, end: end, text: nv.text})
				}
				v.Edited = pos[0]
			}
			ch.values = append(ch.values, v)
		}
	}
	for name, e := range byFile {
		src, err := fs.ReadFile(fsys, name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		ch.before[name] = src
		out := src
		if len(e.splices) > 0 {
			if out, err = apply(name, src, e.splices); err != nil {
				return nil, err
			}
		}
		if len(e.appends) > 0 {
			if out, err = appendFields(fsys, name, out, req.Variant, e.appends); err != nil {
				return nil, err
			}
		}
		ch.files[name] = out
	}
	// Where each appended field landed, now that the files are final.
	for i, v := range ch.values {
		if v.Edited.Line == 0 && v.Edited.File != "" {
			ch.values[i].Edited.Line = strings.Count(string(ch.files[v.Edited.File]), "\n")
			ch.values[i].Edited.Column = 1
		}
	}
	return ch, nil
}

// signedNumber reports whether the single position decides a value written
// as a signed number literal in the repo.
func signedNumber(fsys fs.FS, pos []compiler.Position) bool {
	if len(pos) != 1 || vendored(pos[0].File) {
		return false
	}
	src, err := fs.ReadFile(fsys, pos[0].File)
	if err != nil {
		return false
	}
	_, _, err = literalSpan(pos[0].File, src, pos[0].Line, pos[0].Column, true)
	return err == nil
}

func fileEdits(m map[string]*edits, name string) *edits {
	if m[name] == nil {
		m[name] = &edits{}
	}
	return m[name]
}

// normPath is a CUE path in one spelling, so "a.\"b\"" and "a.b" compare
// equal.
func normPath(p string) string {
	cp := cue.ParsePath(p)
	if cp.Err() != nil {
		return p
	}
	return cp.String()
}

// editable returns the literal positions to edit for ev, or why not.
func editable(cfg cuecast.ConfigPath, ev compiler.ExplainedValue) ([]compiler.Position, *RefusedError) {
	var pos []compiler.Position
	for _, p := range ev.Positions {
		if p.Role == compiler.RoleValue {
			pos = append(pos, p)
		}
	}
	refuse := func(kind, hint string) *RefusedError {
		return &RefusedError{Config: cfg, Path: ev.Path, Kind: kind, Positions: pos, Via: ev.Via, Hint: hint}
	}
	if len(pos) == 0 {
		return nil, refuse(string(ev.Origin), "no position in the repo decides it; change it by hand")
	}
	dir := string(cfg.Base())
	switch ev.Origin {
	case compiler.OriginLiteral:
		for _, p := range pos {
			if vendored(p.File) {
				return nil, refuse("schema", fmt.Sprintf("it is set by the vendored schema %s, which no config changes: change the schema upstream and vendor it again", p.File))
			}
		}
		return pos, nil
	case compiler.OriginDefault:
		for _, p := range pos {
			if vendored(p.File) || path.Dir(p.File) != dir {
				return nil, refuse("schema", fmt.Sprintf("it is the default of %s, shared by every config that uses it: set this config's own value with --at FILE (a file in %s; docs/VARIANTS.md, the specific layer), or change the default there by hand", p, dir))
			}
		}
		return pos, nil
	case compiler.OriginReference:
		if ev.Target == compiler.OriginTag {
			return nil, refuse("reference", fmt.Sprintf("it is read through %s from %s, where the variant's dimension value (%s) is injected through @tag: name another variant, or change the dimension's values in the manifest", strings.Join(ev.Via, ", "), pos[0], ev.Tag))
		}
		return nil, refuse("reference", fmt.Sprintf("it is read through %s from %s (%s there): change it where it is set, which changes every field reading it, or replace the reference by hand", strings.Join(ev.Via, ", "), pos[0], ev.Target))
	case compiler.OriginTag:
		return nil, refuse("tag", fmt.Sprintf("it is the variant's own dimension value (%s), injected through @tag: name another variant, or change the dimension's values in the manifest", ev.Tag))
	default:
		return nil, refuse(string(ev.Origin), fmt.Sprintf("an expression computes it: change one of its operands (cuecast explain %s %s lists them), or replace the expression by hand", cfg, ev.Path))
	}
}

// vendored reports whether a file is under cue.mod/: a schema shipped
// with cuecast or another module, not the repo's own.
func vendored(file string) bool { return strings.HasPrefix(file, "cue.mod/") }

// atFile checks that an override file is a .cue file in cfg's directory,
// where docs/VARIANTS.md puts a config's specific layer, named by its
// clean path (path.Dir cleans, so ./x.cue passed it and failed reading),
// and one CUE loads: it ignores names starting with _ or ., which would
// commit an override that changes nothing.
func atFile(cfg cuecast.ConfigPath, at string) error {
	dir := string(cfg.Base())
	switch base := path.Base(at); {
	case path.Clean(at) != at || !fs.ValidPath(at) || path.Dir(at) != dir || path.Ext(at) != ".cue":
		return badRequest("--at %s: name a .cue file in %s (the config's directory), like %s/override.cue", at, dir, dir)
	case strings.HasPrefix(base, "_") || strings.HasPrefix(base, "."):
		return badRequest("--at %s: CUE ignores a file whose name starts with _ or .: name a .cue file in %s (the config's directory), like %s/override.cue", at, dir, dir)
	}
	return nil
}

// appendFields adds fields at the end of src, the content of name (nil
// when the file is new: then it gets the package clause of its directory's
// files and, for a variant, an @if of the variant's values).
func appendFields(fsys fs.FS, name string, src []byte, variant map[string]string, fields []string) ([]byte, error) {
	var b strings.Builder
	if src == nil {
		pkg, err := packageOf(fsys, path.Dir(name))
		if err != nil {
			return nil, err
		}
		if len(variant) > 0 {
			dims := make([]string, 0, len(variant))
			for d := range variant {
				dims = append(dims, d)
			}
			sort.Strings(dims)
			vals := make([]string, len(dims))
			for i, d := range dims {
				vals[i] = variant[d]
			}
			fmt.Fprintf(&b, "@if(%s)\n\n", strings.Join(vals, " && "))
		}
		fmt.Fprintf(&b, "package %s\n", pkg)
	} else {
		b.Write(src)
		if len(src) > 0 && src[len(src)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	for _, f := range fields {
		b.WriteString("\n" + f + "\n")
	}
	out := []byte(b.String())
	if _, err := parser.ParseFile(name, out); err != nil {
		return nil, badRequest("--at %s: the override does not parse: %v", name, err)
	}
	return out, nil
}

// packageOf returns the package name of the .cue files in dir.
func packageOf(fsys fs.FS, dir string) (string, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range ents {
		if e.IsDir() || path.Ext(e.Name()) != ".cue" {
			continue
		}
		src, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return "", fmt.Errorf("read %s: %w", e.Name(), err)
		}
		f, err := parser.ParseFile(e.Name(), src, parser.PackageClauseOnly)
		if err == nil && f.PackageName() != "" {
			return f.PackageName(), nil
		}
	}
	return "", badRequest("%s has no .cue file with a package clause to copy", dir)
}

// message is the commit message: what, then why, then who and which tool.
func message(req Request, values []Value) string {
	var b strings.Builder
	configs := map[cuecast.ConfigPath]bool{}
	for _, v := range values {
		configs[v.Config] = true
	}
	switch {
	case req.Subject != "":
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(req.Subject))
	case len(values) == 1:
		fmt.Fprintf(&b, "%s\n", termEscape(fmt.Sprintf("%s: set %s to %s", values[0].Config, values[0].Path, values[0].New)))
	case len(configs) == 1:
		fmt.Fprintf(&b, "%s: set %d values\n", values[0].Config, len(values))
	default:
		fmt.Fprintf(&b, "set %d values in %d configs\n", len(values), len(configs))
	}
	fmt.Fprintf(&b, "\n%s\n\n", strings.TrimSpace(req.Reason))
	const listed = 20
	for i, v := range values {
		if i == listed {
			fmt.Fprintf(&b, "… and %d more\n", len(values)-listed)
			break
		}
		fmt.Fprintf(&b, "%s\n", termEscape(fmt.Sprintf("%s: %s: %s -> %s (%s at %s)", v.Config, v.Path, v.Old, v.New, v.Origin, v.Edited)))
	}
	fmt.Fprintf(&b, "\n%s: %s\n%s: %s\n", RequestedByTrailer, req.Identity, Trailer, req.Tool)
	return b.String()
}

// termEscape is a line of the commit message built from values, paths and
// file names: JSON escapes the C0 controls in a string value, and this the
// rest of what a terminal obeys (C1 controls, DEL, bidi overrides) in any
// part of the line, a file name or a label as much as a value, as \u
// escapes JSON reads as the same string, so that git log does not hand
// them to its reader.
func termEscape(s string) string {
	if termtext.Line(s) == s {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if c := string(r); termtext.Line(c) != c {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// publish pushes the branch and opens the pull request that req.Mode asks
// for.
func (m *Mutator) publish(ctx context.Context, r *git.Repository, req Request, branch, prBase plumbing.ReferenceName, res *Result) error {
	url, err := publish.RemoteURL(r, m.opts.Remote)
	if err != nil {
		return nil // nothing to push to: a local repository (target checked a PR's remote)
	}
	if err := publish.Push(ctx, r, m.opts.Remote, branch, m.opts.Auth); err != nil {
		return &pushError{err: err}
	}
	res.Pushed = true
	if req.Mode != ModePR {
		return nil
	}
	pr, err := m.pullRequest(ctx, r, url, branch, prBase, res)
	if err != nil {
		return &prError{err: err}
	}
	res.PullRequest = pr
	return nil
}

// pullRequest opens the pull request of ModePR for branch, pushed.
func (m *Mutator) pullRequest(ctx context.Context, r *git.Repository, url string, branch, prBase plumbing.ReferenceName, res *Result) (*PullRequest, error) {
	gh := m.opts.GitHub
	if gh.Owner == "" {
		var err error
		if gh.Owner, gh.Name, err = publish.Repo("", url); err != nil {
			return nil, badRequest("pull request: %v", err)
		}
	}
	c, err := r.CommitObject(plumbing.NewHash(res.Commit))
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", res.Commit, err)
	}
	body := strings.TrimSpace(strings.TrimPrefix(c.Message, cuecast.CommitSubject(c.Message))) +
		"\n\n" + res.Report.Markdown(60000)
	pr, err := publish.PullRequest(ctx, gh, branch.Short(), prBase.Short(), cuecast.CommitSubject(c.Message), body)
	if err != nil {
		return nil, err
	}
	return &PullRequest{Number: pr.GetNumber(), URL: pr.GetHTMLURL()}, nil
}
