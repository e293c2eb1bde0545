package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast/internal/cli"
)

// TestDocsNameRealCommandsAndFlags: every `cuecast COMMAND … --FLAG` a
// reader can copy, from the docs (every Markdown file but CHANGELOG) and
// from every command's own --help, names a command and flags that command
// has, and every `make TARGET` a target of the Makefile. A flag renamed or
// dropped in the code and not in a doc would send a reader who follows it
// literally to "unknown flag" (the docs are contracts; the guides' own
// tests run their lines, this checks the lines no test runs, such as
// OPERATIONS.md's serve). Its table of serve's flags names serve's flags.
func TestDocsNameRealCommandsAndFlags(t *testing.T) {
	tree := cli.CommandTree()
	root := tree[0]
	texts := map[string]string{}
	for _, c := range tree {
		texts[c.CommandPath()+" --help"] = helpCode(c.Long + "\n" + c.Example)
	}
	top := repoRoot(t)
	for _, p := range docFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(top, p)
		texts[rel] = markdownCode(string(b))
	}
	checked := 0
	for where, text := range texts {
		for _, line := range commandLines(text) {
			if msg := checkCommandLine(root, line); msg != "" {
				t.Errorf("%s: %q: %s", where, line, msg)
			}
			checked++
		}
	}
	// And every `make TARGET` a doc runs is a target of the Makefile.
	mk, err := os.ReadFile(filepath.Join(top, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	for where, text := range texts {
		for _, l := range strings.Split(text, "\n") {
			for _, p := range commandSep.Split(l, -1) {
				if m := makeRun.FindStringSubmatch(p); m != nil && !targets[m[1]] {
					t.Errorf("%s: %q: the Makefile has no target %q", where, strings.TrimSpace(p), m[1])
				}
			}
		}
	}
	// OPERATIONS.md's table of serve's flags ("| flag | what it is |",
	// after serve's command line) names serve's flags.
	serve, _, _ := root.Find([]string{"serve"})
	rows := 0
	_, table, _ := strings.Cut(readDoc(t, "OPERATIONS.md"), "\n| flag | what it is |\n|---|---|\n")
	table, _, _ = strings.Cut(table, "\n\n")
	for line := range strings.Lines(table) {
		rows++
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range codeSpan.FindAllStringSubmatch(first, -1) {
			if f := flagWord.FindStringSubmatch(m[1]); f != nil && serve.Flag(f[1]) == nil {
				t.Errorf("docs/OPERATIONS.md: the table of serve's flags names --%s, which serve does not have", f[1])
			}
		}
	}
	if rows < 10 {
		t.Errorf("docs/OPERATIONS.md: %d rows in the table of serve's flags: want the table (is it still there?)", rows)
	}
	t.Logf("%d command lines checked", checked)
	if checked < 100 {
		t.Errorf("checked %d command lines in the docs and --help: want the hundreds they hold (is the extraction broken?)", checked)
	}
}

// docFiles is every Markdown file a reader follows: docs/*.md and the
// READMEs, SECURITY, CONTRIBUTING and BENCHMARKS. CHANGELOG is history: it
// names flags as they were.
func docFiles(t *testing.T) []string {
	t.Helper()
	top := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"README.md", "SECURITY.md", "CONTRIBUTING.md", "BENCHMARKS.md", "ci/README.md", "configs-example/README.md", "testdata/flags/README.md"} {
		docs = append(docs, filepath.Join(top, name))
	}
	return docs
}

// TestDocShellBlocksParse: every ```sh block of the docs is shell that
// bash can read (bash -n), so a reader who pastes one runs commands, not a
// syntax error half-way; what is not shell (a Go call, a listing) goes in
// a block of its own language. The guides' own tests run their blocks;
// this reads the blocks no test runs.
func TestDocShellBlocksParse(t *testing.T) {
	top := repoRoot(t)
	blocks := 0
	for _, p := range docFiles(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(top, p)
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) != "```sh" {
				continue
			}
			start := i + 1
			var body []string
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				body = append(body, lines[i])
			}
			blocks++
			cmd := exec.Command("bash", "-n")
			cmd.Stdin = strings.NewReader(strings.Join(body, "\n") + "\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: the sh block at line %d is not shell bash can read: %v\n%s", rel, start, err, out)
			}
		}
	}
	if blocks < 20 {
		t.Errorf("read %d sh blocks in the docs: want the dozens they hold (is the extraction broken?)", blocks)
	}
}

