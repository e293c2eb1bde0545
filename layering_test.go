package cuecast_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// layer is each package's place in the import order docs/ARCHITECTURE.md
// draws ("Imports point one way"), by path below the module root; a package
// not listed takes the layer of its nearest listed parent.
var layer = map[string]int{
	"":                    0, // the root package: the shared vocabulary
	"schemas":             0,
	"configs-example":     0,
	"flags":               0, // the evaluator: standard library only, so the compiler can validate sets
	"gitfs":               1,
	"compiler":            1,
	"bindings":            1, // typed bindings from a schema: CUE only
	"distributor":         1,
	"client":              1,
	"analysis":            1, // the metric queries and comparisons: the controller and check both ask it
	"tailer":              2,
	"ci":                  2,
	"distributor/rollout": 2,
	"flags/openfeature":   2,
	// push and pull requests, which cuecast revert and the mutator share
	"internal/publish":  3,
	"mutator":           4, // set at the origin: compiles and checks (ci), then publishes
	"internal/redact":   0, // takes secrets out of printed URLs: every layer prints some
	"internal/termtext": 0, // escapes terminal controls in repository text: ci and internal/cli print it
	"internal":          5,
	"cmd":               6,
}

// forbidden are imports the layers alone would allow but ARCHITECTURE.md
// rules out: the tailer and the distributor know each other only through
// the tailer's interfaces, and client/ imports nothing of the module but
// the root package.
var forbidden = map[string][]string{
	"tailer":      {"distributor"},
	"distributor": {"tailer"},
	"client":      {"gitfs", "compiler", "distributor", "tailer", "ci", "flags", "schemas", "configs-example", "internal", "cmd"},
}

func layerOf(p string) (int, string) {
	for q := p; ; {
		if l, ok := layer[q]; ok {
			return l, q
		}
		i := strings.LastIndexByte(q, '/')
		if i < 0 {
			return layer[""], ""
		}
		q = q[:i]
	}
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// allowed reports whether package p may import q (both relative to the
// module root): q sits in a lower layer, or in the same layer and under the
// same listed package as p (flags/openfeature imports flags), or both are
// internal.
func allowed(p, q string) bool {
	for from, tos := range forbidden {
		if under(p, from) {
			for _, f := range tos {
				if under(q, f) {
					return false
				}
			}
		}
	}
	lp, rp := layerOf(p)
	lq, rq := layerOf(q)
	return lq < lp || (lq == lp && rp == rq)
}

// TestImportLayering reads every package's imports with `go list` and fails
// on one against the order docs/ARCHITECTURE.md documents. Test files are
// not checked: tests may use the harnesses in internal/ (client/'s own
// rule for its tests is TestFootprint's).
func TestImportLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/cuecast/cuecast"
	rel := func(p string) (string, bool) {
		if p == mod {
			return "", true
		}
		r, ok := strings.CutPrefix(p, mod+"/")
		return r, ok
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		p, ok := rel(fields[0])
		if !ok {
			continue
		}
		for _, imp := range fields[1:] {
			q, ok := rel(imp)
			if !ok {
				continue
			}
			checked++
			if !allowed(p, q) {
				t.Errorf("%s imports %s, against docs/ARCHITECTURE.md's import order", fields[0], imp)
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list found no import between the module's packages")
	}
}

// TestLayeringRule: the rule itself, on imports the module does not (and
// must not) have.
func TestLayeringRule(t *testing.T) {
	for _, c := range []struct {
		p, q string
		ok   bool
	}{
		{"tailer", "compiler", true},
		{"tailer", "gitfs", true},
		{"ci", "gitfs", true},
		{"tailer", "internal/gitfs", false},
		{"ci", "internal/poll", false},
		{"compiler", "tailer", false},
		{"tailer", "distributor", false},
		{"tailer", "distributor/rollout", false},
		{"distributor", "tailer", false},
		{"distributor/rollout", "distributor", true},
		{"flags/openfeature", "flags", true},
		{"flags", "ci", false},
		{"flags", "client", false},
		{"compiler", "flags", true},
		{"client", "gitfs", false},
		{"client", "", true},
		{"gitfs", "compiler", false},
		{"internal/cli", "internal/pipeline", true},
		{"internal/pipeline", "tailer", true},
		{"cmd/cuecast", "internal/cli", true},
		{"internal/cli", "cmd/cuecast", false},
		{"", "compiler", false},
	} {
		if got := allowed(c.p, c.q); got != c.ok {
			t.Errorf("allowed(%q imports %q) = %v, want %v", c.p, c.q, got, c.ok)
		}
	}
}

// TestMakeDemoSaysWhatItBuilds: on a fresh machine the first make demo is
// minutes of module downloads; the target says what is being built and
// about how long before it starts (issue 33, item 14).
func TestMakeDemoSaysWhatItBuilds(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed: README's quick start (make demo, make test) needs it")
	}
	cmd := exec.Command("make", "-n", "--no-print-directory", "demo")
	// Under make test this is a sub-make: keep the outer make's flags out.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "echo ") || !strings.Contains(lines[0], "building bin/cuecast") ||
		!strings.Contains(lines[0], "minutes") || !strings.Contains(lines[1], "build -o bin/cuecast") {
		t.Fatalf("make demo should say what it builds and how long before building; it runs:\n%s", out)
	}
}
