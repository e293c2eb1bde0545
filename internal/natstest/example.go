package natstest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsserver"
)

// ExampleEnv gives a package's runnable Example the pipeline's side of what
// a service sees, so that the Example itself imports nothing internal and
// can be copied into a service as it is: an embedded server with a signed
// version 1 of cfg (content) deployed, serve's trusted-keys file and a
// state directory, named by NATS_URL, CUECAST_TRUSTED_KEYS and
// STATE_DIRECTORY. Call it from TestMain (there is no testing.T there); it
// does nothing when -run selects no example. cleanup removes what it made.
func ExampleEnv(cfg cuecast.ConfigPath, content []byte) (cleanup func(), err error) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		top, _, _ := strings.Cut(f.Value.String(), "/")
		if ok, err := regexp.MatchString(top, "Example"); err == nil && !ok {
			return func() {}, nil
		}
	}
	dir, err := os.MkdirTemp("", "cuecast-example")
	if err != nil {
		return nil, fmt.Errorf("example setup: %w", err)
	}
	ctx := context.Background()
	srv, err := natsserver.Start(ctx, natsserver.Options{Dir: filepath.Join(dir, "nats"), Listen: "127.0.0.1:0"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("example setup: %w", err)
	}
	cleanup = func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		os.RemoveAll(dir)
	}
	fail := func(err error) (func(), error) {
		cleanup()
		return nil, fmt.Errorf("example setup: %w", err)
	}
	// As `cuecast serve` does it: a signing key, its public half in the
	// trusted-keys file services are given, a version published and deployed.
	key, _, err := distributor.LoadOrCreateKey(filepath.Join(dir, "signing.nk"))
	if err != nil {
		return fail(err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		return fail(err)
	}
	keys := filepath.Join(dir, distributor.TrustedKeysFile)
	if _, err := distributor.TrustKey(keys, pub); err != nil {
		return fail(err)
	}
	dnc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return fail(err)
	}
	defer dnc.Close()
	d, err := distributor.New(ctx, dnc, distributor.Options{SigningKey: key})
	if err != nil {
		return fail(err)
	}
	v := cuecast.Version{Config: cfg, Version: 1, Commit: "9fceb02"}
	if err := errors.Join(d.Publish(ctx, v, content), d.Deploy(ctx, v)); err != nil {
		return fail(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		return fail(err)
	}
	for k, val := range map[string]string{"NATS_URL": srv.ClientURL(), "CUECAST_TRUSTED_KEYS": keys, "STATE_DIRECTORY": state} {
		if err := os.Setenv(k, val); err != nil {
			return fail(err)
		}
	}
	return cleanup, nil
}

// RunWithExampleEnv is the TestMain of a package with a runnable Example:
// m's tests run inside ExampleEnv(cfg, content); it returns their exit code
// for os.Exit, or 1 when the setup fails (said on stderr).
func RunWithExampleEnv(m *testing.M, cfg cuecast.ConfigPath, content []byte) int {
	cleanup, err := ExampleEnv(cfg, content)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	return m.Run()
}

// ExamplesCopyable fails t for each Go file of paths that imports what a
// service copying it could not (or need not) import (ExampleImports).
func ExamplesCopyable(t testing.TB, paths ...string) {
	t.Helper()
	for _, path := range paths {
		bad, err := ExampleImports(path)
		if err != nil || len(bad) > 0 {
			t.Errorf("%s imports %v (%v), which a service copying it cannot (or need not) import", path, bad, err)
		}
	}
}

// outputLine is an example's "// Output:" line, with the blank line
// before it.
var outputLine = regexp.MustCompile(`\n\n\t// Output: [^\n]*\n`)

// SameExample fails t unless the Go files shown (the example godoc shows,
// which cannot run there) and run (its copy that runs, with ExampleEnv) are
// the same from the line beginning with from on, but for their Output lines.
func SameExample(t testing.TB, shown, run, from string) {
	t.Helper()
	body := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), "\n"+from)
		if !ok {
			t.Fatalf("%s: no line beginning %q", path, from)
		}
		return outputLine.ReplaceAllString(rest, "\n")
	}
	if s, r := body(shown), body(run); s != r {
		t.Fatalf("%s and %s differ (beyond the Output line):\n--- shown\n%s\n--- run\n%s", shown, run, s, r)
	}
}

// ExampleImports returns the imports of the Go file at path that a service
// copying the example could not (or need not) import: internal packages
// and the distributor.
func ExampleImports(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	if len(f.Imports) == 0 {
		return nil, fmt.Errorf("%s: no imports parsed", path)
	}
	var bad []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") || p == "github.com/cuecast/cuecast/distributor" {
			bad = append(bad, p)
		}
	}
	return bad, nil
}
