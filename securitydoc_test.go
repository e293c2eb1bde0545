package cuecast_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSecurityDocNamesRealTests: every test the security documents name
// as the proof of a claim is declared somewhere in the module, and every
// testscript they name exists, so a renamed or deleted test cannot leave
// a claim standing on nothing.
func TestSecurityDocNamesRealTests(t *testing.T) {
	var doc strings.Builder
	for _, name := range []string{"SECURITY.md", filepath.Join("docs", "SECURITY.md")} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		doc.Write(b)
	}
	named := regexp.MustCompile(`\b(Test[A-Z][A-Za-z0-9_]*)`).FindAllStringSubmatch(doc.String(), -1)
	scripts := regexp.MustCompile("`([A-Za-z0-9_-]+\\.txtar)`").FindAllStringSubmatch(doc.String(), -1)
	if len(named) < 50 {
		t.Fatalf("found %d test names in the security documents; the pattern no longer matches how they name tests", len(named))
	}
	declared := map[string]bool{}
	txtars := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "bin"):
			return filepath.SkipDir
		case strings.HasSuffix(path, ".txtar"):
			txtars[d.Name()] = true
		case strings.HasSuffix(path, "_test.go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
				declared[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, m := range named {
		if !declared[m[1]] {
			missing = append(missing, m[1])
		}
	}
	for _, m := range scripts {
		if !txtars[m[1]] {
			missing = append(missing, m[1])
		}
	}
	slices.Sort(missing)
	if missing = slices.Compact(missing); len(missing) > 0 {
		t.Errorf("the security documents name tests that do not exist: %s", strings.Join(missing, ", "))
	}
}
