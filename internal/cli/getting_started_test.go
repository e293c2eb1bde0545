package cli_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cuecast/cuecast/internal/natstest"
)

// TestGettingStarted runs docs/GETTING-STARTED.md as written: every ```sh
// block, in order, in one bash (so cd, export and background jobs carry over
// as in the reader's terminal), with every file block (a fenced block after
// a `<!-- file: PATH -->` line) saved to PATH relative to the shell's
// directory at that point. It runs under testscript, whose PATH has this
// tree's cuecast. The doc cannot go stale: a command that fails, a file
// that does not compile, a wait that never ends, all fail this test.
//
// Three things differ from a reader's machine, each a substitution that
// must match the doc (so the doc cannot drift away from them either): the
// `git clone` (no network here: the clone is this tree, linked where the
// doc clones to), the `go install` from the clone (cuecast is already this
// build on testscript's PATH; building it again would cost make test a
// minute or more of CPU on a cold cache) and port 4222 (a free port, so
// parallel runs do not meet). The service's module takes the client from
// the clone by the doc's own `go mod edit` line, as written.
func TestGettingStarted(t *testing.T) {
	script := guideScript(t, "GETTING-STARTED.md")
	_, port, err := net.SplitHostPort(natstest.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct{ old, new string }{
		{`git clone https://github.com/cuecast/cuecast.git "$HOME/src/cuecast"`, `mkdir -p "$HOME/src" && ln -s "$CUECAST_TREE" "$HOME/src/cuecast"`},
		{`(cd "$CUECAST_SRC" && go install ./cmd/cuecast)`, "command -v cuecast"},
		{"127.0.0.1:4222", "127.0.0.1:" + port},
	} {
		if !strings.Contains(script, s.old) {
			t.Fatalf("docs/GETTING-STARTED.md no longer says %q; update TestGettingStarted's substitutions", s.old)
		}
		script = strings.ReplaceAll(script, s.old, s.new)
	}
	// The harness's own lines: stop on the first failing command, show each
	// command as it runs, never leave a background job behind, and give up
	// after 4 minutes (the doc's waits have no bound of their own).
	script = "set -eu\nset -x\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\ntrap 'echo getting-started: gave up after 4m >&2; exit 124' TERM\n" +
		"( sleep 240; kill -TERM $$ ) >/dev/null 2>&1 &\n" + script

	runDocScript(t, "getting-started", script,
		// What the doc promises along the way.
		"stdout 'created a cuecast config repo in configs'\n"+
			"stdout 'payments/checkout  v1 HOLDING'\n"+
			"stdout 'checkout-1: version 1: \"hello\"'\n"+
			"stdout 'none is deployed to this instance .* yet'\n"+
			"stdout 'checkout-2: version 1: \"hello\"'\n"+
			"stdout 'payments/checkout  v2 HOLDING'\n"+
			"stdout 'payments/checkout  v2  1/2 instances'\n"+
			"stdout 'payments/checkout@2: all 2 live instances report it'\n"+
			"stdout 'checkout-2: version 2: \"hello, world\"'\n")
}

// runDocScript runs a guide's script (docScript's output, with the
// harness's substitutions already made) in one bash under testscript,
// whose PATH has this tree's cuecast, then checks its output with the
// testscript lines in checks. The environment is a reader's fresh
// machine as far as this box allows: an empty HOME and GOPATH, the module
// cache this tree's build filled (offline), and a Git identity.
func runDocScript(t *testing.T, name, script, checks string) {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	txtar := "exec bash " + name + ".sh\n" + checks + "-- " + name + ".sh --\n" + script
	if err := os.WriteFile(filepath.Join(dir, name+".txtar"), []byte(txtar), 0o644); err != nil {
		t.Fatal(err)
	}
	goEnv := map[string]string{}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT"} {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		goEnv[k] = strings.TrimSpace(string(out))
	}
	testscript.Run(t, testscript.Params{
		Dir: dir,
		Setup: func(e *testscript.Env) error {
			for k, v := range goEnv {
				e.Setenv(k, v)
			}
			e.Setenv("CUECAST_TREE", root)
			// The doc puts $(go env GOPATH)/bin first on PATH: an empty
			// one, so that no cuecast installed on this machine shadows
			// this build (the module cache stays the shared one).
			e.Setenv("GOPATH", filepath.Join(e.WorkDir, "gopath"))
			e.Setenv("HOME", e.WorkDir)
			e.Setenv("PATH", filepath.Join(goEnv["GOROOT"], "bin")+string(os.PathListSeparator)+e.Getenv("PATH"))
			// Offline: the service's module resolves from the module cache
			// this tree's build filled.
			e.Setenv("GOPROXY", "off")
			e.Setenv("GOSUMDB", "off")
			e.Setenv("GOFLAGS", "-mod=mod -buildvcs=false")
			e.Setenv("GOTOOLCHAIN", "local")
			e.Setenv("GIT_AUTHOR_NAME", "Alice Engineer")
			e.Setenv("GIT_AUTHOR_EMAIL", "alice@example.com")
			e.Setenv("GIT_COMMITTER_NAME", "Alice Engineer")
			e.Setenv("GIT_COMMITTER_EMAIL", "alice@example.com")
			return nil
		},
	})
}

// readDoc is this tree's docs/name.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// guideScript is this tree's docs/name as one shell script (docScript).
func guideScript(t *testing.T, name string) string {
	t.Helper()
	script, err := docScript(readDoc(t, name))
	if err != nil {
		t.Fatalf("docs/%s: %v", name, err)
	}
	return script
}

// fileCaption is the line that makes the next fenced block a file.
var fileCaption = regexp.MustCompile(`^<!-- file: (\S+) -->$`)

// docScript turns a Markdown guide into one shell script: ```sh blocks as
// they are, file blocks as heredocs writing them. Other blocks are prose.
func docScript(doc string) (string, error) {
	var b strings.Builder
	lines := strings.Split(doc, "\n")
	file := ""
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fileCaption.FindStringSubmatch(line); m != nil {
			file = m[1]
			continue
		}
		if !strings.HasPrefix(line, "```") || line == "```" {
			if strings.TrimSpace(line) != "" {
				file = ""
			}
			continue
		}
		lang := strings.TrimPrefix(line, "```")
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if lines[i] == "```" {
				closed = true
				break
			}
			body = append(body, lines[i])
		}
		if !closed {
			return "", fmt.Errorf("the %s block at line %d is not closed", lang, i)
		}
		switch {
		case file != "":
			fmt.Fprintf(&b, "mkdir -p \"$(dirname '%s')\"\ncat > '%s' <<'CUECAST_DOC_EOF'\n%s\nCUECAST_DOC_EOF\n", file, file, strings.Join(body, "\n"))
		case lang == "sh":
			b.WriteString(strings.Join(body, "\n") + "\n")
		}
		file = ""
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("no sh blocks")
	}
	return b.String(), nil
}
