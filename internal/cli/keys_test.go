package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/poll"
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
	empty := filepath.Join(t.TempDir(), "trusted-keys")
	if err := os.WriteFile(empty, []byte("# Public keys that verify what cuecast serve signs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(context.Background(), "watch", "--config", "payments/checkout", "--instance", "web-1", "--trusted-keys-file", empty)
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), empty+": no key listed") {
		t.Fatalf("keys file listing no key: got exit %d, stderr %q; want %d naming the file", code, stderr, cli.ExitUsage)
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
	// A file that lists no key is not one to hand out: keys says to start
	// serve, which adds its key (docs/OPERATIONS.md, "Keys").
	if err := os.WriteFile(filepath.Join(data, "trusted-keys"), []byte("# no key yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(ctx, "keys", "--data", data); code == 0 || out.String() != "" || !strings.Contains(stderr.String(), "lists no key") || !strings.Contains(stderr.String(), "cuecast serve") {
		t.Fatalf("keys over an empty file: exit %d, out %q, stderr %q; want a failure naming serve", code, out, stderr)
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
	// A --signing-key retire cannot read as a seed (a typo, another
	// user's 0600 file, the wrong file) is no check at all: refused, the
	// key kept, rather than the key serve signs with retired unchecked.
	for _, seed := range []string{filepath.Join(data, "signing.nxt.nk"), filepath.Join(data, "trusted-keys")} {
		if code, _, stderr := run(ctx, "keys", "retire", oldPub, "--data", data, "--signing-key", seed); code != cli.ExitUsage || !strings.Contains(stderr.String(), seed) {
			t.Errorf("retire with --signing-key %s: exit %d, stderr %q; want %d naming it", seed, code, stderr, cli.ExitUsage)
		}
	}
	if code, out, _ := run(ctx, "keys", "--data", data); code != 0 || !strings.Contains(out.String(), oldPub) {
		t.Fatalf("keys after refused retires: %q; want the old key still listed", out)
	}
	// serve now signs with the new seed.
	if code, _, stderr := run(ctx, "keys", "retire", oldPub, "--data", data, "--signing-key", filepath.Join(data, "signing.next.nk")); code != 0 {
		t.Fatalf("retire: exit %d: %s", code, stderr)
	}
	code, out, _ = run(ctx, "keys", "--data", data)
	if code != 0 || strings.Contains(out.String(), oldPub) || !strings.Contains(out.String(), newPub) {
		t.Fatalf("keys after retiring: %q; want only the new key", out)
	}
	// Naming a key that cannot go is wrong usage, as naming serve's is.
	if code, _, stderr := run(ctx, "keys", "retire", newPub, "--data", data, "--signing-key", filepath.Join(data, "signing.nk")); code != cli.ExitUsage || !strings.Contains(stderr.String(), "only key") {
		t.Fatalf("retiring the last key: exit %d, stderr %q; want %d, a refusal naming it the only key", code, stderr, cli.ExitUsage)
	}
	if code, _, stderr := run(ctx, "keys", "retire", oldPub, "--data", data, "--signing-key", filepath.Join(data, "signing.next.nk")); code != cli.ExitUsage || !strings.Contains(stderr.String(), "not listed") {
		t.Fatalf("retiring a key not listed: exit %d, stderr %q; want %d saying it is not listed", code, stderr, cli.ExitUsage)
	}
}

// TestServeWritesTrustedKeys: serve lists its key in <data>/trusted-keys on
// every start, keeping the keys listed; after `keys new` and a restart with
// --signing-key, it signs with the new key while the file lists both, which
// `keys` prints for the services; `keys retire` then leaves the new one.
func TestServeWritesTrustedKeys(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	data := t.TempDir()
	trustFile := filepath.Join(data, "trusted-keys")
	serve := func(args ...string) string {
		t.Helper()
		_, _, stop := startServe(t, repo.Dir, data, args...)
		return stop()
	}
	pubOf := func(seedFile string) string {
		t.Helper()
		seed, err := os.ReadFile(seedFile)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		return pub
	}
	keys := func() []string { return trustedKeys(t, data) }

	serve()
	oldPub := pubOf(filepath.Join(data, "signing.nk"))
	if got := keys(); len(got) != 1 || got[0] != oldPub {
		t.Fatalf("after the first start: keys %v, want [%s]", got, oldPub)
	}
	if fi, err := os.Stat(trustFile); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("%s: %v, %v; want a file anyone may read", trustFile, fi, err)
	}
	code, out, stderr := run(context.Background(), "keys", "new", "--data", data)
	if code != 0 {
		t.Fatalf("keys new: exit %d: %s", code, stderr)
	}
	newPub := strings.TrimSpace(out.String())
	next := filepath.Join(data, "signing.next.nk")
	if log := serve("--signing-key", next); !strings.Contains(log, "signing with "+newPub) {
		t.Fatalf("serve with --signing-key %s does not say it signs with %s:\n%s", next, newPub, log)
	}
	if got := keys(); len(got) != 2 || got[0] != oldPub || got[1] != newPub {
		t.Fatalf("after switching serve to the new key: keys %v, want [%s %s]", got, oldPub, newPub)
	}
	if code, _, stderr := run(context.Background(), "keys", "retire", oldPub, "--data", data, "--signing-key", next); code != 0 {
		t.Fatalf("keys retire: exit %d: %s", code, stderr)
	}
	serve("--signing-key", next)
	if got := keys(); len(got) != 1 || got[0] != newPub {
		t.Fatalf("after retiring the old key and restarting: keys %v, want [%s]", got, newPub)
	}
}

// startServe runs `cuecast serve` on repoDir with data as --data until stop
// (or the end of the test) and returns the NATS URL it announces and its
// stderr; stop cancels it, checks that it exited 0 and returns the stderr.
func startServe(t *testing.T, repoDir, data string, args ...string) (url string, stderr *syncBuffer, stop func() string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		io := &iostreams.IOStreams{In: strings.NewReader(""), Out: &syncBuffer{}, ErrOut: stderr}
		done <- cli.Main(ctx, append([]string{"serve", "--repo", repoDir, "--data", data, "--listen", "127.0.0.1:0"}, args...), io, func(string) string { return "" })
	}()
	announced := regexp.MustCompile(`cuecast serve: NATS at (\S+);`)
	await(t, "serve running", func() bool { return announced.MatchString(stderr.String()) })
	var once bool
	var log string
	stop = func() string {
		t.Helper()
		if !once {
			once = true
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("serve exited %d: %s", code, stderr)
			}
			log = stderr.String()
		}
		return log
	}
	t.Cleanup(func() { stop() })
	return announced.FindStringSubmatch(stderr.String())[1], stderr, stop
}

