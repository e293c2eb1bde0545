package mutator_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/termtext"
	"github.com/cuecast/cuecast/mutator"
)

// refFiles lists every file under r's .git/refs and .git's top level
// (HEAD, index, any .lock), so a test sees a ref created or left behind.
func refFiles(t *testing.T, r *gittest.Repo) []string {
	t.Helper()
	var out []string
	gitDir := filepath.Join(r.Dir, ".git")
	err := filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(gitDir, p)
		if d.IsDir() && rel != "." && rel != "refs" && !strings.HasPrefix(rel, "refs"+string(filepath.Separator)) {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestBranchNames: a branch name git's check-ref-format refuses is a bad
// request before anything is read or written, in every mode that takes
// one. A branch named main.lock blocked every later change to main (git
// took the ref file for main's lock), and HEAD or @ made refs git reads
// as something else.
func TestBranchNames(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	before := refFiles(t, r)
	m := mutator.New(r.Dir, mutator.Options{})
	for _, name := range []string{
		"main.lock", "a/b.lock", "a..b", "has space", "a~1", "a^2", "a:b", "a?", "a*", "a[b", `a\b`,
		"a\tb", "a\x7fb", ".hidden", "a/.b", "a/", "/a", "a//b", "a.", "a@{1}", "@", "HEAD",
		"../../../evil", "-x",
	} {
		for _, mode := range []mutator.Mode{mutator.ModeBranch, mutator.ModeCommit, mutator.ModePR} {
			req := set("payments/checkout", "currency", `"USD"`)
			req.Mode, req.Branch = mode, name
			_, err := m.Set(context.Background(), req)
			if !errors.Is(err, mutator.ErrBadRequest) || !strings.Contains(err.Error(), "branch") {
				t.Errorf("%s --branch %q: %v, want a bad request naming the branch", mode, name, err)
			}
		}
	}
	if after := refFiles(t, r); !slices.Equal(before, after) {
		t.Errorf("refused branches changed .git:\nbefore %q\nafter  %q", before, after)
	}
	// Names git accepts still work.
	req := set("payments/checkout", "currency", `"USD"`)
	req.Mode, req.Branch = mutator.ModeBranch, "cuecast/fix-1.2_@x"
	res, err := m.Set(context.Background(), req)
	if err != nil || res.Branch != "cuecast/fix-1.2_@x" {
		t.Fatalf("a valid branch name: %+v, %v", res, err)
	}
}

// keepsState returns a check that r is as it is now (repoState): a
// refused or failed set must leave it so.
func keepsState(t *testing.T, r *gittest.Repo) func(what string) {
	t.Helper()
	before := repoState(t, r)
	return func(what string) {
		t.Helper()
		if after := repoState(t, r); after != before {
			t.Errorf("%s changed the repository:\nbefore:\n%s\nafter:\n%s", what, before, after)
		}
	}
}

// repoState is everything a failed Set must leave as it was: every ref
// and HEAD with their content, the index's bytes, and each work-tree
// entry (a symbolic link by its target).
func repoState(t *testing.T, r *gittest.Repo) string {
	t.Helper()
	var b strings.Builder
	for _, name := range refFiles(t, r) {
		c, err := os.ReadFile(filepath.Join(r.Dir, ".git", name))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, ".git/%s %x\n", name, sha256.Sum256(c))
	}
	err := filepath.WalkDir(r.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.Dir, p)
		switch {
		case rel == ".git":
			return filepath.SkipDir
		case d.Type()&fs.ModeSymlink != 0:
			to, err := os.Readlink(p)
			fmt.Fprintf(&b, "%s -> %s\n", rel, to)
			return err
		case d.IsDir():
			fmt.Fprintf(&b, "%s/\n", rel)
			return nil
		}
		c, err := os.ReadFile(p)
		fmt.Fprintf(&b, "%s %x\n", rel, sha256.Sum256(c))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestSetWorkTreeUnwritable: when the work tree cannot take the change,
// Set fails and the branch, the index and the work tree are exactly as
// they were. The branch used to move first, then the write failed, and
// main was left at the new commit with the work tree and the index at the
// old one (git status showed a staged change undoing the commit). Here
// the file an override creates is a link into a directory that does not
// exist, which no user, root included, can write through.
func TestSetWorkTreeUnwritable(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	at := "payments/refunds/override.cue"
	if err := os.Symlink(filepath.Join(t.TempDir(), "missing", "override.cue"), filepath.Join(r.Dir, at)); err != nil {
		t.Fatal(err)
	}
	unchanged := keepsState(t, r)
	req := set("payments/refunds", "service.timeouts.read", `"3s"`)
	req.At = at
	_, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), at) {
		t.Errorf("set over an unwritable %s: %v, want an error naming it", at, err)
	}
	unchanged("a failed set")
}

