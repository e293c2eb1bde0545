package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
)

// outDir is the agent's --dir. Every file the agent creates, writes,
// renames or removes goes through root, so a symlink or ".." anywhere
// below --dir cannot lead a write outside it; and every directory written
// in must be the agent's own (owned by its user, not writable by group or
// others), or whoever can write it could swap the file the service reads
// for one no trusted key signed.
type outDir struct {
	path string // --dir, symlink resolved once at start
	root *os.Root
	uid  int
}

// dirError is a directory the agent will not write in: someone else's,
// or one others can write.
type dirError struct {
	path string
	why  string
}

func (e *dirError) Error() string { return e.path + ": " + e.why }

// openOutDir opens --dir (making it, 0755, when missing). A --dir that is
// a symlink is followed once, here, and said on errOut; one owned by
// another user is refused, as they could point it anywhere.
func openOutDir(dir string, errOut io.Writer, who string) (*outDir, error) {
	uid := os.Geteuid()
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("--dir %s: %w", dir, err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("--dir %s: %w", dir, err)
	}
	resolved := dir
	if fi.Mode()&fs.ModeSymlink != 0 {
		if owner := ownerOf(fi); owner != uid && owner != 0 {
			return nil, &UsageError{
				Err:  fmt.Errorf("--dir %s is a symlink owned by uid %d, who can point it anywhere", dir, owner),
				Hint: "pass the directory itself, or a symlink the agent's user or root made"}
		}
		if resolved, err = filepath.EvalSymlinks(dir); err != nil {
			return nil, fmt.Errorf("--dir %s: %w", dir, err)
		}
		fmt.Fprintf(errOut, "%s: --dir %s is a symlink; writing in %s (resolved once, at start)\n", who, dir, resolved)
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		return nil, fmt.Errorf("--dir %s: %w", resolved, err)
	}
	// Checked through root, the directory every later write goes to,
	// however its path changes meanwhile.
	if fi, err = root.Stat("."); err == nil {
		err = ownDir(resolved, fi, uid)
	}
	if err != nil {
		root.Close()
		return nil, &UsageError{Err: fmt.Errorf("--dir %w", err),
			Hint: fmt.Sprintf("give the agent a directory its user (uid %d) owns that group and others cannot write (chmod go-w), or a path under a shared volume for it to make itself, like --dir /config/out (docs/SECURITY.md)", uid)}
	}
	return &outDir{path: resolved, root: root, uid: uid}, nil
}

func (d *outDir) close() error { return d.root.Close() }

// rel is msg with the paths under --dir made relative to it, and --dir
// itself named so, for the reports: where this host keeps the files is no
// reader's business.
func (d *outDir) rel(msg string) string {
	msg = strings.ReplaceAll(msg, d.path+string(filepath.Separator), "")
	return strings.ReplaceAll(msg, d.path, "--dir")
}

// abs is the path on disk of rel, a slash-separated name under --dir.
func (d *outDir) abs(rel string) string { return filepath.Join(d.path, filepath.FromSlash(rel)) }

func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// ownDir says why fi (at p) is not a directory only uid can write, if so.
func ownDir(p string, fi fs.FileInfo, uid int) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &dirError{p, "is a symlink, not a directory the agent made"}
	case !fi.IsDir():
		return &dirError{p, fmt.Sprintf("is not a directory (mode %s)", fi.Mode())}
	case ownerOf(fi) != uid:
		return &dirError{p, fmt.Sprintf("is owned by uid %d (mode %s), not the agent's uid %d", ownerOf(fi), fi.Mode().Perm(), uid)}
	case fi.Mode().Perm()&0o022 != 0:
		return &dirError{p, fmt.Sprintf("is writable by group or others (owner uid %d, mode %s)", ownerOf(fi), fi.Mode().Perm())}
	}
	return nil
}

// dir checks --dir and each directory of rel (slash-separated, under
// --dir) are the agent's own, making the missing ones (0755) when create.
// It reports whether rel exists.
func (d *outDir) dir(rel string, create bool) (bool, error) {
	fi, err := d.root.Stat(".")
	if err != nil {
		return false, fmt.Errorf("%s: %w", d.path, err)
	}
	if err := ownDir(d.path, fi, d.uid); err != nil {
		return false, err
	}
	cur := ""
	for _, name := range strings.Split(rel, "/") {
		cur = path.Join(cur, name)
		fi, err := d.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err = d.root.Mkdir(cur, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
				fi, err = d.root.Lstat(cur)
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", d.abs(cur), err)
		}
		if err := ownDir(d.abs(cur), fi, d.uid); err != nil {
			return false, err
		}
	}
	return true, nil
}

// write replaces rel with data atomically: a temporary file beside it,
// fsync, rename over. A file already holding data is left alone, so a
// restart on a full disk does not fail rewriting what is there.
func (d *outDir) write(rel string, data []byte) error {
	if _, err := d.dir(path.Dir(rel), true); err != nil {
		return fmt.Errorf("write %s: %w", d.abs(rel), err)
	}
	if old, err := d.root.ReadFile(rel); err == nil && bytes.Equal(old, data) {
		return nil
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(rel), tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", d.abs(rel), err)
	}
	err = writeSyncClose(f, data)
	if err == nil {
		err = d.root.Rename(tmp, rel)
	}
	if err != nil {
		d.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", d.abs(rel), err)
	}
	return nil
}

