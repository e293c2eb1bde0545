package ci_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/yaml"
)

type workflow struct {
	On          map[string]any    `json:"on"`
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		Steps []workflowStep `json:"steps"`
	} `json:"jobs"`
}

type workflowStep struct {
	Name string            `json:"name"`
	Uses string            `json:"uses"`
	With map[string]any    `json:"with"`
	Run  string            `json:"run"`
	Env  map[string]string `json:"env"`
}

func readWorkflow(t *testing.T) workflow {
	t.Helper()
	src, err := os.ReadFile("cuecast-check.yml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := yaml.Extract("cuecast-check.yml", src)
	if err != nil {
		t.Fatalf("parse workflow: %v", err)
	}
	var wf workflow
	if err := cuecontext.New().BuildFile(f).Decode(&wf); err != nil {
		t.Fatalf("decode workflow: %v", err)
	}
	return wf
}

func installStep(t *testing.T, wf workflow) workflowStep {
	t.Helper()
	for _, s := range wf.Jobs["check"].Steps {
		if s.Name == "Install cuecast" {
			return s
		}
	}
	t.Fatal("the workflow has no step named \"Install cuecast\"")
	return workflowStep{}
}

var pinned = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// TestWorkflow keeps the shipped workflow honest: the trigger, the least
// permissions that work, full history, a pinned cuecast installed without
// building it, and running the check against GitHub.
func TestWorkflow(t *testing.T) {
	wf := readWorkflow(t)
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
		case s.Name == "Install cuecast":
			install = pinned.MatchString(s.Env["CUECAST_VERSION"]) && !strings.Contains(s.Run, "@latest") &&
				strings.Contains(s.Run, "sha256sum -c")
		case strings.HasPrefix(s.Run, "cuecast check") && strings.Contains(s.Run, "--github"):
			check = s.Env["GITHUB_TOKEN"] == "${{ secrets.GITHUB_TOKEN }}"
		}
	}
	if !checkout || !install || !check {
		t.Errorf("steps: checkout with fetch-depth 0 %v, pinned install checked against SHA256SUMS %v, cuecast check --github with GITHUB_TOKEN %v; want all", checkout, install, check)
	}
	src, err := os.ReadFile("cuecast-check.yml")
	if err != nil {
		t.Fatal(err)
	}
	if v := installStep(t, wf).Env["CUECAST_VERSION"]; !strings.Contains(string(src), "go install github.com/cuecast/cuecast/cmd/cuecast@"+v) {
		t.Errorf("the workflow's comment does not give the go install fallback at the pinned %s", v)
	}
}

// TestWorkflowInstallStep runs the install step's script as Actions would,
// against a local server laid out like a GitHub release (the script's
// CUECAST_DOWNLOAD_URL override): it installs a binary whose checksum matches
// and refuses one that does not.
func TestWorkflowInstallStep(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sha256sum", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run the workflow's install step: %v", tool, err)
		}
	}
	step := installStep(t, readWorkflow(t))
	version := step.Env["CUECAST_VERSION"]
	bin := "cuecast_" + version + "_linux_amd64"
	script := []byte("#!/bin/sh\necho cuecast " + version + "\n")
	sum := sha256.Sum256(script)
	for _, tt := range []struct {
		name    string
		sums    string
		wantErr bool
	}{
		{"checksum matches", hex.EncodeToString(sum[:]) + "  " + bin + "\n", false},
		{"checksum differs", strings.Repeat("0", 64) + "  " + bin + "\n", true},
		{"binary not listed", hex.EncodeToString(sum[:]) + "  cuecast_" + version + "_darwin_arm64\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/" + version + "/" + bin:
					w.Write(script)
				case "/" + version + "/SHA256SUMS":
					io.WriteString(w, tt.sums)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			tmp := t.TempDir()
			path := filepath.Join(tmp, "github_path")
			// A self-hosted runner's /tmp outlives the job; only RUNNER_TEMP
			// is emptied after it. The download must stay out of TMPDIR.
			machineTmp := t.TempDir()
			cmd := exec.Command("bash", "-c", step.Run)
			cmd.Env = append(os.Environ(), "RUNNER_OS=Linux", "RUNNER_ARCH=X64", "RUNNER_TEMP="+tmp,
				"GITHUB_PATH="+path, "CUECAST_VERSION="+version, "CUECAST_DOWNLOAD_URL="+srv.URL,
				"TMPDIR="+machineTmp)
			out, err := cmd.CombinedOutput()
			if left, _ := os.ReadDir(machineTmp); len(left) > 0 {
				t.Errorf("the step left %s in TMPDIR, which the runner does not empty after the job", left[0].Name())
			}
			if tt.wantErr {
				if err == nil {
					t.Fatalf("the step succeeded; want it to refuse the download:\n%s", out)
				}
				if _, err := os.Stat(filepath.Join(tmp, "cuecast-bin", "cuecast")); err == nil {
					t.Error("a binary was installed although its checksum did not verify")
				}
				return
			}
			if err != nil {
				t.Fatalf("install step: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "cuecast "+version) {
				t.Errorf("the step did not run the installed binary; output:\n%s", out)
			}
			added, err := os.ReadFile(path)
			if err != nil || strings.TrimSpace(string(added)) != filepath.Join(tmp, "cuecast-bin") {
				t.Errorf("GITHUB_PATH got %q (%v), want the install directory", added, err)
			}
		})
	}
}