// TestSetStagedEdit: an edit staged in the index to a file the change
// touches is an uncommitted edit too, even where the work-tree copy is
// back to the head's: Set refuses it (a bad request) and leaves the
// index as it was, where it used to write the index over it.
func TestSetStagedEdit(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	const file = "payments/refunds/refunds.cue"
	orig, err := os.ReadFile(filepath.Join(r.Dir, file))
	if err != nil {
		t.Fatal(err)
	}
	r.Edit(file, "window_days:            180", "window_days:            90")
	wt, err := r.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add(file); err != nil {
		t.Fatal(err)
	}
	r.Write(map[string]string{file: string(orig)})
	unchanged := keepsState(t, r)
	_, err = mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), set("payments/refunds", "auto_approve_max_minor", "20000"))
	if !errors.Is(err, mutator.ErrBadRequest) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "staged") {
		t.Errorf("set over a staged edit: %v, want a bad request naming %s and the staged edit", err, file)
	}
	unchanged("a refused set")
}

// TestSetAtNames: --at names a .cue file CUE loads, by its clean path. A
// name starting with _ or . was committed and ignored by CUE (explain
// still showed the old value); ./ or ../ in it failed reading the file
// (an internal error, a 500 from the API).
func TestSetAtNames(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	unchanged := keepsState(t, r)
	m := mutator.New(r.Dir, mutator.Options{})
	for _, at := range []string{
		"payments/refunds/_override.cue", "payments/refunds/.override.cue",
		"payments/refunds/./x.cue", "payments/refunds/../refunds/x.cue", "payments/refunds//x.cue",
	} {
		req := set("payments/refunds", "service.timeouts.read", `"3s"`)
		req.At = at
		_, err := m.Set(context.Background(), req)
		if !errors.Is(err, mutator.ErrBadRequest) || !strings.Contains(err.Error(), "--at "+at) || !strings.Contains(err.Error(), "name a .cue file") {
			t.Errorf("--at %s: %v, want a bad request naming it and what to name", at, err)
		}
	}
	unchanged("a refused set")
}

// TestSetTwoValuesForOneLiteral: a bulk change giving two values to one
// shared literal (ledger.port is lib/net/net.cue's, in both configs) is
// the request's mistake: a bad request naming the literal's file:line:col
// and both values, where it was an internal error with a byte offset.
func TestSetTwoValuesForOneLiteral(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	unchanged := keepsState(t, r)
	req := set("payments/checkout", "ledger.port", "7001")
	req.Configs = nil
	req.Set = []mutator.Assignment{
		{Config: "payments/checkout", Path: "ledger.port", Value: "7001"},
		{Config: "payments/refunds", Path: "ledger.port", Value: "7002"},
	}
	_, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), req)
	if !errors.Is(err, mutator.ErrBadRequest) || !strings.Contains(err.Error(), "lib/net/net.cue:13:") || !strings.Contains(err.Error(), "7001") || !strings.Contains(err.Error(), "7002") {
		t.Errorf("two values for one literal: %v, want a bad request naming lib/net/net.cue:13:N and both values", err)
	}
	unchanged("a refused set")
}

// TestDryRunNeedsNoBranch: a dry run only verifies (CHANGING.md §6), so it
// needs no mode and no branch checked out: it was refused without a mode
// (the API's dry_run alone) and on a detached HEAD.
func TestDryRunNeedsNoBranch(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	m := mutator.New(r.Dir, mutator.Options{})
	req := set("payments/checkout", "currency", `"USD"`)
	req.Mode, req.DryRun = "", true
	if res, err := m.Set(context.Background(), req); err != nil || res.Commit == "" || res.Branch != "" {
		t.Errorf("dry run without a mode: %+v, %v; want it verified and not landed", res, err)
	}
	head := r.Head()
	if err := os.WriteFile(filepath.Join(r.Dir, ".git", "HEAD"), []byte(head+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := keepsState(t, r)
	req.Mode = mutator.ModeCommit
	if res, err := m.Set(context.Background(), req); err != nil || res.Base != head || res.Branch != "" {
		t.Errorf("dry run on a detached HEAD: %+v, %v; want it verified on %s", res, err, head)
	}
	unchanged("a dry run")
}

// TestSetNoCommits: a repository without a commit is the caller's to fix
// (a bad request saying so), not "read HEAD: reference not found".
func TestSetNoCommits(t *testing.T) {
	t.Parallel()
	r := gittest.New(t)
	_, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), set("payments/checkout", "currency", `"USD"`))
	if !errors.Is(err, mutator.ErrBadRequest) || !strings.Contains(err.Error(), "has no commits yet") {
		t.Errorf("set in a repository without commits: %v, want a bad request saying it has none", err)
	}
}

