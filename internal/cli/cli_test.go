package cli_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cuecast/cuecast/internal/cli"
)

var update = flag.Bool("update", false, "update testscript golden output (cmp files) in place")

func TestMain(m *testing.M) {
	// Every command a script runs is this race-enabled binary, and the race
	// runtime sleeps a second before each one exits (its atexit_sleep_ms
	// default) unless GORACE says otherwise: over a hundred seconds of
	// sleep in this package. Races are still reported as they happen.
	// The shadow threshold is make test's too (see the Makefile).
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0 clear_shadow_mmap_threshold=67108864")
	}
	testscript.Main(m, map[string]func(){
		"cuecast": func() { os.Exit(cli.System(context.Background())) },
		// dial-unix SOCKET: a process of another user trying a socket
		// (TestAgentOFREPAnotherUser); exit 0 connected, 13 refused by
		// the file's mode, 1 otherwise.
		"dial-unix": func() { os.Exit(dialUnix(os.Args[1])) },
	})
}

// repoRoot is the module root, where configs-example lives: two up from
// this package's directory, where go test runs its tests (the source file's
// own path would not do, as make test builds with -trimpath).
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestScripts(t *testing.T) {
	root := repoRoot(t)
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(e *testscript.Env) error {
			e.Setenv("EXAMPLE", filepath.Join(root, "configs-example"))
			return nil
		},
	})
}

func dialUnix(path string) int {
	c, err := net.Dial("unix", path)
	switch {
	case err == nil:
		c.Close()
		return 0
	case errors.Is(err, syscall.EACCES):
		return 13
	default:
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
}
