//go:build unix

package ofrep_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/flags/ofrep"
)

// TestReadTokensFileMode: a tokens file other users may read gives their
// tokens away, and one its group or others may write lets them add their
// own, so ReadTokensFile refuses it, naming the chmod; mode 600 and 640
// pass. The mode is set after writing, whatever the umask. (Unix only:
// Windows files have no such mode, and ReadTokensFile does not check it
// there.)
func TestReadTokensFileMode(t *testing.T) {
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true}, {0o640, true}, {0o440, true},
		{0o644, false}, {0o604, false}, {0o660, false}, {0o620, false}, {0o602, false}, {0o666, false},
	} {
		t.Run(fmt.Sprintf("%04o", c.mode), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte("growth "+tokenB+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, c.mode); err != nil {
				t.Fatal(err)
			}
			tokens, err := ofrep.ReadTokensFile(path)
			switch {
			case c.ok && err != nil:
				t.Errorf("mode %04o: %v, want it read", c.mode, err)
			case c.ok && tokens == nil:
				t.Errorf("mode %04o: no tokens", c.mode)
			case !c.ok && (!errors.Is(err, ofrep.ErrTokensFileMode) || !strings.Contains(err.Error(), "chmod 600 "+path)):
				t.Errorf("mode %04o: %v, want ErrTokensFileMode naming chmod 600 %s", c.mode, err, path)
			}
		})
	}
}
