package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsDocExample runs docs/FLAGS.md's `$ cuecast flags eval …` line in
// configs-example, as the page says, and compares what it prints with the
// page's block (the line named a flag configs-example does not have, and
// exited 2: issue 33, item 8).
func TestFlagsDocExample(t *testing.T) {
	root := repoRoot(t)
	_, rest, ok := strings.Cut(readDoc(t, "FLAGS.md"), "\n$ cuecast flags eval ")
	if !ok {
		t.Fatal("docs/FLAGS.md shows no `$ cuecast flags eval` line")
	}
	block, _, _ := strings.Cut(rest, "\n```")
	line, want, _ := strings.Cut(block, "\n")
	t.Chdir(filepath.Join(root, "configs-example"))
	code, stdout, stderr := run(t.Context(), append([]string{"flags", "eval"}, strings.Fields(line)...)...)
	if code != 0 {
		t.Fatalf("cuecast flags eval %s: exit %d\n%s", line, code, stderr)
	}
	if got := strings.TrimSpace(stdout.String()); got != strings.TrimSpace(want) {
		t.Fatalf("cuecast flags eval %s prints\n%s\nwhere docs/FLAGS.md shows\n%s", line, got, want)
	}
}
