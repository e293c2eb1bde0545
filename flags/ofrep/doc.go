// Package ofrep serves cuecast flag sets over the OpenFeature Remote
// Evaluation Protocol (OFREP, github.com/open-feature/protocol,
// service/openapi.yaml), so that any OpenFeature SDK with an OFREP provider
// (Node, the browser, Java, Python, .NET, Go…) evaluates them with no
// cuecast code: `cuecast serve --http` serves the version of every flag set
// the fleet is meant to run (the newest published, unless a rollback or a
// halt moves it back), `cuecast agent --ofrep` the host's own verified copy.
//
//	store := ofrep.NewStore()
//	_, err := store.Apply("growth/flags", 3, content, false) // each version as it arrives
//	h, err := ofrep.New(ofrep.Options{Store: store, Tokens: tokens})
//	mux.Handle("/ofrep/", h)
//
// Both endpoints are the spec's: POST /ofrep/v1/evaluate/flags/{key} and
// POST /ofrep/v1/evaluate/flags (bulk, with ETag and If-None-Match → 304).
// A flag's key is its config path and its name, "growth/flags/new-checkout"
// (a flag name has no "/", so the last segment is the flag); a bulk
// evaluation returns every flag of every set the caller may read, keyed so.
// Evaluation is flags.Evaluator's, with the same values, variants and
// reasons as in-process; metadata carries the config, its version, the
// rule that matched and the bucket position a rollout used.
//
// Errors are the spec's, never a 500 for what a request carries (a store
// marked not ready, Store.SetNotReady, answers 500 GENERAL "not ready", as
// do a key of a config still waiting for its first version and a bulk
// evaluation that would include one, Store.Pending; NotReady gives a
// server's own): an unknown flag or set is 404
// FLAG_NOT_FOUND; a body that is not JSON, or larger than
// Options.MaxBody, 400 PARSE_ERROR; a missing context, one that is not an
// object, or a targetingKey that is not a string, 400 INVALID_CONTEXT. With
// Options.Tokens, a request without a known token (Authorization: Bearer,
// or X-API-Key) is 401, and one for a flag outside its token's namespaces
// 403, decided from the key alone so that it says nothing of whether the
// flag exists. OFREP carries no type (its ADR 3): a type mismatch is found
// by the provider, which compares the value with the caller's default.
//
// A Store and a Handler are safe for concurrent use; an evaluation reads
// an immutable snapshot of the store and takes no lock.
package ofrep
