package compiler

import (
	"testing"
	"testing/fstest"
)

// TestMemFS runs the standard file system conformance checks.
func TestMemFS(t *testing.T) {
	m := newMemFS()
	m.add("cue.mod/module.cue", []byte("module: \"x.test/m\"\n"))
	m.add("a/b/c.cue", []byte("package c\n"))
	m.add("a/b/d.cue", []byte("package c\n"))
	m.add("a/e.cue", []byte("package a\n"))
	m.add("root.cue", []byte("package manifest\n"))
	m.add("a/e.cue", []byte("package a // replaced\n"))
	if err := fstest.TestFS(m, "cue.mod/module.cue", "a/b/c.cue", "a/b/d.cue", "a/e.cue", "root.cue"); err != nil {
		t.Fatal(err)
	}
}
