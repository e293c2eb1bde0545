package ci_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/gittest"
)

// TestCheckVariants: a change is diffed per variant; the blast radius
// counts the changed variants and their distinct outputs; a combination
// the manifest does not list is never compiled.
func TestCheckVariants(t *testing.T) {
	r := gittest.New(t)
	man := "package manifest\n\nnamespaces: pay: {\n\towners: [\"team-pay\"]\n" +
		"\tdimensions: {env: [\"staging\", \"prod\"], region: [\"eu\", \"us\"]}\n" +
		"\tcombinations: [{env: \"staging\", region: \"eu\"}, {env: \"prod\", region: \"eu\"}, {env: \"prod\", region: \"us\"}]\n}\n"
	cfg := func(pkg string, prodTimeout string, withRegion bool) string {
		s := "package " + pkg + "\n\n_env: string @tag(env,short=staging|prod)\n_region: string @tag(region,short=eu|us)\n\n" +
			"_timeout: {staging: 1, prod: " + prodTimeout + "}\ntimeout: _timeout[_env]\n"
		if withRegion {
			s += "region: _region\n"
		}
		return s
	}
	base := r.CommitFiles("base", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        man,
		"pay/a/a.cue":        cfg("a", "5", true),
		"pay/b/b.cue":        cfg("b", "5", false),
	})
	head := r.CommitFiles("prod timeouts", map[string]string{
		"pay/a/a.cue": cfg("a", "6", true),
		"pay/b/b.cue": cfg("b", "6", false),
	})
	rep := check(t, r, base, head)
	want := []string{
		"pay/a/env=prod/region=eu changed",
		"pay/a/env=prod/region=us changed",
		"pay/a/env=staging/region=eu unchanged",
		"pay/b/env=prod/region=eu changed",
		"pay/b/env=prod/region=us changed",
		"pay/b/env=staging/region=eu unchanged",
	}
	if got := statuses(rep); !slices.Equal(got, want) {
		t.Errorf("statuses:\n got %q\nwant %q", got, want)
	}
	if rep.Risk.Configs != 2 || rep.Risk.Variants != 4 || rep.Risk.DistinctOutputs != 3 {
		t.Errorf("risk: %d configs, %d variants, %d distinct outputs; want 2, 4, 3", rep.Risk.Configs, rep.Risk.Variants, rep.Risk.DistinctOutputs)
	}
	for _, cc := range rep.Configs {
		if strings.Contains(string(cc.Config), "env=staging/region=us") {
			t.Errorf("an unlisted combination was compiled: %s", cc.Config)
		}
		if cc.Config == "pay/a/env=prod/region=eu" && !slices.Equal(diffPaths(cc), []string{"changed timeout 5 6"}) {
			t.Errorf("diff of %s: %q", cc.Config, diffPaths(cc))
		}
	}
	if md := rep.Markdown(0); !strings.Contains(md, "4 variants, 3 distinct outputs") {
		t.Errorf("the report does not give the variants' blast radius:\n%s", md)
	}
}
