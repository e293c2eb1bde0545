package schemas_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/cuecast/cuecast/schemas"
)

// TestShippedSchemas checks the definitions directly, without the compiler:
// each input is unified with a definition and must be accepted or rejected
// with an error mentioning the field.
func TestShippedSchemas(t *testing.T) {
	files := schemas.Files()
	if len(files) == 0 {
		t.Fatal("no embedded schema files")
	}
	var src strings.Builder
	for _, name := range []string{"manifest.cue", "featureflag.cue"} {
		b, ok := files[name]
		if !ok {
			t.Fatalf("missing embedded %s", name)
		}
		// Both files are package schemas; drop the second package clause
		// so they compile as one source.
		s := string(b)
		if src.Len() > 0 {
			s = strings.Replace(s, "package schemas", "", 1)
			s = strings.Replace(s, `import "list"`, "", 1)
		}
		src.WriteString(s + "\n")
	}
	ctx := cuecontext.New()
	pkg := ctx.CompileString(src.String(), cue.Filename("schemas"))
	if err := pkg.Err(); err != nil {
		t.Fatalf("shipped schemas do not compile: %v", err)
	}
	tests := []struct {
		name, def, input string
		wantErr          string // substring; empty means valid
	}{
		{"minimal manifest", "#Manifest", `namespaces: pay: owners: ["a"]`, ""},
		{"full manifest", "#Manifest", `namespaces: pay: {owners: ["a"], schema: "x.test/s#P", consistency: "strict", max_size: 1024,
			rollout: stages: [{name: "canary", percent: 1, hold: "5m", min_instances: 2, max_unhealthy: 0.1, max_apply_failures: 0}, {name: "all", percent: 100, labels: {zone: "a"}, instances: ["host-1"]}]}`, ""},
		{"unknown namespace field", "#Manifest", `namespaces: pay: {owners: ["a"], team: "x"}`, "team"},
		{"unknown top-level field", "#Manifest", `namespaces: {}, version: 2`, "version"},
		{"bad namespace name", "#Manifest", `namespaces: "Pay": owners: ["a"]`, "Pay"},
		{"no owners", "#Manifest", `namespaces: pay: owners: []`, "MinItems"},
		{"empty owner", "#Manifest", `namespaces: pay: owners: [""]`, "owners"},
		{"bad consistency", "#Manifest", `namespaces: pay: {owners: ["a"], consistency: "eventual"}`, "consistency"},
		{"schema without definition", "#Manifest", `namespaces: pay: {owners: ["a"], schema: "x.test/s"}`, "schema"},
		{"zero max size", "#Manifest", `namespaces: pay: {owners: ["a"], max_size: 0}`, "max_size"},
		{"no stages", "#Manifest", `namespaces: pay: {owners: ["a"], rollout: stages: []}`, "MinItems"},
		{"percent over 100", "#Manifest", `namespaces: pay: {owners: ["a"], rollout: stages: [{name: "all", percent: 101}]}`, "percent"},
		{"bad hold", "#Manifest", `namespaces: pay: {owners: ["a"], rollout: stages: [{name: "c", hold: "5 min"}]}`, "hold"},
		{"unhealthy share over 1", "#Manifest", `namespaces: pay: {owners: ["a"], rollout: stages: [{name: "c", max_unhealthy: 5}]}`, "max_unhealthy"},
		{"bad instance id", "#Manifest", `namespaces: pay: {owners: ["a"], rollout: stages: [{name: "c", instances: ["a.b"]}]}`, "instances"},
		{"config override", "#Manifest", `namespaces: pay: {owners: ["a"], configs: {checkout: {consistency: "strict"}, "eu/refunds": rollout: stages: [{name: "all", percent: 100}]}}`, ""},
		{"config override bad path", "#Manifest", `namespaces: pay: {owners: ["a"], configs: Checkout: consistency: "strict"}`, "Checkout"},
		{"config override unknown field", "#Manifest", `namespaces: pay: {owners: ["a"], configs: checkout: owners: ["b"]}`, "owners"},
		{"change policy", "#Manifest", `namespaces: pay: {owners: ["a"], changes: {paths: ["flags.*.on", "limits..."], land: "pr"}}`, ""},
		{"change policy bad land", "#Manifest", `namespaces: pay: {owners: ["a"], changes: land: "push"}`, "land"},
		{"change policy empty path", "#Manifest", `namespaces: pay: {owners: ["a"], changes: paths: [""]}`, "paths"},
		{"change policy unknown field", "#Manifest", `namespaces: pay: {owners: ["a"], changes: who: "x"}`, "who"},
		{"flag", "#FeatureFlag", `description: "d", owner: "o", enabled: true, rollout_percent: 10, expires: "2027-01-31"`, ""},
		{"flag over 100%", "#FeatureFlag", `description: "d", owner: "o", rollout_percent: 101`, "rollout_percent"},
		{"flag unknown field", "#FeatureFlag", `description: "d", owner: "o", audience: "beta"`, "audience"},
		{"flag bad date", "#FeatureFlag", `description: "d", owner: "o", expires: "soon"`, "expires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ctx.CompileString(tt.input)
			if err := in.Err(); err != nil {
				t.Fatalf("test input does not compile: %v", err)
			}
			err := pkg.LookupPath(cue.ParsePath(tt.def)).Unify(in).Validate(cue.Concrete(true))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got error %v, want none", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("got no error, want one mentioning %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("got error %q, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestExampleVendorsTheseSchemas: configs-example vendors this package under
// cue.mod/pkg, as its README tells a config repo to; the copy must be these
// files, or the example (and `make demo`) tests an older schema.
func TestExampleVendorsTheseSchemas(t *testing.T) {
	const vendored = "../configs-example/cue.mod/pkg/github.com/cuecast/cuecast/schemas"
	ours, err := filepath.Glob("*.cue")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := filepath.Glob(filepath.Join(vendored, "*.cue"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != len(theirs) {
		t.Fatalf("configs-example vendors %d files, the package has %d: copy schemas/*.cue to %s", len(theirs), len(ours), vendored)
	}
	for _, f := range ours {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(vendored, f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from schemas/%s (%v): copy schemas/*.cue again", vendored, f, f, err)
		}
	}
}
