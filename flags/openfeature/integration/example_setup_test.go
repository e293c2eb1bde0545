package integration_test

import (
	"os"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/natstest"
)

// TestMain gives Example (docs/FLAGS.md's provider example) its environment:
// version 1 of the flag set payments/flags deployed (natstest.ExampleEnv).
func TestMain(m *testing.M) {
	os.Exit(natstest.RunWithExampleEnv(m, "payments/flags", []byte(set(true, "blue"))))
}

// TestExampleIsCopyable: the example imports only what a service can, and
// flags/openfeature's, which godoc shows and which cannot run there, is
// the one run here (beyond its Output line), and the one docs/FLAGS.md
// shows from its imports on.
func TestExampleIsCopyable(t *testing.T) {
	natstest.ExamplesCopyable(t, "example_test.go", "../example_test.go")
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	natstest.SameExample(t, "../example_test.go", "example_test.go", "func Example() {")
	_, code, _ := strings.Cut(read("../example_test.go"), "\nimport (")
	if !strings.Contains(read("../../../docs/FLAGS.md"), "```go\nimport ("+code+"```") {
		t.Fatal("docs/FLAGS.md's provider example is not flags/openfeature/example_test.go from its imports on: copy it again")
	}
}