// TestSetMessageSaysWhatCUERead: the commit message is the audit of who
// changed what, so a caller writes into it the reason alone. A path is
// written as CUE reads it: its comments and line breaks made the subject
// say what the caller liked ("set port // approved by security") or break
// in two. A reason's trailer-like lines stay in its paragraph, before the
// values and the mutator's own trailers, which Trailers and git read.
func TestSetMessageSaysWhatCUERead(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	m := mutator.New(r.Dir, mutator.Options{})
	req := set("payments/checkout", "max_amount_minor // approved by security\n", "6000000")
	req.Reason = "why\nSigned-off-by: Mallory <m@example.com>\n" + mutator.RequestedByTrailer + ": root <root@example.com>\n" + mutator.Trailer + ": by hand"
	res, err := m.Set(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Git.CommitObject(plumbing.NewHash(res.Commit))
	if err != nil {
		t.Fatal(err)
	}
	msg := c.Message
	subject, _, _ := strings.Cut(msg, "\n")
	if subject != "payments/checkout: set max_amount_minor to 6000000" || res.Values[0].Path != "max_amount_minor" || strings.Contains(msg, "security") {
		t.Errorf("value at %q, message:\n%s\nwant the path as CUE reads it", res.Values[0].Path, msg)
	}
	paras := strings.Split(strings.TrimRight(msg, "\n"), "\n\n")
	want := mutator.RequestedByTrailer + ": " + alice.String() + "\n" + mutator.Trailer + ": cuecast set"
	if last := paras[len(paras)-1]; last != want {
		t.Errorf("the message's last paragraph (git's trailers) is\n%s\nwant\n%s", last, want)
	}
	if tool, by := mutator.Trailers(msg); tool != "cuecast set" || by != alice.String() {
		t.Errorf("Trailers: %q, %q; want cuecast set, %s", tool, by, alice)
	}
}

// TestSetReasonControls: the reason is written into the commit message,
// which git log and every other reader of the repository print as it is;
// a control character in it (an escape sequence retitling or clearing the
// reader's terminal, a carriage return writing over the line before) is a
// bad request, and nothing is committed. A line ending CRLF is a line.
func TestSetReasonControls(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	unchanged := keepsState(t, r)
	m := mutator.New(r.Dir, mutator.Options{})
	for _, reason := range []string{"ok\x1b]0;pwned\x07", "ok\x1b[2J", "approved\rrejected", "a\x00b", "a\u0085b", "a\u202eb"} {
		req := set("payments/checkout", "max_amount_minor", "6000000")
		req.Reason = reason
		if _, err := m.Set(context.Background(), req); !errors.Is(err, mutator.ErrBadRequest) || !strings.Contains(err.Error(), "reason") {
			t.Errorf("reason %q: %v, want a bad request about the reason", reason, err)
		}
	}
	unchanged("a refused set")
	req := set("payments/checkout", "max_amount_minor", "6000000")
	req.Reason = "two lines\r\nand a\ttab"
	if _, err := m.Set(context.Background(), req); err != nil {
		t.Errorf("reason with CRLF and a tab: %v", err)
	}
}

// TestSetValueInjectsNoCUE: a value is one literal, and nothing of it
// becomes CUE of its own. Each of these either is refused as a bad request,
// committing nothing, or lands as the one string it spells: the field set
// has that value and the config no other field than before.
func TestSetValueInjectsNoCUE(t *testing.T) {
	t.Parallel()
	r := shapesRepo(t)
	m := mutator.New(r.Dir, mutator.Options{})
	ctx := context.Background()
	const cfg, file = "shapes/string-double", "shapes/string-double/string-double.cue"
	for _, c := range []struct {
		value string
		lands string // the string landed; "" for refused
	}{
		{`"eu" + "x"`, ""},
		{`"\(region)"`, ""},
		{`#"\#(region)"#`, ""},
		{"\"\"\"\n\t\\(region)\n\t\"\"\"", ""},
		{`'\(region)'`, ""},
		{"\"eu\"\nevil: 1", ""},
		{`"eu", evil: 1`, ""},
		{`{evil: 1}`, "{evil: 1}"},
		{`region`, "region"},
		{`eu"` + "\nevil: 1", `eu"` + "\nevil: 1"},
		{`eu\(region)`, `eu\(region)`},
		{"eu}\nevil: 1\nx: {", "eu}\nevil: 1\nx: {"},
		{`"eu\"\nevil: \"x"`, "eu\"\nevil: \"x"},
	} {
		head := r.Head()
		req := set(cfg, "region", c.value)
		res, err := m.Set(ctx, req)
		if c.lands == "" {
			if !errors.Is(err, mutator.ErrBadRequest) || r.Head() != head {
				t.Errorf("value %q: %v, main at %s; want a bad request and main at %s", c.value, err, r.Head(), head)
			}
			continue
		}
		if err != nil {
			t.Errorf("value %q: %v, want it landed as a string", c.value, err)
			continue
		}
		got, err := os.ReadFile(filepath.Join(r.Dir, file))
		if err != nil {
			t.Fatal(err)
		}
		out := compileOne(t, r, cfg)
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		if len(v) != 1 || v["region"] != c.lands || res.Values[0].Path != "region" {
			t.Errorf("value %q: the config is %s, want only region: %q; file:\n%s", c.value, out, c.lands, got)
		}
	}
}

// compileOne is cfg's compiled JSON in r's work tree.
func compileOne(t *testing.T, r *gittest.Repo, cfg cuecast.ConfigPath) []byte {
	t.Helper()
	res, err := compiler.Compile(context.Background(), r.Dir, compiler.Options{Configs: []cuecast.ConfigPath{cfg}})
	if err != nil || !res.OK() {
		t.Fatalf("compile %s: %v %v", cfg, err, res)
	}
	return res.Outputs[cfg].JSON
}

// TestSetMessageEscapesValues: a value's JSON in the commit message escapes
// only what JSON must, so a string value carried a C1 control (0x9b is CSI
// to an 8-bit terminal), DEL or a bidi override into the subject raw, for
// git log to hand a reader's terminal. They are written as \u escapes
// there, which JSON reads as the same string; the file holds the value.
func TestSetMessageEscapesValues(t *testing.T) {
	t.Parallel()
	r := shapesRepo(t)
	m := mutator.New(r.Dir, mutator.Options{})
	res, err := m.Set(context.Background(), set("shapes/string-double", "region", "\"eu\u009b2J\u202e\x7f\""))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Git.CommitObject(plumbing.NewHash(res.Commit))
	if err != nil {
		t.Fatal(err)
	}
	subject, _, _ := strings.Cut(c.Message, "\n")
	if want := `shapes/string-double: set region to "eu\u009b2J\u202e\u007f"`; subject != want {
		t.Errorf("subject %q, want %q", subject, want)
	}
	for _, line := range strings.Split(c.Message, "\n") {
		if termtext.Line(line) != line {
			t.Errorf("message line %q holds what a terminal obeys", line)
		}
	}
	if got := string(compileOne(t, r, "shapes/string-double")); got != `{"region":"eu`+"\u009b2J\u202e\x7f"+`"}` {
		t.Errorf("config %s, want the value itself", got)
	}
}

// TestSetMessageEscapesNames: the path a request names and the file the
// mutator edited are written into the commit message as given, so a
// label or a file name holding a C1 control (0x9b, CSI to an 8-bit
// terminal) or a bidi override reached git log's reader raw, where the
// values beside them were escaped. Every part of a value's line is now
// escaped alike.
func TestSetMessageEscapesNames(t *testing.T) {
	t.Parallel()
	r := shapesRepo(t)
	file := "shapes/quoted-label/odd\u009b2J\u202e.cue"
	r.Write(map[string]string{file: "package shape\n\nodd: {\"x\u009b2J\u202ey\": \"a\"}\n"})
	r.Commit("a label and a file name with controls")
	m := mutator.New(r.Dir, mutator.Options{})
	res, err := m.Set(context.Background(), set("shapes/quoted-label", "odd.\"x\u009b2J\u202ey\"", `"b"`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Git.CommitObject(plumbing.NewHash(res.Commit))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(c.Message, "\n") {
		if termtext.Line(line) != line {
			t.Errorf("message line %q holds what a terminal obeys", line)
		}
	}
	if !strings.Contains(c.Message, `x\u009b2J\u202ey`) || !strings.Contains(c.Message, `odd\u009b2J\u202e.cue`) {
		t.Errorf("message:\n%s\nwant the label and the file name with their controls as \\u escapes", c.Message)
	}
	if got := string(compileOne(t, r, "shapes/quoted-label")); !strings.Contains(got, `"x`+"\u009b2J\u202e"+`y":"b"`) {
		t.Errorf("config %s, want the label itself set to \"b\"", got)
	}
}
