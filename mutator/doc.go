// Package mutator changes values of a config repository the way a person
// would in a reviewed commit, for tools and for people who do not write
// CUE: `cuecast set`, `cuecast flags set` and the HTTP API all call it.
//
// A Request names configs, CUE paths and new values. For each value the
// mutator finds its origin with the analysis `cuecast explain` uses
// (compiler.ExplainEach); where the origin is a literal in the repo (or a
// default written in the config's own directory) it replaces exactly that
// literal, splicing the new literal's bytes at the old one's offsets so
// that every other byte of the file (comments, layout, order) stays as it
// was. A value that is computed, read through a reference, injected by a
// variant's @tag or defaulted by a schema is refused with a *RefusedError
// saying where it comes from and what would have to change, unless the
// request names an override file (Request.At).
//
// The edit becomes a commit object on top of the branch head, and the
// configs it affects are recompiled incrementally by ci.Check, the PR check
// itself: a change that breaks the schema, a lint or a config importing the
// changed one is refused with a *CompileError carrying the compiler's own
// file:line before any branch moves. Otherwise the branch (or a new one for
// a pull request) is moved to the commit, the work tree follows when that
// branch is checked out, and the commit is pushed when the repository has
// the remote configured.
//
//	m := mutator.New("/srv/configs", mutator.Options{})
//	res, err := m.Set(ctx, mutator.Request{
//		Configs:  []cuecast.ConfigPath{"growth/flags"},
//		Set:      []mutator.Assignment{{Path: `flags."new-checkout".fallthrough.rollout.weights[0].weight`, Value: "50000"}},
//		Expect:   []mutator.Assignment{{Path: `flags."new-checkout".fallthrough.rollout.weights[0].weight`, Value: "20000"}},
//		Reason:   "raise new-checkout to half the users",
//		Identity: mutator.Identity{Name: "Alice", Email: "alice@example.com"},
//		Mode:     mutator.ModeCommit,
//	})
//
// # Concurrency: the landing strip
//
// A Mutator serialises its requests: each is applied on top of the branch
// head as it is when the request's turn comes, and recompiled there. One
// Mutator per repository directory is what makes that hold, so a server
// keeps one and shares it between its handlers; Set is safe for concurrent
// use. Request.Expect is a compare-and-set on the value (not the file):
// when the value is no longer the expected one the request fails with a
// *ConflictError naming the current value, and nothing is written.
// Two Mutators on one repository (two processes) are not serialised with
// each other, but the branch moves only from the head a change was built
// on, under git's <ref>.lock: the second to land fails with ErrConflict.
//
// # Errors
//
// Set returns *ConflictError (errors.Is ErrConflict), *RefusedError
// (ErrRefused), *CompileError (ErrInvalid), *RequestError (ErrBadRequest:
// an unknown config, path or variant, or a value that is not a literal),
// *PolicyError (ErrForbidden: the manifest's changes: policy, read at the
// head the change applies to, or Request.Namespaces do not allow it),
// or an error of Git, GitHub or ctx. The caller maps them to exit codes
// or HTTP statuses.
package mutator
