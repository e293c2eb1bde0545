package compiler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// tracedValue is one value of an explained config as traced by hand:
// where it must come from.
type tracedValue struct {
	path   string
	value  string // its JSON
	origin compiler.Origin
	target compiler.Origin // for a reference, where the chain ends
	tag    string          // "dim=value" when a variant injected it
	// at is the file:line of its first (deciding) position.
	at string
	// also are positions "file:line (role)" that must be listed besides.
	also []string
}

// tracedCase is a config of explainTraceRepo explained with a variant and
// an optional PATH.
type tracedCase struct {
	name    string
	config  cuecast.ConfigPath
	variant string // env=prod,region=eu
	// raw, when set, is ExplainOptions.Variant as given, unparsed.
	raw    map[string]string
	path   string
	values []tracedValue
	// err, when set, is the error Explain must give instead.
	err error
}

// explainTraceRepo holds the shapes of issue 33's hand trace: @tag fields
// that are and are not dimensions, an @tag in an imported package (which
// cue ignores), a dimension value no file names, @if files in the config
// and in a library, an @if after the package clause, structs read through
// references, defaults overridden. Its namespace has no schema, so that
// `cue export -t` computes the same output.
var explainTraceRepo = map[string]string{
	"cue.mod/module.cue": "module: \"test.example/repo\"\nlanguage: version: \"v0.17.0\"\n",
	"cuecast.cue": `package manifest

namespaces: web: {owners: ["team-web"], dimensions: {env: ["staging", "prod"], region: ["eu", "us"]}}
`,
	"lib/envlib/envlib.cue": `package envlib

Env: *"staging" | "prod" @tag(env,short=staging|prod)
Replicas: *1 | int
`,
	"lib/net/net.cue": `package net

Internal: ledger: {
	host: "ledger.svc"
	port: *80 | int
}
`,
	"lib/zone/zone.cue": `package zone

Zone: *"none" | string
`,
	"lib/zone/eu.cue": `@if(eu)

package zone

Zone: "eu-west-1"
`,
	// An @tag in an imported package: cue injects nothing there.
	"web/imported/imported.cue": `package imported

import "test.example/repo/lib/envlib"

env:      envlib.Env
replicas: envlib.Replicas
label:    "env-\(envlib.Env)"
`,
	"web/imported/prod.cue": `@if(prod)

package imported

size: "large"
`,
	// Tags that are not dimensions beside one that is.
	"web/tags/tags.cue": `package tags

port:  *8080 | int @tag(port,type=int)
debug: *false | bool @tag(debug,type=bool)
owner: *"nobody" | string @tag(owner)
env:   *"staging" | "prod" @tag(env,short=staging|prod)
tier:  env
host:  "svc-\(env).example.com"
_replicas: {staging: 1, prod: 4}
replicas: *_replicas[env] | int
`,
	// region=us: no file names us, compile publishes it all the same.
	"web/region/region.cue": `package region

zone: *"none" | string
`,
	"web/region/eu.cue": `@if(eu)

package region

zone: "eu-west-1"
`,
	// Both dimensions: env by a quoted @tag, region by a library's @if.
	"web/both/both.cue": `package both

import z "test.example/repo/lib/zone"

env:  string @tag("env",short=staging|prod)
zone: z.Zone
`,
	// An @if after the package clause is a plain attribute: no variants.
	"web/late/late.cue": `package late

@if(prod)

x: 1
`,
	// Structs read through references.
	"web/ledger/ledger.cue": `package ledger

import "test.example/repo/lib/net"

ledger: net.Internal.ledger
#D: {level: *"info" | "debug", n: *1 | int}
svc: #D & {level: "debug"}
let k = 3
scaled: k * 2
first: "a.example.com"
hosts: [first, "b"]
`,
}

