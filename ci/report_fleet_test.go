package ci_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
)

// fakeFleet is the live instances of each path; err fails every lookup.
type fakeFleet struct {
	byPath map[cuecast.ConfigPath][]string
	err    error
}

func (f fakeFleet) Instances(_ context.Context, paths []cuecast.ConfigPath) (map[cuecast.ConfigPath][]string, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := map[cuecast.ConfigPath][]string{}
	for _, cp := range paths {
		if ids, ok := f.byPath[cp]; ok {
			out[cp] = ids
		}
	}
	return out, nil
}

// fleetRepo has pay/a with variants by env and region (its prod variants
// change, staging does not) and pay/c, a plain config that changes.
func fleetRepo(t *testing.T) (*gittest.Repo, string, string) {
	t.Helper()
	r := gittest.New(t)
	man := "package manifest\n\nnamespaces: pay: {\n\towners: [\"team-pay\"]\n" +
		"\tdimensions: {env: [\"staging\", \"prod\"], region: [\"eu\", \"us\"]}\n" +
		"\tcombinations: [{env: \"staging\", region: \"eu\"}, {env: \"prod\", region: \"eu\"}, {env: \"prod\", region: \"us\"}]\n}\n"
	variants := func(prodTimeout string) string {
		return "package a\n\n_env: string @tag(env,short=staging|prod)\n_region: string @tag(region,short=eu|us)\n\n" +
			"_timeout: {staging: 1, prod: " + prodTimeout + "}\ntimeout: _timeout[_env]\nregion: _region\n"
	}
	base := r.CommitFiles("base", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        man,
		"pay/a/a.cue":        variants("5"),
		"pay/c/c.cue":        "package c\n\nretries: 3\n",
	})
	head := r.CommitFiles("prod timeouts, more retries", map[string]string{
		"pay/a/a.cue": variants("6"),
		"pay/c/c.cue": "package c\n\nretries: 4\n",
	})
	return r, base, head
}

