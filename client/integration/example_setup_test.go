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

// setupExample gives Example its environment, the pipeline's side of what
// it shows: an embedded server with a signed version 1 of
// payments/checkout deployed, serve's trusted-keys file, and a state
// directory, named by NATS_URL, CUECAST_TRUSTED_KEYS and STATE_DIRECTORY.
// It is apart from Example so that Example imports no internal package
// and can be copied into a service as it is. It does nothing when -run
// selects no example; cleanup removes what it made.
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
	v := cuecast.Version{Config: "payments/checkout", Version: 1, Commit: "9fceb02"}
	if err := errors.Join(d.Publish(ctx, v, []byte(`{"limit":250,"currency":"EUR"}`)), d.Deploy(ctx, v)); err != nil {
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

// TestExampleIsCopyable: the examples import only what a service can
// import (the one in client/ used to import internal/natsserver, so it
// could not be copied), and client/'s, which godoc shows and which cannot
// run there, is the one run here.
func TestExampleIsCopyable(t *testing.T) {
	for _, path := range []string{"example_test.go", "../example_test.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Imports) == 0 {
			t.Fatalf("%s: no imports parsed", path)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") || p == "github.com/cuecast/cuecast/distributor" {
				t.Errorf("%s imports %s, which a service copying it cannot (or need not) import", path, p)
			}
		}
	}
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
