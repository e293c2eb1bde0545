package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestActor(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = Ann Example\n\temail = ann@example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"explicit", map[string]string{"CUECAST_ACTOR": "deploy-bot", "HOME": home, "USER": "root"}, "deploy-bot"},
		{"git identity before $USER", map[string]string{"HOME": home, "USER": "root"}, "Ann Example <ann@example.com>"},
		{"$USER without a git identity", map[string]string{"HOME": empty, "XDG_CONFIG_HOME": empty, "USER": "bob"}, "bob"},
		{"$USERNAME", map[string]string{"HOME": empty, "XDG_CONFIG_HOME": empty, "USERNAME": "carol"}, "carol"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HOME", tt.env["HOME"])
			t.Setenv("XDG_CONFIG_HOME", tt.env["XDG_CONFIG_HOME"])
			got, err := actor(&Env{Getenv: func(k string) string { return tt.env[k] }})
			if err != nil || got != tt.want {
				t.Errorf("actor = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("nothing set: the account and host, never unknown", func(t *testing.T) {
		t.Setenv("HOME", empty)
		t.Setenv("XDG_CONFIG_HOME", empty)
		got, err := actor(&Env{Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatalf("actor: %v", err)
		}
		if got == "" || got == "unknown" || !strings.Contains(got, "@") {
			t.Errorf("actor = %q, want account@host", got)
		}
	})
}
