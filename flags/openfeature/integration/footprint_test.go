package integration_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestFootprint: the OpenFeature SDK reaches only flags/openfeature (not
// client, not flags, not flags/ofrep), and none of flags, flags/openfeature
// and flags/ofrep, tests included, needs a server, CUE, Git or godog (the Gherkin runner of this
// package's TestSpecEvaluation), which a service's `go mod tidy`
// would otherwise record (the tests that need them are here, in a
// directory no service imports).
func TestFootprint(t *testing.T) {
	list := func(args ...string) []string {
		out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	for _, pkg := range []string{"github.com/cuecast/cuecast/client", "github.com/cuecast/cuecast/flags", "github.com/cuecast/cuecast/flags/ofrep"} {
		for _, p := range list("-test", "-deps", pkg) {
			if strings.HasPrefix(p, "github.com/open-feature/") || strings.HasPrefix(p, "github.com/cucumber/") {
				t.Errorf("%s depends on %s", pkg, p)
			}
		}
	}
	deps := list("-test", "-deps", "github.com/cuecast/cuecast/flags", "github.com/cuecast/cuecast/flags/openfeature", "github.com/cuecast/cuecast/flags/ofrep")
	found := false
	for _, p := range deps {
		found = found || p == "github.com/open-feature/go-sdk/openfeature"
		for _, heavy := range []string{"github.com/nats-io/nats-server", "cuelang.org/", "github.com/go-git/", "github.com/cuecast/cuecast/internal/", "github.com/cuecast/cuecast/distributor", "github.com/cucumber/"} {
			if strings.HasPrefix(p, heavy) {
				t.Errorf("flags, flags/openfeature or flags/ofrep (tests included) depends on %s", p)
			}
		}
	}
	if !found {
		t.Fatalf("go list -deps flags/openfeature: no OpenFeature SDK among %d packages; is the listing broken?", len(deps))
	}
}
