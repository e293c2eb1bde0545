// Package nodetest runs OpenFeature's JavaScript SDKs in tests: it installs
// the npm packages pinned in npm/package.json and npm/package-lock.json
// (the server and web SDKs and their OFREP providers) with `npm ci` into a
// cache directory, once per lock file, and runs Node scripts against them.
//
// The cache is $CUECAST_NODE_CACHE, else the user's cache directory
// (cuecast-node-<digest of the lock>); an install is built aside and
// renamed into place, so test binaries running at once share it safely.
// A test needing Node is skipped, saying why, only when node or npm is not
// on $PATH.
package nodetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

var (
	//go:embed npm/package.json
	packageJSON []byte
	//go:embed npm/package-lock.json
	packageLock []byte
)

// Install returns the directory holding the installed node_modules, after
// running `npm ci` there if no earlier run did. It skips t when node or npm
// is missing, and fails it when the install fails.
func Install(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("nodetest: no %s on $PATH: the OpenFeature JavaScript SDK tests need Node.js and npm", tool)
		}
	}
	base := os.Getenv("CUECAST_NODE_CACHE")
	if base == "" {
		var err error
		if base, err = os.UserCacheDir(); err != nil {
			base = os.TempDir()
		}
	}
	sum := sha256.Sum256(append(append([]byte{}, packageJSON...), packageLock...))
	dir := filepath.Join(base, "cuecast-node-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	tmp, err := os.MkdirTemp(base, "cuecast-node-install-")
	if err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	defer os.RemoveAll(tmp)
	for name, b := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			t.Fatalf("nodetest: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nodetest: npm ci in %s: %v\n%s", tmp, err, out)
	}
	// Another test binary may have won the race: its install is as good.
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); statErr != nil {
			t.Fatalf("nodetest: install into %s: %v", dir, err)
		}
	}
	return dir
}

// Script writes src as an ES module into dir (from Install), where it
// resolves the installed packages, and returns its path; it is removed
// when t ends.
func Script(t testing.TB, dir, src string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "script-*.mjs")
	if err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.WriteString(src); err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("nodetest: %v", err)
	}
	return f.Name()
}

// Run runs the module src with node in dir and the environment env added,
// and returns its stdout; a failure fails t with its stderr.
func Run(ctx context.Context, t testing.TB, dir, src string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", Script(t, dir, src))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}
