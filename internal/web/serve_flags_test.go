package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
)

// TestServeFlagsNeedHTTP: a token or webhook secret flag without --http would
// be silently useless, so serve refuses it as wrong usage (exit 2). The
// environment variables are not refused: they may be set for every run.
func TestServeFlagsNeedHTTP(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"token flag", []string{"--operator-token", "x"}, nil},
		{"webhook flag", []string{"--webhook-secret", "x"}, nil},
		{"OFREP tokens flag", []string{"--ofrep-tokens", "x"}, nil},
		{"api tokens flag", []string{"--api-tokens", "tokens"}, nil},
		{"token flag with the environment's too", []string{"--operator-token", "x"}, map[string]string{"CUECAST_OPERATOR_TOKEN": "y"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			io, _, errOut := iostreams.Test()
			args := append([]string{"serve", "--repo", t.TempDir(), "--data", t.TempDir()}, c.args...)
			code := cli.Main(context.Background(), args, io, func(k string) string { return c.env[k] })
			if code != cli.ExitUsage || !strings.Contains(errOut.String(), "--http") {
				t.Errorf("serve %v: exit %d, stderr %q; want exit %d naming --http", c.args, code, errOut, cli.ExitUsage)
			}
		})
	}
}

// TestServeAPITokensFileChecked: a tokens file that does not parse (here
// holding a token instead of its SHA-256) stops serve before it starts.
func TestServeAPITokensFileChecked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("bot growth the-token-itself\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	io, _, errOut := iostreams.Test()
	args := []string{"serve", "--repo", t.TempDir(), "--data", t.TempDir(), "--http", "127.0.0.1:0", "--api-tokens", file}
	if code := cli.Main(context.Background(), args, io, func(string) string { return "" }); code != cli.ExitUsage || !strings.Contains(errOut.String(), "SHA-256") {
		t.Errorf("exit %d, stderr %q; want exit %d saying the file wants SHA-256s", code, errOut, cli.ExitUsage)
	}
}
