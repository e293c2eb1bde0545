package integration_test

import (
	"os"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/natstest"
)

// exampleConfig and exampleContent are Example's environment, which
// TestMain (bench_test.go) sets up: version 1 of payments/checkout
// deployed (natstest.RunWithExampleEnv).
const exampleConfig, exampleContent = "payments/checkout", `{"limit":250,"currency":"EUR"}`

// TestExampleIsCopyable: the examples import only what a service can
// import (the one in client/ used to import internal/natsserver, so it
// could not be copied), and client/'s, which godoc shows and which cannot
// run there, is the one run here.
func TestExampleIsCopyable(t *testing.T) {
	natstest.ExamplesCopyable(t, "example_test.go", "../example_test.go")
	body := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), "\ntype Checkout struct")
		if !ok {
			t.Fatalf("%s: no Checkout type", path)
		}
		return strings.Replace(rest, "\n\n\t// Output: version 1: limit 250 EUR\n", "\n", 1)
	}
	if run, shown := body("example_test.go"), body("../example_test.go"); run != shown {
		t.Fatalf("client/example_test.go and client/integration/example_test.go differ (beyond the Output line):\n--- shown\n%s\n--- run\n%s", shown, run)
	}
}
