//go:build linux

package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/diskfull"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// nobody is the uid of the other user whose symlinks and directories the
// tests play; making them someone else's takes root.
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("playing another user's symlinks and directories needs chown: run as root")
	}
}

// symlinkOf makes link -> target owned by uid.
func symlinkOf(t *testing.T, target, link string, uid int) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// reportsHealthy waits for instance's report of cfg to say healthy (or not).
func reportsHealthy(t *testing.T, p *pipeline.Pipeline, cfg cuecast.ConfigPath, instance string, healthy bool, stderr fmt.Stringer) {
	t.Helper()
	awaitReport(t, p, cfg, instance, fmt.Sprintf("%s reporting healthy %v", instance, healthy), stderr,
		func(r cuecast.Report) bool { return r.Healthy == healthy })
}

func bumpCheckout(t *testing.T, repo *gittest.Repo, p *pipeline.Pipeline, from, to string) {
	t.Helper()
	path := filepath.Join(repo.Dir, "payments", "checkout", "checkout.cue")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	repo.CommitFiles("checkout: bill in "+to, map[string]string{
		"payments/checkout/checkout.cue": strings.Replace(string(b), `"`+from+`"`, `"`+to+`"`, 1),
	})
	p.Tailer.Wake()
}

// TestAgentStaysInDir plays the audit's attacks on a running root agent's
// --dir: "payments -> victim", another user's symlink in place of the
// directory, made the agent replace victim/checkout.json; "search ->
// victim3" swapped in after the agent wrote search/ranking.json made it
// remove victim3/ranking.json when the config was deleted; and a
// directory under --dir another user owns let them replace what the
// service reads. Now the agent refuses to write or remove there, says why
// on stderr, reports itself unhealthy, keeps running, and writes once the
// directory is its own again. At start it removes the temporary files a
// killed agent left (they stayed forever).
func TestAgentStaysInDir(t *testing.T) {
	needRoot(t)
	t.Parallel()
	repo, p := serveExample(t)
	out, victim, victim3 := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(victim, "checkout.json"), "root's own")
	writeFile(t, filepath.Join(victim3, "ranking.json"), "root's own")
	staleTmp := filepath.Join(out, "search", ".tmp-1234")
	staleLKG := filepath.Join(out, ".cuecast", "search", ".ranking.lkg.tmp-5678")
	writeFile(t, staleTmp, "half")
	writeFile(t, staleLKG, "half")

	_, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "fs-1", "--heartbeat", "1s",
		"--trusted-key", p.PublicKey, "--config", "payments/checkout", "--config", "search/ranking", "--config", "growth/flags", "--dir", out)
	ranking := filepath.Join(out, "search", "ranking.json")
	pay := filepath.Join(out, "payments")
	checkout := filepath.Join(pay, "checkout.json")
	await(t, "the files", func() bool {
		return exists(ranking) && exists(filepath.Join(out, "growth", "flags.json")) && fileContains(checkout, `"currency":"EUR"`)()
	})
	if exists(staleTmp) || exists(staleLKG) {
		t.Errorf("stale temporary files left: %v %v", exists(staleTmp), exists(staleLKG))
	}

	// payments swapped for another user's symlink.
	if err := os.Rename(pay, pay+".old"); err != nil {
		t.Fatal(err)
	}
	symlinkOf(t, victim, pay, nobody)
	bumpCheckout(t, repo, p, "EUR", "USD")
	poll.Until(t, "the write through a symlink refused", poll.Patience, func() (bool, string) {
		return strings.Contains(stderr.String(), pay+": is a symlink"), fmt.Sprintf("stderr %q", stderr)
	})
	reportsHealthy(t, p, "payments/checkout", "fs-1", false, stderr)
	if b, _ := os.ReadFile(filepath.Join(victim, "checkout.json")); string(b) != "root's own" {
		t.Errorf("victim/checkout.json is now %q", b)
	}
	// The owner of --dir puts the directory back: the retry writes.
	if err := os.Remove(pay); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pay+".old", pay); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "written once payments is a directory again", poll.Patience, writtenAgain(stderr, "payments/checkout", 1))
	reportsHealthy(t, p, "payments/checkout", "fs-1", true, stderr)
	if !fileContains(checkout, `"currency":"`)() {
		t.Error("payments/checkout.json not written in --dir")
	}

	// A directory someone else owns: refused, then written once it is the
	// agent's again.
	if err := os.Chown(pay, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	bumpCheckout(t, repo, p, "USD", "GBP")
	poll.Until(t, "the write in nobody's directory refused", poll.Patience, func() (bool, string) {
		return strings.Contains(stderr.String(), pay+": is owned by uid 65534"), fmt.Sprintf("stderr %q", stderr)
	})
	reportsHealthy(t, p, "payments/checkout", "fs-1", false, stderr)
	if fileContains(checkout, "GBP")() {
		t.Error("wrote into a directory another user owns")
	}
	if err := os.Chown(pay, 0, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "written once payments is the agent's again", poll.Patience, writtenAgain(stderr, "payments/checkout", 2))
	reportsHealthy(t, p, "payments/checkout", "fs-1", true, stderr)
	if !fileContains(checkout, `"currency":"`)() {
		t.Error("payments/checkout.json not written in --dir")
	}

	// search swapped for a symlink after the write; the config is deleted.
	if err := os.Rename(filepath.Join(out, "search"), filepath.Join(out, "search.old")); err != nil {
		t.Fatal(err)
	}
	symlinkOf(t, victim3, filepath.Join(out, "search"), nobody)
	repo.Remove("search/ranking")
	repo.Commit("search: retire ranking")
	p.Tailer.Wake()
	poll.Until(t, "the remove through a symlink refused", poll.Patience, func() (bool, string) {
		return strings.Contains(stderr.String(), "remove "+ranking), fmt.Sprintf("stderr %q", stderr)
	})
	if !exists(filepath.Join(victim3, "ranking.json")) {
		t.Error("victim3/ranking.json removed")
	}
	// search put back: the retry removes the agent's own file.
	if err := os.Remove(filepath.Join(out, "search")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(out, "search.old"), filepath.Join(out, "search")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "ranking.json removed (or rewritten by a rollback) once search is a directory again", poll.Patience,
		writtenAgain(stderr, "search/ranking", 1))
	reportsHealthy(t, p, "growth/flags", "fs-1", true, stderr)

	// The directory of a last-known-good copy, which the client writes
	// by path, is checked as well. Another namespace: payments's rollout
	// may have halted on the unhealthy reports above.
	flagsFile := filepath.Join(out, "growth", "flags.json")
	lkgDir := filepath.Join(out, ".cuecast", "growth")
	if err := os.Chown(lkgDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(repo.Dir, "growth", "flags", "flags.cue")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	repo.CommitFiles("growth: the one-page checkout to 30%", map[string]string{
		"growth/flags/flags.cue": strings.Replace(string(b), "weight: 20000}, {variant: \"off\", weight: 80000", "weight: 30000}, {variant: \"off\", weight: 70000", 1),
	})
	p.Tailer.Wake()
	poll.Until(t, "the write with nobody's .cuecast/growth refused", poll.Patience, func() (bool, string) {
		return strings.Contains(stderr.String(), lkgDir+": is owned by uid 65534"), fmt.Sprintf("stderr %q", stderr)
	})
	reportsHealthy(t, p, "growth/flags", "fs-1", false, stderr)
	if fileContains(flagsFile, "30000")() {
		t.Error("wrote the file with .cuecast/growth another user's")
	}
	if err := os.Chown(lkgDir, 0, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "written once .cuecast/growth is the agent's again", poll.Patience, writtenAgain(stderr, "growth/flags", 1))
	reportsHealthy(t, p, "growth/flags", "fs-1", true, stderr)
}

// TestAgentRefusesDir: at start, a --dir that is another user's symlink
// (the audit's "out3 -> victim" in a sticky 1777 directory made root
// create victim/.cuecast and victim/payments), or a directory another user
// owns or can write, is refused: exit 2 naming the directory, its owner
// and mode, and nothing is made there. A symlink of the agent's own user
// is followed once, and said.
func TestAgentRefusesDir(t *testing.T) {
	needRoot(t)
	t.Parallel()
	_, p := serveExample(t)
	tmp := t.TempDir()
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	victim := t.TempDir()
	symlinkOf(t, victim, filepath.Join(tmp, "out3"), nobody)
	theirs := filepath.Join(tmp, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(tmp, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	withLink := filepath.Join(tmp, "withlink")
	if err := os.Mkdir(withLink, 0o755); err != nil {
		t.Fatal(err)
	}
	symlinkOf(t, victim, filepath.Join(withLink, "payments"), nobody)
	writeFile(t, filepath.Join(victim, "checkout.json"), "root's own")
	for _, tc := range []struct{ dir, want string }{
		{withLink, filepath.Join(withLink, "payments") + ": is a symlink"},
		{filepath.Join(tmp, "out3"), "is a symlink owned by uid 65534"},
		{theirs, theirs + ": is owned by uid 65534 (mode -rwxr-xr-x)"},
		{shared, shared + ": is writable by group or others (owner uid 0, mode -rwxrwxrwx)"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
		code, _, errOut := run(ctx, "agent", "--nats", p.ClientURL(), "--instance", "fs-2",
			"--trusted-key", p.PublicKey, "--config", "payments/checkout", "--dir", tc.dir)
		cancel()
		if code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("--dir %s: exit %d, stderr %q; want exit 2 saying %q", tc.dir, code, errOut, tc.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(victim, "checkout.json")); string(b) != "root's own" {
		t.Errorf("victim/checkout.json is now %q", b)
	}
	for _, made := range []string{filepath.Join(victim, ".cuecast"), filepath.Join(victim, "payments"), filepath.Join(theirs, ".cuecast"), filepath.Join(shared, ".cuecast")} {
		if exists(made) {
			t.Errorf("%s made", made)
		}
	}

	// The agent's own symlink is followed, once, and said.
	mine := filepath.Join(tmp, "mine")
	real := t.TempDir()
	if err := os.Symlink(real, mine); err != nil {
		t.Fatal(err)
	}
	_, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "fs-3",
		"--trusted-key", p.PublicKey, "--config", "payments/checkout", "--dir", mine)
	await(t, "checkout written through the agent's own symlink", fileContains(filepath.Join(real, "payments", "checkout.json"), "EUR"))
	if !strings.Contains(stderr.String(), "writing in "+real) {
		t.Errorf("stderr %q; want it to say where it writes", stderr)
	}
}

// TestAgentFullDisk: a write failing on a full --dir made the agent log
// "no space left on device" and exit 1, and every restart while full exit
// again, while the instance still showed healthy. Now it reports itself
// unhealthy, says so naming the file, keeps running, and writes the
// version once there is space.
func TestAgentFullDisk(t *testing.T) {
	t.Parallel()
	fsys := diskfull.Mount(t, 64<<10)
	repo, p := serveExample(t)
	out := filepath.Join(fsys, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "fs-4", "--heartbeat", "1s",
		"--trusted-key", p.PublicKey, "--config", "payments/checkout", "--dir", out)
	checkout := filepath.Join(out, "payments", "checkout.json")
	await(t, "checkout written", fileContains(checkout, `"currency":"EUR"`))
	filler := diskfull.Fill(t, fsys)
	bumpCheckout(t, repo, p, "EUR", "USD")
	poll.Until(t, "the failed write said", poll.Patience, func() (bool, string) {
		return strings.Contains(stderr.String(), "write "+checkout) && strings.Contains(stderr.String(), "no space left on device"),
			fmt.Sprintf("stderr %q", stderr)
	})
	// Unhealthy, and why: the report's last error names the file relative
	// to --dir (where this host keeps it is no reader's business), after
	// the client's own error saving its last-known-good copy.
	awaitReport(t, p, "payments/checkout", "fs-4", "fs-4 reporting unhealthy with the failed write", stderr, func(r cuecast.Report) bool {
		return !r.Healthy && strings.Contains(r.LastError, "write payments/checkout.json: ") &&
			strings.Contains(r.LastError, "no space left on device") && !strings.Contains(r.LastError, checkout)
	})
	if !fileContains(checkout, `"currency":"EUR"`)() {
		t.Error("the old file did not stay intact")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "written once there is space", poll.Patience, writtenAgain(stderr, "payments/checkout", 1))
	awaitReport(t, p, "payments/checkout", "fs-4", "fs-4 reporting healthy, no error", stderr, func(r cuecast.Report) bool {
		return r.Healthy && r.LastError == ""
	})
}

// TestWatchLastKnownGoodSymlink: watch --lkg made its file's directory
// through a symlink another user put on the path (here "state -> victim"
// in a sticky 1777 directory), so a root watch created directories, and
// then wrote, where they pointed. Now it stops at start, exit 1, naming the
// symlink and its owner, and makes nothing.
func TestWatchLastKnownGoodSymlink(t *testing.T) {
	needRoot(t)
	t.Parallel()
	_, p := serveExample(t)
	tmp, victim := t.TempDir(), t.TempDir()
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	symlinkOf(t, victim, filepath.Join(tmp, "state"), nobody)
	lkg := filepath.Join(tmp, "state", "cuecast", "checkout.lkg")
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	code, _, errOut := run(ctx, "watch", "--nats", p.ClientURL(), "--config", "payments/checkout", "--instance", "web-3",
		"--trusted-key", p.PublicKey, "--lkg", lkg)
	if code != 1 || !strings.Contains(errOut.String(), filepath.Join(tmp, "state")+" is a symlink owned by uid 65534") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the symlink and its owner", code, errOut)
	}
	if exists(filepath.Join(victim, "cuecast")) {
		t.Error("made victim/cuecast")
	}
}

// writtenAgain is, for poll.Until, the agent's n-th "written again" of
// cfg: the failed write, or a later one, made. Which version that is
// depends on the rollout: reported unhealthy, the instance may be rolled
// back to the version before.
func writtenAgain(stderr fmt.Stringer, cfg string, n int) func() (bool, string) {
	return func() (bool, string) {
		return strings.Count(stderr.String(), cfg+" written again") >= n, fmt.Sprintf("agent stderr %q", stderr)
	}
}