var explainTraceCases = []tracedCase{
	{name: "imported tag is the default", config: "web/imported", variant: "env=prod", values: []tracedValue{
		{path: "env", value: `"staging"`, origin: compiler.OriginReference, target: compiler.OriginDefault,
			at: "lib/envlib/envlib.cue:3", also: []string{"web/imported/imported.cue:5 (reference)"}},
		{path: "replicas", value: `1`, origin: compiler.OriginReference, target: compiler.OriginDefault,
			at: "lib/envlib/envlib.cue:4", also: []string{"web/imported/imported.cue:6 (reference)"}},
		{path: "size", value: `"large"`, origin: compiler.OriginLiteral, at: "web/imported/prod.cue:5"},
	}},
	{name: "computed from an imported tag", config: "web/imported/env=prod", path: "label", values: []tracedValue{
		{path: "label", value: `"env-staging"`, origin: compiler.OriginComputed, at: "web/imported/imported.cue:7",
			also: []string{"lib/envlib/envlib.cue:3 (operand)"}},
	}},
	{name: "imported tag staging", config: "web/imported", variant: "env=staging", values: []tracedValue{
		{path: "env", value: `"staging"`, origin: compiler.OriginReference, target: compiler.OriginDefault, at: "lib/envlib/envlib.cue:3"},
		{path: "replicas", value: `1`, origin: compiler.OriginReference, target: compiler.OriginDefault, at: "lib/envlib/envlib.cue:4"},
	}},
	{name: "tags that are no dimension", config: "web/tags", variant: "env=prod", values: []tracedValue{
		{path: "debug", value: `false`, origin: compiler.OriginDefault, at: "web/tags/tags.cue:4"},
		{path: "env", value: `"prod"`, origin: compiler.OriginTag, tag: "env=prod", at: "web/tags/tags.cue:6",
			also: []string{"web/tags/tags.cue:6 (default)"}},
		{path: "host", value: `"svc-prod.example.com"`, origin: compiler.OriginComputed, at: "web/tags/tags.cue:8",
			also: []string{"web/tags/tags.cue:6 (operand)"}},
		{path: "owner", value: `"nobody"`, origin: compiler.OriginDefault, at: "web/tags/tags.cue:5"},
		{path: "port", value: `8080`, origin: compiler.OriginDefault, at: "web/tags/tags.cue:3"},
		{path: "replicas", value: `4`, origin: compiler.OriginDefault, at: "web/tags/tags.cue:10",
			also: []string{"web/tags/tags.cue:9 (operand)"}},
		{path: "tier", value: `"prod"`, origin: compiler.OriginReference, target: compiler.OriginTag, tag: "env=prod",
			at: "web/tags/tags.cue:6", also: []string{"web/tags/tags.cue:7 (reference)"}},
	}},
	{name: "tag default kept", config: "web/tags/env=staging", path: "env", values: []tracedValue{
		{path: "env", value: `"staging"`, origin: compiler.OriginTag, tag: "env=staging", at: "web/tags/tags.cue:6"},
	}},
	{name: "reference to a tag", config: "web/tags/env=staging", path: "tier", values: []tracedValue{
		{path: "tier", value: `"staging"`, origin: compiler.OriginReference, target: compiler.OriginTag, tag: "env=staging",
			at: "web/tags/tags.cue:6", also: []string{"web/tags/tags.cue:7 (reference)"}},
	}},
	{name: "no variant for a config with variants", config: "web/tags", err: compiler.ErrUnknownVariant},
	{name: "value no file names", config: "web/region", variant: "region=us", values: []tracedValue{
		{path: "zone", value: `"none"`, origin: compiler.OriginDefault, at: "web/region/region.cue:3"},
	}},
	{name: "value an @if file sets", config: "web/region/region=eu", values: []tracedValue{
		{path: "zone", value: `"eu-west-1"`, origin: compiler.OriginLiteral, at: "web/region/eu.cue:5",
			also: []string{"web/region/region.cue:3 (default)"}},
	}},
	{name: "region not a dimension of the config's values", config: "web/region", variant: "region=ap", err: compiler.ErrUnknownVariant},
	{name: "two dimensions, value no file names", config: "web/both", variant: "env=prod,region=us", values: []tracedValue{
		{path: "env", value: `"prod"`, origin: compiler.OriginTag, tag: "env=prod", at: "web/both/both.cue:5"},
		{path: "zone", value: `"none"`, origin: compiler.OriginReference, target: compiler.OriginDefault,
			at: "lib/zone/zone.cue:3", also: []string{"web/both/both.cue:6 (reference)"}},
	}},
	{name: "two dimensions, library @if", config: "web/both/env=staging/region=eu", path: "zone", values: []tracedValue{
		{path: "zone", value: `"eu-west-1"`, origin: compiler.OriginReference, target: compiler.OriginLiteral,
			at: "lib/zone/eu.cue:5", also: []string{"web/both/both.cue:6 (reference)", "lib/zone/zone.cue:3 (default)"}},
	}},
	{name: "a value that is no path segment", config: "web/both", raw: map[string]string{"env": "prod/region=us"}, err: compiler.ErrUnknownVariant},
	{name: "late @if selects nothing", config: "web/late", values: []tracedValue{
		{path: "x", value: `1`, origin: compiler.OriginLiteral, at: "web/late/late.cue:5"},
	}},
	{name: "late @if has no variants", config: "web/late", variant: "env=prod", err: compiler.ErrUnknownVariant},
	{name: "leaf of a struct reference", config: "web/ledger", path: "ledger.host", values: []tracedValue{
		{path: "ledger.host", value: `"ledger.svc"`, origin: compiler.OriginLiteral, at: "lib/net/net.cue:4",
			also: []string{"web/ledger/ledger.cue:5 (reference)"}},
	}},
	{name: "struct reference", config: "web/ledger", path: "ledger", values: []tracedValue{
		{path: "ledger.host", value: `"ledger.svc"`, origin: compiler.OriginLiteral, at: "lib/net/net.cue:4",
			also: []string{"web/ledger/ledger.cue:5 (reference)"}},
		{path: "ledger.port", value: `80`, origin: compiler.OriginDefault, at: "lib/net/net.cue:5",
			also: []string{"web/ledger/ledger.cue:5 (reference)"}},
	}},
	{name: "list element", config: "web/ledger", path: "hosts[0]", values: []tracedValue{
		{path: "hosts[0]", value: `"a.example.com"`, origin: compiler.OriginReference, target: compiler.OriginLiteral,
			at: "web/ledger/ledger.cue:10", also: []string{"web/ledger/ledger.cue:11 (reference)"}},
	}},
	{name: "leaf of a definition", config: "web/ledger", path: "svc.level", values: []tracedValue{
		{path: "svc.level", value: `"debug"`, origin: compiler.OriginLiteral, at: "web/ledger/ledger.cue:7",
			also: []string{"web/ledger/ledger.cue:6 (default)", "web/ledger/ledger.cue:7 (reference)"}},
	}},
	{name: "whole config", config: "web/ledger", values: []tracedValue{
		{path: "first", value: `"a.example.com"`, origin: compiler.OriginLiteral, at: "web/ledger/ledger.cue:10"},
		{path: "hosts[0]", value: `"a.example.com"`, origin: compiler.OriginReference, target: compiler.OriginLiteral,
			at: "web/ledger/ledger.cue:10", also: []string{"web/ledger/ledger.cue:11 (reference)"}},
		{path: "hosts[1]", value: `"b"`, origin: compiler.OriginLiteral, at: "web/ledger/ledger.cue:11"},
		{path: "ledger.host", value: `"ledger.svc"`, origin: compiler.OriginLiteral, at: "lib/net/net.cue:4",
			also: []string{"web/ledger/ledger.cue:5 (reference)"}},
		{path: "ledger.port", value: `80`, origin: compiler.OriginDefault, at: "lib/net/net.cue:5"},
		{path: "scaled", value: `6`, origin: compiler.OriginComputed, at: "web/ledger/ledger.cue:9"},
		{path: "svc.level", value: `"debug"`, origin: compiler.OriginLiteral, at: "web/ledger/ledger.cue:7"},
		{path: "svc.n", value: `1`, origin: compiler.OriginDefault, at: "web/ledger/ledger.cue:6",
			also: []string{"web/ledger/ledger.cue:7 (reference)"}},
	}},
}

