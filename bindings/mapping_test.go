package bindings_test

import (
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"

	"github.com/cuecast/cuecast/bindings"
)

// TestMapping: the rules the example schemas do not reach, one line of
// generated Go or TypeScript each.
func TestMapping(t *testing.T) {
	t.Parallel()
	// A loaded package, as compiler.Schemas gives: its references name
	// their import path.
	dir := t.TempDir()
	insts := load.Instances([]string{"."}, &load.Config{Dir: dir, Overlay: map[string]load.Source{
		filepath.Join(dir, "cue.mod", "module.cue"): load.FromString("module: \"example.com/x@v0\"\nlanguage: version: \"v0.17.0\"\n"),
		filepath.Join(dir, "schema.cue"): load.FromString(`package x

#Config: {
	max_amount: int
	maxAmount:  int
	ratio:      number
	renamed:    string @go(Title)
	skipped:    string @go(-)
	plain?:     int @go(,optional=zero)
	counts: {total: int, [string]: int}
	next?: #Config
	ns:    #Namespace
	kind:  "a" | "b"
	any:   string | int
}
#Namespace: string
`),
	}})
	pkg := cuecontext.New().BuildInstance(insts[0])
	if err := pkg.Err(); err != nil {
		t.Fatal(err)
	}
	def := pkg.LookupPath(cue.ParsePath("#Config"))
	goSrc, err := bindings.Go("my-ns", "example.com/x#Config", def, bindings.GoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tsSrc, err := bindings.TypeScript("my-ns", "example.com/x#Config", def)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src       []byte
		want, why string
	}{
		{goSrc, "package myns\n", "a namespace's - is dropped from the package name"},
		{goSrc, "MaxAmount int64 `json:\"max_amount\"`", "snake case in mixed caps"},
		{goSrc, "MaxAmount2 int64 `json:\"maxAmount\"`", "two CUE names making one Go name stay apart"},
		{goSrc, "Ratio float64 `json:\"ratio\"`", "number is float64"},
		{goSrc, "Title string `json:\"renamed\"`", "@go(Name) renames"},
		{goSrc, "Plain int64 `json:\"plain,omitempty\"`", "@go(,optional=zero) keeps the plain type"},
		{goSrc, "Extra map[string]int64 `json:\"-\"`", "a pattern beside named fields is Extra, typed"},
		{goSrc, "Next *Config `json:\"next,omitempty\"`", "a cycle is a pointer"},
		{goSrc, "type Namespace2 string", "a definition named like the file's Namespace constant is renamed"},
		{goSrc, "Any any `json:\"any\"`", "a disjunction of kinds is any"},
		{tsSrc, "kind: \"a\" | \"b\";", "a disjunction of strings is a union of literals"},
		{tsSrc, "next?: Config;", "an optional field is optional"},
		{tsSrc, "counts: ConfigCounts;", "an open struct is a named interface"},
	} {
		if !strings.Contains(string(c.src), c.want) {
			t.Errorf("%s: want %q in\n%s", c.why, c.want, c.src)
		}
	}
	if strings.Contains(string(goSrc), "skipped") {
		t.Errorf("@go(-) field generated:\n%s", goSrc)
	}
}
