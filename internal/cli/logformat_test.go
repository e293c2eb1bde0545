package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/cli"
)

// TestErrorsAsJSON: with --log-format json, the error a command ends with
// is a JSON record too (level ERROR, err, hint, exit), so that stderr stays
// one JSON object per line, as OPERATIONS promises, when serve or any
// command fails. It was the plain "cuecast: …" and "hint: …" lines.
func TestErrorsAsJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		code int
		err  string
		hint string
	}{
		{"usage", []string{"log", "payments/checkout", "--limit", "0"}, cli.ExitUsage, "--limit 0", "pass a positive --limit"},
		{"failure", []string{"status", "--nats", "nats://127.0.0.1:1"}, cli.ExitFailure, "127.0.0.1:1", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := run(context.Background(), append([]string{"--log-format", "json"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tt.code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			var last map[string]any
			for _, l := range lines {
				last = nil
				if err := json.Unmarshal([]byte(l), &last); err != nil {
					t.Fatalf("stderr line %q is not JSON: %v", l, err)
				}
			}
			if last["level"] != "ERROR" || !strings.Contains(last["err"].(string), tt.err) || last["exit"] != float64(tt.code) {
				t.Errorf("last record %v, want level ERROR, err naming %q, exit %d", last, tt.err, tt.code)
			}
			if hint, _ := last["hint"].(string); hint != tt.hint {
				t.Errorf("hint %q, want %q", hint, tt.hint)
			}
		})
	}
}