// TestExplainTraced holds explain to values traced by hand (issue 33's
// shapes): each named value's origin, the file:line it is decided at and
// positions it must list; the explained output to what Compile publishes
// at the variant's path; and, where a cue command of the right version is
// at hand, each value to `cue export -t <the variant's tags>`. The text
// line and the JSON say the same.
func TestExplainTraced(t *testing.T) {
	dir := t.TempDir()
	writeRepo(t, dir, explainTraceRepo)
	ctx := context.Background()
	res, err := compiler.Compile(ctx, dir, compiler.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("the traced repo does not compile: %v", res.Errors)
	}
	cueCmd, _ := findCueCLI(t)
	checked := 0
	for _, tc := range explainTraceCases {
		t.Run(tc.name, func(t *testing.T) {
			variant, err := cuecast.ParseVariant(tc.variant)
			if err != nil {
				t.Fatal(err)
			}
			if len(variant) == 0 {
				variant = tc.raw
			}
			ex, err := compiler.Explain(ctx, dir, tc.config, compiler.ExplainOptions{Variant: variant, Path: tc.path})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("explain: %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("explain: %v", err)
			}
			out := cuecast.VariantPath(ex.Config, ex.Variant)
			published, ok := res.Outputs[out]
			if !ok {
				t.Fatalf("compile publishes no %s", out)
			}
			if string(published.JSON) != string(ex.JSON) {
				t.Errorf("explain's output differs from what compile publishes at %s:\n%s\n%s", out, ex.JSON, published.JSON)
			}
			var fromCue cue.Value
			if cueCmd != "" {
				fromCue = cueExport(t, cueCmd, dir, ex.Config, published.Tags)
				checked++
			}
			byPath := make(map[string]compiler.ExplainedValue)
			for _, ev := range ex.Values {
				byPath[ev.Path] = ev
				t.Log(ev)
				sameLine(t, ev)
				if fromCue.Exists() {
					want, err := fromCue.LookupPath(cue.ParsePath(ev.Path)).MarshalJSON()
					if err != nil || !sameJSON(t, ev.JSON, want) {
						t.Errorf("%s = %s, cue export -t %s gives %s (%v)", ev.Path, ev.JSON, strings.Join(published.Tags, " -t "), want, err)
					}
				}
			}
			for _, w := range tc.values {
				ev, ok := byPath[w.path]
				if !ok {
					t.Errorf("%s: not explained (got %v)", w.path, ex.Values)
					continue
				}
				var got []string
				for _, p := range ev.Positions {
					got = append(got, fmt.Sprintf("%s:%d (%s)", p.File, p.Line, p.Role))
				}
				switch {
				case string(ev.JSON) != w.value:
					t.Errorf("%s = %s, traced %s", w.path, ev.JSON, w.value)
				case ev.Origin != w.origin || ev.Target != w.target || ev.Tag != w.tag:
					t.Errorf("%s: origin %s (%s) %q, traced %s (%s) %q\n%s", w.path, ev.Origin, ev.Target, ev.Tag, w.origin, w.target, w.tag, ev)
				case len(got) == 0 || got[0] != w.at+" (value)":
					t.Errorf("%s: decided at %v, traced %s\n%s", w.path, got, w.at, ev)
				}
				for _, a := range w.also {
					if !slices.Contains(got, a) {
						t.Errorf("%s: %s not listed\n%s", w.path, a, ev)
					}
				}
			}
		})
	}
	if os.Getenv("CUECAST_CUE") != "" && checked == 0 {
		t.Error("no value was checked against cue export")
	}
}

// sameLine checks that the text line of a value says what its JSON does.
func sameLine(t *testing.T, ev compiler.ExplainedValue) {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var back compiler.ExplainedValue
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.String() != ev.String() {
		t.Errorf("the JSON of a value reads back as\n%s\nbut the line is\n%s", back, ev)
	}
	for _, p := range ev.Positions {
		if !strings.Contains(ev.String(), p.String()) {
			t.Errorf("the line lacks %s: %s", p, ev)
		}
	}
}

// cueExport is `cue export -t <tag>...` of config cp, as a value.
func cueExport(t *testing.T, cueCmd, dir string, cp cuecast.ConfigPath, tags []string) cue.Value {
	t.Helper()
	args := []string{"export", "--out", "json", "./" + string(cp)}
	for _, tag := range tags {
		args = append(args, "-t", tag)
	}
	cmd := exec.Command(cueCmd, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CUE_REGISTRY=none")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cue %s: %v", strings.Join(args, " "), err)
	}
	v := cuecontext.New().CompileBytes(out)
	if v.Err() != nil {
		t.Fatalf("cue %s gave %s: %v", strings.Join(args, " "), out, v.Err())
	}
	return v
}
