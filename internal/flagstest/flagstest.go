// Package flagstest reads testdata/flags/v1.json, the flag evaluation
// vectors every SDK runs (testdata/flags/README.md describes the layout),
// for the Go tests that run them: the evaluator's (flags), the OFREP
// server's (flags/ofrep) and the JSON Schema's (bindings). One Go shape of
// the file, so a field the generator adds is read the same way by all.
package flagstest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuecast/cuecast/flags"
)

// Vectors is testdata/flags/v1.json.
type Vectors struct {
	Format    string     `json:"format"`
	Version   int        `json:"version"`
	Schema    string     `json:"schema"`
	Whole     int        `json:"whole"`
	Positions []Position `json:"positions"`
	// Sets are the flag sets the cases evaluate, by name.
	Sets        map[string]json.RawMessage `json:"sets"`
	Cases       []Case                     `json:"cases"`
	Invalid     []Invalid                  `json:"invalid"`
	Unsupported []Unsupported              `json:"unsupported"`
}

// Position is a bucket position the bucketing must compute.
type Position struct {
	Salt, Value string
	Position    int
}

// Case is one evaluation: Flag of set Set for Context, as Type (empty:
// untyped).
type Case struct {
	Name string     `json:"name"`
	Set  string     `json:"set"`
	Flag string     `json:"flag"`
	Type flags.Type `json:"type"`
	// Context is kept as written: the evaluator's tests decode it (with
	// numbers as float64 or json.Number), OFREP's send it as is.
	Context json.RawMessage `json:"context"`
	Want    Want            `json:"want"`
}

// Want is a case's expected result; Rule and Position are nil when the
// case does not say.
type Want struct {
	Value     any             `json:"value"`
	Variant   string          `json:"variant"`
	Reason    flags.Reason    `json:"reason"`
	ErrorCode flags.ErrorCode `json:"errorCode"`
	Rule      *int            `json:"rule"`
	Position  *int            `json:"position"`
}

// Invalid is a set that must not compile, with the flag and field each
// error names.
type Invalid struct {
	Name   string          `json:"name"`
	Set    json.RawMessage `json:"set"`
	Errors []struct{ Flag, Field string }
}

// Unsupported is a set of a schema the evaluator does not know.
type Unsupported struct {
	Name string          `json:"name"`
	Set  json.RawMessage `json:"set"`
}

// Read reads the vectors from the module's testdata/flags/v1.json, failing
// t when it cannot.
func Read(t testing.TB) Vectors {
	t.Helper()
	b, err := os.ReadFile(File(t))
	if err != nil {
		t.Fatal(err)
	}
	var v Vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode vectors: %v", err)
	}
	return v
}

// File is the path of testdata/flags/v1.json: under the nearest directory
// at or above the working directory (a test's package directory) that
// holds a go.mod. The source file's own path cannot serve: make test
// builds with -trimpath.
func File(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "flags", "v1.json")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod at or above the working directory")
		}
		dir = parent
	}
}
