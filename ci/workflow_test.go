package ci_test

import (
	"os"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/yaml"
)

// TestWorkflow keeps the shipped workflow honest: the trigger, the least
// permissions that work, full history, installing cuecast, and running the
// check against GitHub.
func TestWorkflow(t *testing.T) {
	src, err := os.ReadFile("cuecast-check.yml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := yaml.Extract("cuecast-check.yml", src)
	if err != nil {
		t.Fatalf("parse workflow: %v", err)
	}
	v := cuecontext.New().BuildFile(f)
	var wf struct {
		On          map[string]any    `json:"on"`
		Permissions map[string]string `json:"permissions"`
		Jobs        map[string]struct {
			Steps []struct {
				Uses string            `json:"uses"`
				With map[string]any    `json:"with"`
				Run  string            `json:"run"`
				Env  map[string]string `json:"env"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := v.Decode(&wf); err != nil {
		t.Fatalf("decode workflow: %v", err)
	}
	if _, ok := wf.On["pull_request"]; !ok || len(wf.On) != 1 {
		t.Errorf("on: got %v, want pull_request only", wf.On)
	}
	wantPerms := map[string]string{"checks": "write", "pull-requests": "write", "contents": "read"}
	if len(wf.Permissions) != len(wantPerms) {
		t.Errorf("permissions: got %v, want %v", wf.Permissions, wantPerms)
	}
	for k, want := range wantPerms {
		if wf.Permissions[k] != want {
			t.Errorf("permissions.%s: got %q, want %q", k, wf.Permissions[k], want)
		}
	}
	var checkout, install, check bool
	for _, s := range wf.Jobs["check"].Steps {
		switch {
		case strings.HasPrefix(s.Uses, "actions/checkout@"):
			checkout = s.With["fetch-depth"] == int64(0) || s.With["fetch-depth"] == 0.0 || s.With["fetch-depth"] == 0
		case strings.Contains(s.Run, "go install github.com/cuecast/cuecast/cmd/cuecast@latest"):
			install = true
		case strings.HasPrefix(s.Run, "cuecast check") && strings.Contains(s.Run, "--github"):
			check = s.Env["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
		}
	}
	if !checkout || !install || !check {
		t.Errorf("steps: checkout with fetch-depth 0 %v, go install %v, cuecast check --github with GITHUB_TOKEN %v; want all", checkout, install, check)
	}
}
