package integration_test

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

func TestMain(m *testing.M) {
	cleanup, err := setupExample()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// setupExample gives Example (docs/FLAGS.md's provider example) its
// environment, the pipeline's side: an embedded server with a signed
// version 1 of the flag set payments/flags deployed, serve's trusted-keys
// file and a state directory, named by NATS_URL, CUECAST_TRUSTED_KEYS and
// STATE_DIRECTORY, as client/integration does for client's Example. It does
// nothing when -run selects no example.
func setupExample() (cleanup func(), err error) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		top, _, _ := strings.Cut(f.Value.String(), "/")
		if ok, err := regexp.MatchString(top, "Example"); err == nil && !ok {
			return func() {}, nil
		}
	}
	dir, err := os.MkdirTemp("", "cuecast-of-example")
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
	v := cuecast.Version{Config: "payments/flags", Version: 1, Commit: "9fceb02"}
	if err := errors.Join(d.Publish(ctx, v, []byte(set(true, "blue"))), d.Deploy(ctx, v)); err != nil {
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

// TestExampleIsCopyable: the example imports only what a service can, and
// flags/openfeature's, which godoc shows and which cannot run there, is
// the one run here (beyond its Output line).
func TestExampleIsCopyable(t *testing.T) {
	for _, path := range []string{"example_test.go", "../example_test.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(p, "/internal/") || p == "github.com/cuecast/cuecast/distributor" {
				t.Errorf("%s imports %s, which a service copying it cannot (or need not) import", path, p)
			}
		}
	}
	body := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), "\nfunc Example() {")
		if !ok {
			t.Fatalf("%s: no Example", path)
		}
		return regexp.MustCompile(`\n\n\t// Output: [^\n]*\n`).ReplaceAllString(rest, "\n")
	}
	if run, shown := body("example_test.go"), body("../example_test.go"); run != shown {
		t.Fatalf("flags/openfeature/example_test.go and integration/example_test.go differ (beyond the Output line):\n--- shown\n%s\n--- run\n%s", shown, run)
	}
	// docs/FLAGS.md shows the example from its imports on.
	ex, err := os.ReadFile("../example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(ex), "\nimport (")
	doc, err := os.ReadFile("../../../docs/FLAGS.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\nimport ("+code+"```") {
		t.Fatal("docs/FLAGS.md's provider example is not flags/openfeature/example_test.go from its imports on: copy it again")
	}
}
