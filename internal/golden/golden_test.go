package golden_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/golden"
)

// recorder is a testing.TB that keeps what Check reports instead of
// failing the test that runs it.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) { r.Errorf(format, a...); runtime.Goexit() }
func (r *recorder) Fatal(a ...any)                 { r.errs = append(r.errs, fmt.Sprint(a...)); runtime.Goexit() }

// check runs golden.Check on its own goroutine, which a Fatal ends, as it
// ends a test's.
func (r *recorder) check(file string, got []byte, update bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		golden.Check(r, file, got, update)
	}()
	<-done
}

// TestCheck: -update writes the file (its directory too) and a later run
// compares with it, reporting a difference with got and want, and a
// missing file with the hint to run with -update.
func TestCheck(t *testing.T) {
	file := filepath.Join(t.TempDir(), "testdata", "out.golden")
	var r recorder
	r.check(file, []byte("one\n"), false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "go test -update creates it") {
		t.Errorf("missing file: got %q, want one failure saying -update creates it", r.errs)
	}
	r.errs = nil
	r.check(file, []byte("one\n"), true)
	if b, err := os.ReadFile(file); err != nil || string(b) != "one\n" || len(r.errs) != 0 {
		t.Fatalf("with update: file %q (%v), failures %q; want the file written and none", b, err, r.errs)
	}
	r.check(file, []byte("one\n"), false)
	if len(r.errs) != 0 {
		t.Errorf("same content: got failures %q, want none", r.errs)
	}
	r.check(file, []byte("two\n"), false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "got:\ntwo\n") || !strings.Contains(r.errs[0], "want:\none\n") {
		t.Errorf("different content: got %q, want one failure showing got two and want one", r.errs)
	}
}
