package mutator_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cuecast/cuecast/mutator"
)

// TestSetReadOnlyFile: the file the change edits is on a read-only mount
// (a bind mount of the file itself, remounted read-only), which refuses
// root's writes too (EROFS). Before, the branch moved and the work-tree
// write then failed, leaving the work tree and index at the old commit.
// Mounting needs root or CAP_SYS_ADMIN; TestSetWorkTreeUnwritable covers
// the rest without it.
func TestSetReadOnlyFile(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	const file = "payments/refunds/refunds.cue"
	p := filepath.Join(r.Dir, file)
	if err := syscall.Mount(p, p, "", syscall.MS_BIND, ""); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("cannot bind-mount %s (%v): run as root, or with CAP_SYS_ADMIN", file, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", p, err)
		}
	})
	if err := syscall.Mount("", p, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", p, err)
	}
	unchanged := keepsState(t, r)
	_, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), set("payments/refunds", "auto_approve_max_minor", "20000"))
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "nothing changed") {
		t.Errorf("set of a read-only %s: %v, want an error naming it and saying nothing changed", file, err)
	}
	unchanged("a failed set")
}
