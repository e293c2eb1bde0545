package ci_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/gittest"
)

const flagSetFile = `package flags

schema: "cuecast.flags/v1"
flags: "new-checkout": {
	type: "bool"
	variants: {on: true, off: false}
	on:             true
	offVariant:     "off"
	defaultVariant: "off"
	salt:           "new-checkout"
	rules: [{
		id: "beta"
		clauses: [{attribute: "country", op: "in", values: ["NL"]}]
		variant: "on"
	}]
	fallthrough: rollout: weights: [{variant: "on", weight: 20000}, {variant: "off", weight: 80000}]
}
`

// TestCheckFlagRollouts: for a changed rollout the check reports the exact
// share of users whose variant changes (from every bucket position) beside
// what the weights require, and fails a change that moves more than that
// unless the flag says reshuffle: true.
func TestCheckFlagRollouts(t *testing.T) {
	const before = `weights: [{variant: "on", weight: 20000}, {variant: "off", weight: 80000}]`
	for _, tt := range []struct {
		name             string
		from, to         string
		changed, require float64
		reshuffled       bool
		failed           bool
		where            string
	}{
		{name: "raised", from: before, to: `weights: [{variant: "on", weight: 50000}, {variant: "off", weight: 50000}]`,
			changed: 0.30, require: 0.30, where: "fallthrough"},
		{name: "reordered", from: before, to: `weights: [{variant: "off", weight: 80000}, {variant: "on", weight: 20000}]`,
			changed: 0.40, require: 0, reshuffled: true, failed: true, where: "fallthrough"},
		{name: "reordered on purpose", from: before, to: `weights: [{variant: "off", weight: 80000}, {variant: "on", weight: 20000}]
	reshuffle: true`, changed: 0.40, require: 0, reshuffled: true, where: "fallthrough"},
		{name: "resalted", from: `salt:           "new-checkout"`, to: `salt:           "new-checkout-2"`,
			changed: 1 - (0.2*0.2 + 0.8*0.8), require: 0, reshuffled: true, failed: true, where: "fallthrough"},
		{name: "rule now a rollout", from: `variant: "on"
	}]`, to: `rollout: weights: [{variant: "on", weight: 90000}, {variant: "off", weight: 10000}]
	}]`, changed: 0.10, require: 0.10, where: "rules[beta]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := gittest.New(t)
			base := r.CommitFiles("flags", map[string]string{
				"cue.mod/module.cue": "module: \"example.com/f@v0\"\nlanguage: version: \"v0.17.0\"\n",
				"cuecast.cue":        "package manifest\n\nnamespaces: growth: owners: [\"team-growth\"]\n",
				"growth/flags/f.cue": flagSetFile,
			})
			r.Edit("growth/flags/f.cue", tt.from, tt.to)
			head := r.Commit(tt.name)
			rep := check(t, r, base, head)
			if len(rep.Risk.FlagRollouts) != 1 {
				t.Fatalf("flag rollouts: %+v, want one (errors %+v)", rep.Risk.FlagRollouts, rep.Errors)
			}
			f := rep.Risk.FlagRollouts[0]
			if f.Flag != "new-checkout" || f.Where != tt.where || math.Abs(f.Changed-tt.changed) > 1e-9 || math.Abs(f.Required-tt.require) > 1e-9 || f.Reshuffled != tt.reshuffled {
				t.Errorf("got %+v, want %s changed %.4f required %.4f reshuffled %v", f, tt.where, tt.changed, tt.require, tt.reshuffled)
			}
			if rep.Failed() != tt.failed {
				t.Errorf("Failed: %v, want %v", rep.Failed(), tt.failed)
			}
			text := textReport(t, rep)
			if !strings.Contains(text, "of users change variant (the weights require") {
				t.Errorf("text report does not show the rollout:\n%s", text)
			}
			if tt.failed && !strings.Contains(rep.Markdown(60000), "move more users than their weights require") {
				t.Errorf("markdown verdict does not say why it fails:\n%s", rep.Markdown(60000))
			}
		})
	}
}

// TestCheckStrictByConfigOverride: a config made strict by its own override
// in the manifest (a relaxed namespace) is listed as strict and raises the
// risk, as the rollout treats it (it was judged by its namespace alone).
func TestCheckStrictByConfigOverride(t *testing.T) {
	r := gittest.New(t)
	base := r.CommitFiles("base", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/s@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: web: {\n\towners: [\"team-web\"]\n\tconsistency: \"relaxed\"\n\tconfigs: site: consistency: \"strict\"\n}\n",
		"web/site/site.cue":  "package site\n\ntitle: \"a\"\n",
		"web/blog/blog.cue":  "package blog\n\ntitle: \"a\"\n",
	})
	r.Edit("web/site/site.cue", `"a"`, `"b"`)
	r.Edit("web/blog/blog.cue", `"a"`, `"b"`)
	head := r.Commit("titles")
	rep := check(t, r, base, head)
	if got := rep.Risk.Strict; len(got) != 1 || got[0] != "web/site" || rep.Risk.Level != "high" {
		t.Errorf("strict %v, level %s; want [web/site] and high (errors %+v)", got, rep.Risk.Level, rep.Errors)
	}
}

// TestCheckFlagSetNewFields: a field the flag schema defines (reshuffle,
// bucketBy, a description, a new flag or rule) is no new field to a
// service, whose evaluator knows them all, so it is not listed as one; a
// field added inside an object flag's value is, as the service reads that
// value itself.
func TestCheckFlagSetNewFields(t *testing.T) {
	r := gittest.New(t)
	base := r.CommitFiles("flags", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/f@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: growth: owners: [\"team-growth\"]\n",
		"growth/flags/f.cue": flagSetFile + `flags: theme: {
	type: "object"
	variants: {dark: {color: "black"}, light: {color: "white"}}
	on:             true
	offVariant:     "light"
	defaultVariant: "light"
	salt:           "theme"
}
`,
	})
	r.Edit("growth/flags/f.cue", `fallthrough: rollout: weights:`, `description: "the new checkout"
	reshuffle:   true
	fallthrough: rollout: bucketBy: "account"
	fallthrough: rollout: weights:`)
	r.Edit("growth/flags/f.cue", `dark: {color: "black"}`, `dark: {color: "black", contrast: "high"}`)
	head := r.Commit("reshuffle by account")
	rep := check(t, r, base, head)
	var got []string
	for _, b := range rep.Risk.NewFields {
		got = append(got, b.Path)
	}
	if want := []string{"flags.theme.variants.dark.contrast"}; !slices.Equal(got, want) {
		t.Errorf("new fields %q, want %q (errors %+v)", got, want, rep.Errors)
	}
	text := textReport(t, rep)
	for line := range strings.Lines(text) {
		if strings.Contains(line, "new field") && (strings.Contains(line, "bucketBy") || strings.Contains(line, "reshuffle")) {
			t.Errorf("text report warns of a field the evaluator knows: %s", line)
		}
	}
}
