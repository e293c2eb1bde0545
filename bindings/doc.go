// Package bindings writes typed bindings of a namespace's schema
// definition, so that a service reads its configs as its own types: Go
// structs with a Watch helper built on client.Typed, TypeScript types, and
// a JSON Schema for every other language. `cuecast gen go|ts|jsonschema
// NAMESPACE` runs it; `cuecast check` compares the bindings of a PR's base
// and head and warns when a schema change changes them.
//
//	s, errs, err := compiler.Schemas(ctx, "configs", compiler.Options{})
//	// handle err and errs
//	src, err := bindings.Go("payments", s["payments"].Ref, s["payments"].Value, bindings.GoOptions{})
//
// The Go mapping is that of `cue exp gengotypes`, whose code lives in
// cmd/cue's internal packages and cannot be imported; the changes to it
// are so that every output of a namespace decodes without losing a field
// (Go's doc says which). JSON Schema is CUE's own encoder
// (cuelang.org/go/encoding/jsonschema), with cuecast's schema of a flag
// (flag.schema.json) where it leaves a flag set's #Flag open. CUE has no
// TypeScript encoder: TypeScript comes from the same walk of the CUE value
// as Go, so both name the same types.
//
// The functions are pure: they read the CUE value they are given and
// return the source; a cue.Value must not be used from two goroutines at
// once, so neither may they be on one value.
package bindings
