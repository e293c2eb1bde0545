package mutator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/mutator"
)

// policyRepo has a namespace per rule of the manifest's changes: policy,
// and an importer whose config reads the exporter's.
func policyRepo(t *testing.T) *gittest.Repo {
	t.Helper()
	r := gittest.New(t)
	r.CommitFiles("policy", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/pol@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue": `package manifest

namespaces: {
	open: owners: ["o"]
	paths: {owners: ["p"], changes: paths: ["flags.*.on", "limits...", "list[*]"]}
	prs: {owners: ["r"], changes: land: "pr"}
	exporter: owners: ["e"]
	importer: {owners: ["i"], import_configs_from: ["exporter"]}
}
`,
		"open/app/app.cue":           "package app\n\nport: 8080\n",
		"paths/app/app.cue":          "package app\n\nflags: beta: on: false\nflags: kill: false\nlimits: rps: 10\nlist: [1, 2]\nport: 8080\n",
		"prs/app/app.cue":            "package app\n\nport: 8080\n",
		"exporter/base/base.cue":     "package base\n\nport: 8080\n",
		"importer/app/app.cue":       "package app\n\nimport \"example.com/pol/exporter/base\"\n\nport: base.port\n",
		"exporter/other/other.cue":   "package other\n\nport: 1\n",
		"lib/net/net.cue":            "package net\n\nports: http: 8080\n",
		"open/rootuser/rootuser.cue": "package rootuser\n\nimport m \"example.com/pol:manifest\"\n\nm.namespaces.open\n",
		"open/libuser/libuser.cue":   "package libuser\n\nimport \"example.com/pol/lib/net\"\n\nnet.ports\n",
	})
	return r
}

// TestPolicy: each rule of the manifest's changes: entry, and
// Request.Namespaces, refuses what it does not allow with a *PolicyError
// naming the rule, before anything is committed, and lets the rest through.
func TestPolicy(t *testing.T) {
	t.Parallel()
	r := policyRepo(t)
	m := mutator.New(r.Dir, mutator.Options{})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		req  mutator.Request
		rule string // "" when allowed
	}{
		{"paths allows a matching path", set("paths/app", "flags.beta.on", "true"), ""},
		{"paths allows below a ... pattern", set("paths/app", "limits.rps", "20"), ""},
		{"paths allows an index by [*]", set("paths/app", "list[1]", "3"), ""},
		{"paths refuses any other path", set("paths/app", "port", "9090"), "paths"},
		// CUE reads a path as an expression: the comment is none of it,
		// so this is flags.kill, which flags.*.on does not allow, however
		// the text after // is spelled.
		{"paths refuses a path whose comment spells an allowed one", set("paths/app", "flags.kill //.on", "true"), "paths"},
		{"paths allows an allowed path spelled another way", set("paths/app", "flags . beta .on", "false"), ""},
		{"land pr refuses a commit", set("prs/app", "port", "9090"), "land"},
		{"land pr refuses a branch", withMode(set("prs/app", "port", "9090"), mutator.ModeBranch, "b"), "land"},
		{"land pr allows a dry run", dry(set("prs/app", "port", "9090")), ""},
		// Who may change what is answered first: a pull request the
		// policy refuses is refused as such, not for the remote this repo
		// lacks (the API answered 400 where 403 was due).
		{"paths refuses a pull request before its remote is looked for", withMode(set("paths/app", "port", "9090"), mutator.ModePR, ""), "paths"},
		{"namespaces refuse a pull request before its remote is looked for", scoped(withMode(set("paths/app", "flags.beta.on", "true"), mutator.ModePR, ""), "open"), "namespace"},
		{"no entry allows every path", set("open/app", "port", "9090"), ""},
		{"namespaces refuse a config outside them", scoped(set("paths/app", "flags.beta.on", "false"), "open"), "namespace"},
		{"namespaces refuse a change reaching another namespace's output", scoped(set("exporter/base", "port", "9091"), "exporter"), "namespace"},
		{"namespaces allow their own configs", scoped(set("exporter/other", "port", "2"), "exporter"), ""},
		{"namespaces refuse an edit of a library", scoped(set("open/libuser", "http", "8081"), "open"), "namespace"},
		// The manifest package, and so the policy, lives at the root: no
		// caller, the operator included, edits a file there this way.
		{"no caller edits a file at the repo root", set("open/rootuser", "owners[0]", `"x"`), "manifest"},
		{"no namespace edits a file at the repo root", scoped(set("open/rootuser", "owners[0]", `"x"`), "open"), "manifest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			head := r.Head()
			res, err := m.Set(ctx, c.req)
			if c.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if moved := r.Head() != head; moved == c.req.DryRun {
					t.Errorf("main moved: %v, want %v", moved, !c.req.DryRun)
				}
				if !c.req.DryRun && res.Commit != r.Head() {
					t.Errorf("main at %s, want the change %s", r.Head(), res.Commit)
				}
				return
			}
			var pe *mutator.PolicyError
			if !errors.As(err, &pe) || !errors.Is(err, mutator.ErrForbidden) || pe.Rule != c.rule {
				t.Fatalf("got %v, want a policy error of rule %s", err, c.rule)
			}
			if r.Head() != head {
				t.Errorf("main moved to %s after a refusal", r.Head())
			}
			t.Log(err)
		})
	}
	// The importer saw the exporter's change when nothing limited it.
	if _, err := m.Set(ctx, set("exporter/base", "port", "9091")); err != nil {
		t.Fatalf("unscoped change reaching the importer: %v", err)
	}
}

func dry(req mutator.Request) mutator.Request { req.DryRun = true; return req }

func scoped(req mutator.Request, ns ...string) mutator.Request { req.Namespaces = ns; return req }

func withMode(req mutator.Request, mode mutator.Mode, branch string) mutator.Request {
	req.Mode, req.Branch = mode, branch
	return req
}

// TestPolicyPaths: the patterns of changes.paths, element by element.
func TestPolicyPaths(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"server.port", "server.port", true},
		{"server.port", "server.host", false},
		{"server.port", "server.port.x", false},
		{"server...", "server.port", true},
		{"server...", "server", true},
		{"server...", "servers.port", false},
		{`flags.*.on`, `flags."new-checkout".on`, true},
		{`flags."new-checkout".on`, `flags.new_checkout.on`, false},
		{`flags."a".on`, `flags.a.on`, true},
		{`w[*].weight`, `w[3].weight`, true},
		{`w[0].weight`, `w[1].weight`, false},
		{`*`, `a.b`, false},
		{`...`, `a.b`, true},
	} {
		got, err := mutator.PathAllowed([]string{c.pattern}, c.path)
		if err != nil || got != c.want {
			t.Errorf("%s matches %s: %v, %v; want %v", c.pattern, c.path, got, err, c.want)
		}
	}
	for _, bad := range []string{`a.`, `a["x`, `a[x]`, `"a`} {
		if _, err := mutator.PathAllowed([]string{bad}, "a"); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	if _, err := mutator.PathAllowed([]string{"a"}, "a.*"); err == nil {
		t.Error("a path with * accepted as a path")
	}
}
