package compiler

import "testing"

func TestFindHotSpot(t *testing.T) {
	files := map[string][]byte{
		"a/a.cue": []byte("package a\n\nname: \"x\"\n"),
		"a/slow.cue": []byte(`package a

level: "a" | "b"
combos: (1 | 2 | 3 | 4 | 5) & (1 | 2 | 3 | 4 | 5 | 6) & (5 | 6 | 7)
`),
	}
	h, ok := findHotSpot(files, []string{"a/a.cue", "a/slow.cue"})
	if !ok || h.file != "a/slow.cue" || h.line != 4 || h.field != "combos" || h.what != "3 disjunctions unified, 90 combinations" {
		t.Errorf("got %+v, %v; want the unified disjunctions of combos at a/slow.cue:4", h, ok)
	}
	if _, ok := findHotSpot(map[string][]byte{"b.cue": []byte("x: 1\n")}, []string{"b.cue"}); ok {
		t.Error("a file with nothing costly has a hot spot")
	}
}
