package integration_test

import (
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
	t.Parallel()
	natstest.ExamplesCopyable(t, "example_test.go", "../example_test.go")
	natstest.SameExample(t, "../example_test.go", "example_test.go", "type Checkout struct")
}
