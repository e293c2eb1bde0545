// Package golden compares what a test made with a golden file under its
// package's testdata/, or rewrites the file when the test runs with the
// package's -update flag (as golang/go's go/printer tests do).
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check fails t unless got is the content of file. With update it writes
// got to file instead (creating the file's directory), for a reviewer to
// read in the diff.
func Check(t testing.TB, file string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read golden file: %v (go test -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the test made (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", file, got, want)
	}
}