// TestDocCommandLines: what TestDocsNameRealCommandsAndFlags takes for a
// command in a doc, and what it finds wrong in one.
func TestDocCommandLines(t *testing.T) {
	root := cli.CommandTree()[0]
	for _, tc := range []struct {
		name, md string
		want     []string // what checkCommandLine says of each command found
	}{
		{"a fenced command", "```sh\ncuecast status payments/checkout --output json\n```\n", []string{""}},
		{"a misspelt flag", "```sh\ncuecast serve --repo . --git-token-fil f\n```\n", []string{"cuecast serve has no flag --git-token-fil"}},
		{"continued lines, after variables and a substitution", "```sh\nT=$(cat t) \\\ncuecast serve \\\n  --no-such-flag\n```\n", []string{"cuecast serve has no flag --no-such-flag"}},
		{"a code span, then a pipe", "run `cuecast status x | jq --raw-output .`", []string{""}},
		{"no such command", "`cuecast statuz x`", []string{`cuecast has no command "statuz"`}},
		{"no such subcommand", "`cuecast nats-config hubb --name h`", []string{`cuecast nats-config has no subcommand "hubb"`}},
		{"any subcommand", "`nats-config … --auth jwt` and `cuecast nats-config … --auth jwt`", []string{""}},
		{"prose", "cuecast serve --no-such-flag is prose here, and `a cuecast thing` too", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, line := range commandLines(markdownCode(tc.md)) {
				got = append(got, checkCommandLine(root, line))
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// helpCode is the commands in a command's help: its indented lines
// (examples) and the commands it quotes in prose ('cuecast keys').
func helpCode(help string) string {
	var out []string
	for _, l := range strings.Split(help, "\n") {
		if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
			out = append(out, l)
		}
		for _, m := range quoted.FindAllStringSubmatch(l, -1) {
			out = append(out, m[1])
		}
	}
	return strings.Join(out, "\n")
}

// markdownCode is the code in a Markdown text: its fenced blocks' lines
// and its inline code spans, one to a line.
func markdownCode(md string) string {
	var out []string
	fenced := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, strings.TrimRight(line, "\n"))
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return strings.Join(out, "\n")
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// What starts a command in a shell line: the line's start, a list or
	// pipe operator, a subshell or command substitution; then any
	// variable assignments and a prompt.
	commandSep = regexp.MustCompile(`&&|\|\||[;|()]|\$\(`)
	commandPre = regexp.MustCompile(`^\s*(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*cuecast\s+([a-z].*)$`)
	// A help text quotes a command in single quotes ('cuecast keys').
	quoted     = regexp.MustCompile(`'(cuecast [^']+)'`)
	makeRun    = regexp.MustCompile(`^\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*make\s+([a-z][a-z0-9_-]*)`)
	makeTarget = regexp.MustCompile(`(?m)^([a-z][a-z0-9_-]*):`)
	flagWord   = regexp.MustCompile(`^--([a-z][a-z0-9-]*)`)
)

// commandLines is every cuecast command that text runs: from its first
// word after cuecast to where the shell's command ends (a pipe, a list
// operator, a comment, a redirection, the line's end); continuation lines
// are joined. Prose that names cuecast is not a command.
func commandLines(text string) []string {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var pieces []string
	for _, l := range strings.Split(text, "\n") {
		pieces = append(pieces, commandSep.Split(l, -1)...)
	}
	var lines []string
	for _, p := range pieces {
		m := commandPre.FindStringSubmatch(p)
		if m == nil {
			continue
		}
		cmd := m[1]
		if i := strings.IndexAny(cmd, "#>)`"); i >= 0 {
			cmd = cmd[:i]
		}
		lines = append(lines, strings.TrimSpace(cmd))
	}
	return lines
}

// checkCommandLine finds line's command under root (its leading words
// that name subcommands) and says what in it that command does not have:
// "" when every --flag is the command's or inherited.
func checkCommandLine(root *cobra.Command, line string) string {
	// Find resolves the words as cuecast itself does; rest is what is
	// left once the command's path is taken out.
	c, rest, _ := root.Find(strings.Fields(line))
	if c == root && len(rest) > 0 && commandName.MatchString(rest[0]) {
		return fmt.Sprintf("cuecast has no command %q", rest[0])
	}
	if c.HasSubCommands() && len(rest) > 0 && (rest[0] == "…" || rest[0] == "...") {
		// "nats-config … --auth jwt": any of its subcommands; which
		// one is not said.
		return ""
	}
	// Every command with subcommands only groups them (guardGroups).
	if c.HasSubCommands() && len(rest) > 0 && commandName.MatchString(rest[0]) {
		return fmt.Sprintf("%s has no subcommand %q", c.CommandPath(), rest[0])
	}
	var unknown []string
	for _, w := range rest {
		if m := flagWord.FindStringSubmatch(w); m != nil && c.Flag(m[1]) == nil && m[1] != "help" {
			unknown = append(unknown, "--"+m[1])
		}
	}
	if len(unknown) > 0 {
		return fmt.Sprintf("%s has no flag %s", c.CommandPath(), strings.Join(unknown, ", "))
	}
	return ""
}

var commandName = regexp.MustCompile(`^[a-z][a-z-]*$`)
