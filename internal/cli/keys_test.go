package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast/internal/cli"
)

// TestWatchRefusesWithoutTrustedKeys: verification is the default; a watch
// with no key to verify against does not start, and says how to get one.
func TestWatchRefusesWithoutTrustedKeys(t *testing.T) {
	code, _, stderr := run(context.Background(), "watch", "--config", "payments/checkout", "--instance", "web-1")
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "no trusted keys") || !strings.Contains(stderr.String(), "--trusted-keys-file") {
		t.Fatalf("got exit %d, stderr %q; want %d saying no trusted keys and naming --trusted-keys-file", code, stderr, cli.ExitUsage)
	}
	code, _, stderr = run(context.Background(), "watch", "--config", "payments/checkout", "--instance", "web-1", "--trusted-keys-file", filepath.Join(t.TempDir(), "missing"))
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "trusted keys") {
		t.Fatalf("missing keys file: got exit %d, stderr %q; want %d", code, stderr, cli.ExitUsage)
	}
}

// TestKeysNewAndRetire: `keys` prints the trusted-keys file, `keys new`
// adds the next key beside the current one, and `keys retire` removes the
// old one but never the one serve signs with.
func TestKeysNewAndRetire(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	if code, _, stderr := run(ctx, "keys", "--data", data); code != cli.ExitUsage || !strings.Contains(stderr.String(), "cuecast serve") {
		t.Fatalf("keys before serve: exit %d, stderr %q; want usage error naming serve", code, stderr)
	}
	// What serve does on start (serveKey): a seed and the trusted-keys file.
	old, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := old.Seed()
	if err := os.WriteFile(filepath.Join(data, "signing.nk"), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	oldPub, _ := old.PublicKey()
	if err := os.WriteFile(filepath.Join(data, "trusted-keys"), []byte(oldPub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := run(ctx, "keys", "new", "--data", data)
	if code != 0 {
		t.Fatalf("keys new: exit %d: %s", code, stderr)
	}
	newPub := strings.TrimSpace(out.String())
	if _, err := nkeys.FromPublicKey(newPub); err != nil {
		t.Fatalf("keys new printed %q: %v", newPub, err)
	}
	if fi, err := os.Stat(filepath.Join(data, "signing.next.nk")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new seed: %v, %v; want mode 0600", fi, err)
	}
	code, out, stderr = run(ctx, "keys", "--data", data)
	if code != 0 || !strings.Contains(out.String(), oldPub) || !strings.Contains(out.String(), newPub) {
		t.Fatalf("keys during the rotation: exit %d, out %q, stderr %q; want both keys", code, out, stderr)
	}
	if code, _, _ := run(ctx, "keys", "new", "--data", data); code != cli.ExitUsage {
		t.Fatalf("keys new over an existing seed: exit %d, want %d", code, cli.ExitUsage)
	}

	if code, _, stderr := run(ctx, "keys", "retire", oldPub, "--data", data); code != cli.ExitUsage || !strings.Contains(stderr.String(), "signs with") {
		t.Fatalf("retire the key serve signs with: exit %d, stderr %q; want a refusal", code, stderr)
	}
	// serve now signs with the new seed.
	if code, _, stderr := run(ctx, "keys", "retire", oldPub, "--data", data, "--signing-key", filepath.Join(data, "signing.next.nk")); code != 0 {
		t.Fatalf("retire: exit %d: %s", code, stderr)
	}
	code, out, _ = run(ctx, "keys", "--data", data)
	if code != 0 || strings.Contains(out.String(), oldPub) || !strings.Contains(out.String(), newPub) {
		t.Fatalf("keys after retiring: %q; want only the new key", out)
	}
	if code, _, _ := run(ctx, "keys", "retire", newPub, "--data", data, "--signing-key", filepath.Join(data, "none.nk")); code == 0 {
		t.Fatal("retiring the last key: got success, want refusal")
	}
}