func writeSyncClose(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// remove removes rel, if there: only from a directory of the agent's.
func (d *outDir) remove(rel string) error {
	ok, err := d.dir(path.Dir(rel), false)
	if err != nil {
		return fmt.Errorf("remove %s: %w", d.abs(rel), err)
	}
	if !ok {
		return nil
	}
	if err := d.root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", d.abs(rel), err)
	}
	return nil
}

// tempPrefix starts the agent's temporary files; the client's
// last-known-good ones are ".<name>.lkg.tmp-*".
const tempPrefix = ".tmp-"

// removeStale removes the temporary files a killed agent left in dir
// (slash-separated, under --dir): nobody else writes in it.
func (d *outDir) removeStale(dir string) ([]string, error) {
	ok, err := d.dir(dir, false)
	if err != nil || !ok {
		return nil, err
	}
	f, err := d.root.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.abs(dir), err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.abs(dir), err)
	}
	var removed []string
	for _, n := range names {
		if !strings.HasPrefix(n, tempPrefix) && !(strings.HasPrefix(n, ".") && strings.Contains(n, ".lkg.tmp-")) {
			continue
		}
		rel := path.Join(dir, n)
		if fi, err := d.root.Lstat(rel); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := d.root.Remove(rel); err != nil {
			return removed, fmt.Errorf("remove %s: %w", d.abs(rel), err)
		}
		removed = append(removed, d.abs(rel))
	}
	return removed, nil
}

// startDirs checks cfg's directories under --dir at start, removes the
// temporary files a killed agent left there, and makes the one of its
// last-known-good file. A directory that is not the agent's stops it
// (exit 2); any other failure, like a full disk, is the instance's health
// until retryLoop makes it.
func (a *agent) startDirs(cfg cuecast.ConfigPath) error {
	lkgDir := path.Join(".cuecast", cfg.Namespace())
	for _, dir := range []string{path.Dir(string(cfg)), lkgDir} {
		removed, err := a.out.removeStale(dir)
		for _, f := range removed {
			fmt.Fprintf(a.env.IO.ErrOut, "agent %s: removed %s, left by an agent that was stopped mid-write\n", a.opts.Instance, f)
		}
		if err != nil {
			return a.startError(cfg, err)
		}
	}
	if _, err := a.out.dir(lkgDir, true); err != nil {
		return a.startError(cfg, err)
	}
	return nil
}

func (a *agent) startError(cfg cuecast.ConfigPath, err error) error {
	var de *dirError
	if errors.As(err, &de) {
		return &UsageError{Err: fmt.Errorf("--dir: %w", err),
			Hint: fmt.Sprintf("make it a directory of the agent's user (uid %d) that group and others cannot write, or remove it for the agent to make (docs/SECURITY.md)", a.out.uid)}
	}
	a.failedWrite(cfg, nil, err)
	return nil
}

// failedWrite records that cfg's write of s (nil: its last-known-good
// directory) failed, for health and retryLoop, and says so when the
// reason is new.
func (a *agent) failedWrite(cfg cuecast.ConfigPath, s *client.Snapshot, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s == nil {
		s = a.failed[cfg]
	}
	a.failed[cfg] = s
	if a.writeErr[cfg] != a.out.rel(err.Error()) {
		fmt.Fprintf(a.env.IO.ErrOut, "agent %s: %v; unhealthy, keeping what the service has and retrying\n", a.opts.Instance, err)
	}
	a.writeErr[cfg] = a.out.rel(err.Error())
}

// wrote clears cfg's failure, saying so if there was one.
func (a *agent) wrote(cfg cuecast.ConfigPath) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.writeErr[cfg]; ok {
		fmt.Fprintf(a.env.IO.ErrOut, "agent %s: %s written again\n", a.opts.Instance, cfg)
	}
	delete(a.failed, cfg)
	delete(a.writeErr, cfg)
}

// retryLoop retries the failed writes, after 1s and then twice as long
// each time they still fail, up to 10s (a write is cheap, and the service
// waits on it): a full disk freed, or a directory made the agent's again,
// is written without a restart.
func (a *agent) retryLoop(ctx context.Context) {
	const first, most = time.Second, 10 * time.Second
	pause := first
	t := time.NewTimer(pause)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if a.retry() {
			pause = min(2*pause, most)
		} else {
			pause = first
		}
		t.Reset(pause)
	}
}

// retry tries each failed write once; it reports whether any still fails.
func (a *agent) retry() bool {
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	a.mu.Lock()
	failed := maps.Clone(a.failed)
	a.mu.Unlock()
	for cfg, s := range failed {
		if _, err := a.out.dir(path.Join(".cuecast", cfg.Namespace()), true); err != nil {
			a.failedWrite(cfg, nil, err)
			continue
		}
		if s == nil {
			a.wrote(cfg)
			continue
		}
		if err := a.put(*s); err != nil {
			fmt.Fprintf(a.env.IO.ErrOut, "agent %s: %v\n", a.opts.Instance, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.failed) > 0
}
