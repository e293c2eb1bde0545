package tailer_test

import (
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/tailer"
)

// variantRepo: namespace pay declares env and region. pay/a reads env
// (@tag) and region (an @if(eu) file of a library): four variants; pay/b
// reads only env: two; web/c reads nothing.
func variantRepo(aStaging int) map[string]string {
	return map[string]string{
		"cue.mod/module.cue": "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue": "package manifest\n\nnamespaces: pay: {\n\towners: [\"team-pay\"]\n" +
			"\tdimensions: {env: [\"staging\", \"prod\"], region: [\"eu\", \"us\"]}\n}\nnamespaces: web: owners: [\"team-web\"]\n",
		"lib/geo/geo.cue": "package geo\n\nZone: *\"us-east-1\" | string\n",
		"lib/geo/eu.cue":  "@if(eu)\n\npackage geo\n\nZone: \"eu-west-1\"\n",
		"pay/a/a.cue": "package a\n\nimport \"example.com/t/lib/geo\"\n\n_env: string @tag(env,short=staging|prod)\n" +
			"_size: {staging: " + itoa(aStaging) + ", prod: 10}\n\nzone: geo.Zone\nsize: _size[_env]\n",
		"pay/b/b.cue": "package b\n\n_env: string @tag(env,short=staging|prod)\n\nenv: _env\n",
		"web/c/c.cue": config("c", false, 1),
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// TestVariants: each variant and each variant index is its own version
// stream; a commit that changes what one variant compiles to publishes a
// version of that variant only, and a config that stops using a dimension
// tombstones the variants it had.
func TestVariants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1 := r.CommitFiles("initial configs", variantRepo(1))
	data := t.TempDir() // the high-water marks of variant paths, on disk
	tl := e.tailer(tailer.Config{ID: "configs", DataDir: data})

	// 4 variants + index of pay/a, 2 + index of pay/b, web/c.
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 9})
	a := func(env, region string) cuecast.ConfigPath {
		return cuecast.VariantPath("pay/a", map[string]string{"env": env, "region": region})
	}
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1)}, a("prod", "eu"): {at(1, c1)}, a("prod", "us"): {at(1, c1)},
		a("staging", "eu"): {at(1, c1)}, a("staging", "us"): {at(1, c1)},
		"pay/b": {at(1, c1)}, "pay/b/env=prod": {at(1, c1)}, "pay/b/env=staging": {at(1, c1)},
		"web/c": {at(1, c1)},
	})
	if got := e.content(a("prod", "eu")); got["zone"] != "eu-west-1" || got["size"] != 10.0 {
		t.Errorf("content of %s: %v", a("prod", "eu"), got)
	}
	ix := e.content("pay/a")
	if ix["schema"] != cuecast.VariantIndexSchema || len(ix["variants"].([]any)) != 4 {
		t.Errorf("variant index of pay/a: %v", ix)
	}

	// The staging size changes: the two staging variants of pay/a get a
	// version; the prod ones, the index and pay/b do not. (A restarted
	// tailer, on the same server and data directory, reads its state and
	// high-water marks of variant paths back.)
	c2 := r.CommitFiles("staging size", map[string]string{"pay/a/a.cue": variantRepo(2)["pay/a/a.cue"]})
	tl = e.tailer(tailer.Config{ID: "configs", DataDir: data})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 2})
	if st, err := tl.State(e.ctx); err != nil || st.HighWater[a("staging", "eu")] != 2 || st.HighWater["pay/b/env=prod"] != 1 {
		t.Errorf("high-water marks of variants: %v, %v", st.HighWater, err)
	}
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1)}, a("prod", "eu"): {at(1, c1)}, a("prod", "us"): {at(1, c1)},
		a("staging", "eu"): {at(1, c1), at(2, c2)}, a("staging", "us"): {at(1, c1), at(2, c2)},
		"pay/b/env=prod": {at(1, c1)},
	})

	// The eu file of the library changes: the eu variants only.
	c3 := r.CommitFiles("eu zone", map[string]string{"lib/geo/eu.cue": "@if(eu)\n\npackage geo\n\nZone: \"eu-central-1\"\n"})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 2})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		a("prod", "eu"): {at(1, c1), at(2, c3)}, a("prod", "us"): {at(1, c1)},
		a("staging", "eu"): {at(1, c1), at(2, c2), at(3, c3)}, a("staging", "us"): {at(1, c1), at(2, c2)},
	})

	// pay/b stops reading env: its variants get tombstones, its own path
	// its config instead of the index.
	c4 := r.CommitFiles("b without env", map[string]string{"pay/b/b.cue": "package b\n\nenv: \"any\"\n"})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 3, Tombstones: 2})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/b": {at(1, c1), at(2, c4)}, "pay/b/env=prod": {at(1, c1), at(2, c4) + " deleted"},
		"pay/b/env=staging": {at(1, c1), at(2, c4) + " deleted"},
	})
	if got := e.content("pay/b"); got["env"] != "any" {
		t.Errorf("content of pay/b: %v", got)
	}

	// The manifest drops region (a full compile): pay/a's four variants
	// get tombstones, its two env variants their first versions, its
	// index a new version.
	man := variantRepo(2)["cuecast.cue"]
	c5 := r.CommitFiles("no regions", map[string]string{"cuecast.cue": strings.Replace(man, ", region: [\"eu\", \"us\"]", "", 1)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 7, Tombstones: 4})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1), at(2, c5)}, "pay/a/env=prod": {at(1, c5)}, "pay/a/env=staging": {at(1, c5)},
		a("prod", "us"):    {at(1, c1), at(2, c5) + " deleted"},
		a("staging", "eu"): {at(1, c1), at(2, c2), at(3, c3), at(4, c5) + " deleted"},
	})

	// Deleting pay/a tombstones its index and every variant.
	r.Remove("pay/a")
	c6 := r.Commit("drop a")
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 3, Tombstones: 3})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1), at(2, c5), at(3, c6) + " deleted"}, "pay/a/env=prod": {at(1, c5), at(2, c6) + " deleted"},
	})
}