// TestVariantAfterKeyRotation follows docs/OPERATIONS.md, "Rotating the
// signing key", to its end on the example repository, whose search/suggest
// has variants: after serve switched to the new key and the old one is
// retired, a watch and an agent trusting only the new key take their
// variant of search/suggest. The variant index was published (and signed)
// before the switch, and versions are never written again: the index is
// authenticated by its pointer, which serve re-signed.
func TestVariantAfterKeyRotation(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	data := t.TempDir()
	const variant = "search/suggest/env=prod/region=eu"

	_, serveLog, stop := startServe(t, repo.Dir, data)
	// The index and the variant published and pointed at, all under the old
	// key, so that the new serve has their pointers to re-sign.
	for _, cfg := range []string{"search/suggest ", `"` + variant + `"`} {
		poll.Until(t, "pointers of "+cfg+"under the old key", poll.Patience, func() (bool, string) {
			return strings.Contains(serveLog.String(), `msg="set pointers" config=`+cfg), "serve's log:\n" + serveLog.String()
		})
	}
	stop()
	oldPub := trustedKeys(t, data)[0]
	code, _, stderr := run(context.Background(), "keys", "new", "--data", data)
	if code != 0 {
		t.Fatalf("keys new: exit %d: %s", code, stderr)
	}
	next := filepath.Join(data, "signing.next.nk")
	url, serveLog, _ := startServe(t, repo.Dir, data, "--signing-key", next)
	// Started before it, a watcher would see the old key's pointers first.
	poll.Until(t, "the pointers re-signed", poll.Patience, func() (bool, string) {
		return strings.Contains(serveLog.String(), "re-signed pointers with the current key"), "serve's log:\n" + serveLog.String()
	})
	if code, _, stderr := run(context.Background(), "keys", "retire", oldPub, "--data", data, "--signing-key", next); code != 0 {
		t.Fatalf("keys retire: exit %d: %s", code, stderr)
	}
	code, keys, stderr := run(context.Background(), "keys", "--data", data)
	if code != 0 {
		t.Fatalf("keys: exit %d: %s", code, stderr)
	}
	trust := filepath.Join(t.TempDir(), "trusted-keys")
	if err := os.WriteFile(trust, []byte(keys.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	stdout, werr := startCmd(t, "watch", "--nats", url, "--config", "search/suggest", "--instance", "search-canary-1",
		"--dim", "env=prod", "--dim", "region=eu", "--trusted-keys-file", trust)
	out := t.TempDir()
	_, aerr := startCmd(t, "agent", "--nats", url, "--instance", "search-canary-2", "--trusted-keys-file", trust,
		"--config", "search/suggest", "--dir", out, "--variant", "env=prod,region=eu")
	poll.Until(t, "watch applying the variant", poll.Patience, func() (bool, string) {
		return strings.Contains(stdout.String(), `"config":"`+variant+`","version":1`), "stdout " + stdout.String() + "\nstderr " + werr.String()
	})
	file := filepath.Join(out, "search", "suggest.json")
	poll.Until(t, "the agent writing the variant", poll.Patience, func() (bool, string) {
		_, err := os.Stat(file)
		return err == nil, "agent stderr " + aerr.String()
	})
	for _, log := range []*syncBuffer{werr, aerr} {
		if strings.Contains(log.String(), "refused") || strings.Contains(log.String(), "bad signature") {
			t.Errorf("refusals after the rotation:\n%s", log)
		}
	}
}

// trustedKeys are the keys `cuecast keys --data data` prints.
func trustedKeys(t *testing.T, data string) []string {
	t.Helper()
	code, out, stderr := run(context.Background(), "keys", "--data", data)
	if code != 0 {
		t.Fatalf("keys: exit %d: %s", code, stderr)
	}
	var ks []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			ks = append(ks, l)
		}
	}
	return ks
}
