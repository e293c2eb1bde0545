package mutator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/mutator"
)

// A tool raising a value where it is written: the literal is edited in
// place, the config recompiled and the change committed on main, authored
// by who asked.
func ExampleMutator_Set() {
	dir, _ := os.MkdirTemp("", "mutator-example")
	defer os.RemoveAll(dir)
	files := map[string]string{
		"cue.mod/module.cue": "module: \"example.com/configs@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: web: owners: [\"team-web\"]\n",
		"web/api/api.cue":    "package api\n\n// Scaled for the launch.\nreplicas: 3 // per region\n",
	}
	r, _ := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.Main}})
	wt, _ := r.Worktree()
	for name, content := range files {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		_ = os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
		_, _ = wt.Add(name)
	}
	_, _ = wt.Commit("configs", &git.CommitOptions{Author: &object.Signature{Name: "Ada", Email: "ada@example.com"}})

	m := mutator.New(dir, mutator.Options{})
	res, err := m.Set(context.Background(), mutator.Request{
		Configs:  []cuecast.ConfigPath{"web/api"},
		Set:      []mutator.Assignment{{Path: "replicas", Value: "5"}},
		Expect:   []mutator.Assignment{{Path: "replicas", Value: "3"}},
		Reason:   "traffic doubled",
		Identity: mutator.Identity{Name: "Autoscaler", Email: "autoscaler@example.com"},
		Mode:     mutator.ModeCommit,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	v := res.Values[0]
	fmt.Printf("%s %s: %s -> %s (%s at %s)\n", v.Config, v.Path, v.Old, v.New, v.Origin, v.Edited)
	b, _ := os.ReadFile(filepath.Join(dir, "web/api/api.cue"))
	fmt.Print(string(b))
	// Output:
	// web/api replicas: 3 -> 5 (literal at web/api/api.cue:4:11)
	// package api
	//
	// // Scaled for the launch.
	// replicas: 5 // per region
}