// TestCountInstances: the fleet count gives each affected path (a plain
// config's, each variant's) its live instances, and the blast radius the
// distinct instances running the outputs that change — an instance on two
// changed paths once, one on an unchanged variant not at all. Not counted,
// the report says nothing about instances; a fleet that fails is an error
// and leaves the report as it was.
func TestCountInstances(t *testing.T) {
	variantFleet := map[cuecast.ConfigPath][]string{
		"pay/a/env=prod/region=eu":    {"eu-1", "eu-2", "both-1"},
		"pay/a/env=prod/region=us":    {"us-1", "both-1"},
		"pay/a/env=staging/region=eu": {"stg-1"},
	}
	plainFleet := map[cuecast.ConfigPath][]string{"pay/c": {"c-1", "c-2"}}
	all := maps.Clone(variantFleet)
	maps.Copy(all, plainFleet)
	for _, tc := range []struct {
		name     string
		fleet    *fakeFleet // nil: not counted
		wantErr  string
		wantPer  map[cuecast.ConfigPath]int
		total    int
		headline string
	}{
		{
			name:     "plain config",
			fleet:    &fakeFleet{byPath: plainFleet},
			wantPer:  map[cuecast.ConfigPath]int{"pay/a/env=prod/region=eu": 0, "pay/a/env=prod/region=us": 0, "pay/a/env=staging/region=eu": 0, "pay/c": 2},
			total:    2,
			headline: "2 variants, 2 distinct outputs; 2 instances run them",
		},
		{
			name:     "variants",
			fleet:    &fakeFleet{byPath: variantFleet},
			wantPer:  map[cuecast.ConfigPath]int{"pay/a/env=prod/region=eu": 3, "pay/a/env=prod/region=us": 2, "pay/a/env=staging/region=eu": 1, "pay/c": 0},
			total:    4,
			headline: "2 variants, 2 distinct outputs; 4 instances run them",
		},
		{
			name:     "plain config and variants",
			fleet:    &fakeFleet{byPath: all},
			wantPer:  map[cuecast.ConfigPath]int{"pay/a/env=prod/region=eu": 3, "pay/a/env=prod/region=us": 2, "pay/a/env=staging/region=eu": 1, "pay/c": 2},
			total:    6,
			headline: "2 variants, 2 distinct outputs; 6 instances run them",
		},
		{
			name:     "one instance",
			fleet:    &fakeFleet{byPath: map[cuecast.ConfigPath][]string{"pay/c": {"c-1"}}},
			wantPer:  map[cuecast.ConfigPath]int{"pay/a/env=prod/region=eu": 0, "pay/a/env=prod/region=us": 0, "pay/a/env=staging/region=eu": 0, "pay/c": 1},
			total:    1,
			headline: "2 variants, 2 distinct outputs; 1 instance runs them",
		},
		{
			name:     "no instance",
			fleet:    &fakeFleet{byPath: map[cuecast.ConfigPath][]string{}},
			wantPer:  map[cuecast.ConfigPath]int{"pay/a/env=prod/region=eu": 0, "pay/a/env=prod/region=us": 0, "pay/a/env=staging/region=eu": 0, "pay/c": 0},
			total:    0,
			headline: "2 variants, 2 distinct outputs; 0 instances run them",
		},
		{
			name:     "not counted",
			headline: "2 variants, 2 distinct outputs\n",
		},
		{
			name:     "fleet fails",
			fleet:    &fakeFleet{err: errors.New("nats: no servers available for connection")},
			wantErr:  "count the instances: nats: no servers available",
			headline: "2 variants, 2 distinct outputs\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, base, head := fleetRepo(t)
			rep := check(t, r, base, head)
			if tc.fleet != nil {
				err := rep.CountInstances(context.Background(), tc.fleet)
				if tc.wantErr == "" && err != nil {
					t.Fatalf("CountInstances: %v", err)
				}
				if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
					t.Fatalf("CountInstances: got error %v, want one saying %q", err, tc.wantErr)
				}
			}
			counted := tc.wantPer != nil
			if rep.Risk.InstancesCounted != counted || (rep.Risk.Instances != nil) != counted || counted && *rep.Risk.Instances != tc.total {
				t.Errorf("risk: instances %v, counted %v; want %d, %v", rep.Risk.Instances, rep.Risk.InstancesCounted, tc.total, counted)
			}

			for _, cc := range rep.Configs {
				want, ok := tc.wantPer[cc.Config]
				switch {
				case !counted && cc.Instances != nil:
					t.Errorf("%s: %d instances, want none counted", cc.Config, *cc.Instances)
				case counted && !ok:
					t.Errorf("%s is affected, the test expects %v", cc.Config, tc.wantPer)
				case counted && (cc.Instances == nil || *cc.Instances != want):
					t.Errorf("%s: instances %v, want %d", cc.Config, cc.Instances, want)
				}
			}
			if counted && len(rep.Configs) != len(tc.wantPer) {
				t.Errorf("affected: %q; want %d paths", statuses(rep), len(tc.wantPer))
			}
			text := textReport(t, rep)
			if !strings.Contains(text, tc.headline) {
				t.Errorf("text report does not say %q:\n%s", tc.headline, text)
			}
			if !counted && strings.Contains(text, "instance") {
				t.Errorf("a report without a fleet count talks of instances:\n%s", text)
			}
			if md := rep.Markdown(0); strings.Contains(md, "| instances |") != counted {
				t.Errorf("Markdown has an instances column: %v, want %v:\n%s", !counted, counted, md)
			}
			var js struct {
				Risk struct {
					Instances *int `json:"instances"`
					Counted   bool `json:"instances_counted"`
				} `json:"risk"`
				Configs []struct {
					Config    cuecast.ConfigPath `json:"config"`
					Instances *int               `json:"instances"`
				} `json:"configs"`
			}
			var out bytes.Buffer
			if err := rep.WriteJSON(&out); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out.Bytes(), &js); err != nil {
				t.Fatal(err)
			}
			// "instances" is in the risk whenever counted, 0 too (it was
			// omitted at 0, as if not counted: "no instance").
			if js.Risk.Counted != counted || (js.Risk.Instances != nil) != counted || (js.Risk.Instances != nil && *js.Risk.Instances != tc.total) {
				t.Errorf("JSON risk: instances %v, counted %v; want %d, %v", js.Risk.Instances, js.Risk.Counted, tc.total, counted)
			}
			for _, c := range js.Configs {
				if (c.Instances != nil) != counted || (counted && *c.Instances != tc.wantPer[c.Config]) {
					t.Errorf("JSON %s: instances %v, want %v counted %v", c.Config, c.Instances, tc.wantPer[c.Config], counted)
				}
			}
		})
	}
}
