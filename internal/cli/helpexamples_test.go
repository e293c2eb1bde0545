package cli_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast/internal/cli"
)

// TestHelpExamplesRun runs the Examples of every command that works on a
// config repository alone (no NATS, no GitHub) as written, on a copy of
// configs-example as the current directory: a reader who copies one must
// succeed. Only what cannot run here is changed: --repo names the copy,
// a landing (--commit, --github-pr) becomes --dry-run with an author, and
// init runs in an empty directory. Several examples named a config,
// variant, flag, rule or path configs-example does not have.
func TestHelpExamplesRun(t *testing.T) {
	repo := exampleRepo(t)
	head, err := repo.Git.Head()
	if err != nil {
		t.Fatal(err)
	}
	// The refs check's examples name.
	for _, name := range []plumbing.ReferenceName{"refs/remotes/origin/main", "refs/heads/my-branch"} {
		if err := repo.Git.Storer.SetReference(plumbing.NewHashReference(name, head.Hash())); err != nil {
			t.Fatal(err)
		}
	}
	offline := []string{"cuecast check", "cuecast compile", "cuecast explain", "cuecast flags eval", "cuecast flags set", "cuecast gen", "cuecast init", "cuecast set"}
	ran := 0
	for _, c := range cli.CommandTree() {
		if !slices.Contains(offline, c.CommandPath()) {
			continue
		}
		for _, line := range commandLines(c.Example) {
			args := shellWords(line)
			if slices.ContainsFunc(args, func(a string) bool {
				// What needs a server, GitHub or the CI's environment.
				return a == "--published" || a == "--fleet" || a == "--github" || strings.Contains(a, "$")
			}) {
				continue
			}
			args = runnable(args)
			t.Run(line, func(t *testing.T) {
				dir := repo.Dir
				if c.Name() == "init" {
					dir = t.TempDir()
				}
				t.Chdir(dir)
				code, stdout, stderr := run(context.Background(), args...)
				if code != 0 {
					t.Errorf("cuecast %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
				}
			})
			ran++
		}
	}
	if ran < 15 {
		t.Errorf("ran %d examples; the filter is wrong", ran)
	}
}

// runnable is an example's words with only what cannot run here changed.
func runnable(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "--repo":
			out = append(out, a, ".")
			i++
		case "--commit", "--github-pr":
			out = append(out, "--dry-run", "--as", "Ann <ann@example.com>")
		default:
			out = append(out, a)
		}
	}
	return out
}

// shellWords splits a command line as sh does for what examples hold:
// words, and single- and double-quoted strings.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}
