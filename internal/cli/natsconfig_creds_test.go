package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/natsconf"
)

// TestNATSConfigRewritesStaleCreds: nats-config run again over a secrets
// directory whose leaf.creds was written for an older layout (the links'
// user signed by CUECAST, before the fan-out account) writes it again and
// says so; it used to keep any existing .creds, so a doc-following upgrade
// kept the links in CUECAST with the older, broader rights. Current files
// are kept byte for byte.
func TestNATSConfigRewritesStaleCreds(t *testing.T) {
	secrets := t.TempDir()
	args := []string{"nats-config", "hub", "--auth", "jwt", "--name", "hub", "--listen", "127.0.0.1:4222",
		"--leaf-listen", "127.0.0.1:7422", "--store", t.TempDir(), "--namespace", "payments", "--secrets", secrets}
	if code, _, errOut := run(context.Background(), args...); code != 0 {
		t.Fatalf("nats-config hub: exit %d: %s", code, errOut)
	}
	seed := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(secrets, n))
		if err != nil {
			t.Fatal(err)
		}
		return bytes.TrimSpace(b)
	}
	keys, err := natsconf.KeysFromSeeds(seed("operator.nk"), seed("account.nk"), seed("system.nk"))
	if err != nil {
		t.Fatal(err)
	}
	// leaf.creds as the layout before the fan-out account wrote it.
	perms, _ := natsconf.UserPermissions(natsconf.LeafUser)
	old, err := natsconf.SignUserCreds(keys.Account, natsconf.LeafUser,
		natsconf.Permissions{Publish: perms.Publish, Subscribe: perms.Subscribe})
	if err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Join(secrets, natsconf.LeafUser+".creds")
	if err := os.WriteFile(leaf, old, 0o600); err != nil {
		t.Fatal(err)
	}
	distPath := filepath.Join(secrets, natsconf.DistributorUser+".creds")
	dist, err := os.ReadFile(distPath)
	if err != nil {
		t.Fatal(err)
	}

	code, _, errOut := run(context.Background(), args...)
	if code != 0 {
		t.Fatalf("nats-config hub again: exit %d: %s", code, errOut)
	}
	got, err := os.ReadFile(leaf)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := keys.CredsCurrent(natsconf.LeafUser, got); err != nil || !ok {
		t.Errorf("leaf.creds after nats-config: current %v (%v); want it written again for the fan-out account", ok, err)
	}
	if !strings.Contains(errOut.String(), "leaf.creds") || !strings.Contains(errOut.String(), "wrote it again") {
		t.Errorf("stderr %q; want it to name leaf.creds as written again", errOut)
	}
	if again, _ := os.ReadFile(distPath); !bytes.Equal(again, dist) {
		t.Error("distributor.creds, current, was written again")
	}

	// A file that is not a .creds file at all is an error, not replaced.
	if err := os.WriteFile(leaf, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(context.Background(), args...)
	if code == 0 || !strings.Contains(errOut.String(), "leaf.creds") {
		t.Errorf("nats-config over a damaged leaf.creds: exit %d, stderr %q; want a failure naming the file", code, errOut)
	}
}
