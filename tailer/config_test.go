package tailer_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/cuecast/cuecast/tailer"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cfg    tailer.Config
		remote bool
		gitDir string
		err    error
	}{
		{name: "local", cfg: tailer.Config{Repo: "/src/configs"}, gitDir: "/src/configs"},
		{name: "relative", cfg: tailer.Config{Repo: "configs"}, gitDir: "configs"},
		{name: "https", cfg: tailer.Config{Repo: "https://github.com/x/y.git", DataDir: "/d"}, remote: true, gitDir: filepath.Join("/d", "repos", "default")},
		{name: "ssh", cfg: tailer.Config{Repo: "ssh://git@github.com/x/y.git", DataDir: "/d", ID: "y"}, remote: true, gitDir: filepath.Join("/d", "repos", "y")},
		{name: "scp-like", cfg: tailer.Config{Repo: "git@github.com:x/y.git", DataDir: "/d"}, remote: true, gitDir: filepath.Join("/d", "repos", "default")},
		{name: "file url", cfg: tailer.Config{Repo: "file:///srv/y.git", DataDir: "/d"}, remote: true, gitDir: filepath.Join("/d", "repos", "default")},
		{name: "path with colon", cfg: tailer.Config{Repo: "./a:b"}, gitDir: "./a:b"},
		{name: "no repo", cfg: tailer.Config{}, err: tailer.ErrInvalidConfig},
		{name: "remote without data", cfg: tailer.Config{Repo: "https://x/y"}, remote: true, err: tailer.ErrInvalidConfig},
		{name: "bad id", cfg: tailer.Config{Repo: "/r", ID: "a b"}, err: tailer.ErrInvalidConfig},
		{name: "bad branch", cfg: tailer.Config{Repo: "/r", Branch: "a..b~1"}, err: tailer.ErrInvalidConfig},
		{name: "negative interval", cfg: tailer.Config{Repo: "/r", Interval: -1}, err: tailer.ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); !errors.Is(err, tt.err) {
				t.Fatalf("Validate: got %v, want %v", err, tt.err)
			}
			if got := tt.cfg.Remote(); got != tt.remote {
				t.Errorf("Remote: got %v, want %v", got, tt.remote)
			}
			if tt.err == nil {
				if got := tt.cfg.GitDir(); got != tt.gitDir {
					t.Errorf("GitDir: got %q, want %q", got, tt.gitDir)
				}
			}
		})
	}
}
