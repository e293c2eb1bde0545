// Package flags evaluates cuecast feature flags in-process: a flag set
// config (schemas/flags.cue, #FlagSet; docs/FLAGS.md) is compiled once per
// version into an Evaluator, and each evaluation returns the value, the
// variant and the reason (OpenFeature's: STATIC, DEFAULT, TARGETING_MATCH,
// SPLIT, DISABLED, PREREQUISITE_FAILED, ERROR) without allocating.
//
//	w, err := client.Typed[*flags.Evaluator](ctx, c, "payments/flags", client.LastKnownGood(path))
//	if err != nil { ... }
//	defer w.Stop()
//	if err := w.WaitReady(ctx); err != nil { ... } // errors.Is(err, client.ErrNotReady)
//	e, _ := w.Value()
//	on, res := e.Bool("checkout-v2", flags.Context{"targetingKey": userID, "country": "NL"}, false)
//	// res.Variant, res.Reason, res.Rule, res.Position
//
// Compile (or encoding/json into an *Evaluator) builds an Evaluator from a
// set's JSON and refuses a set Validate finds wrong (errors wrapping
// ErrInvalid, one *FieldError per problem, naming the flag and the field)
// or of another schema (ErrUnsupportedSchema). Position is the bucketing
// every SDK shares; testdata/flags/v1.json holds the vectors every SDK
// runs. An Evaluator is immutable and safe for concurrent use; the methods
// of a nil *Evaluator return ERROR results (ErrorNotReady) rather than
// panic, so a service can evaluate before its first version.
//
// Evaluation errors are results, not Go errors: Reason ERROR with
// ErrorFlagNotFound, ErrorTypeMismatch (a typed read of a flag of another
// type) or ErrorNotReady, and the typed methods return the caller's
// default. The OpenFeature provider is in flags/openfeature, a separate
// package so that this one does not import the OpenFeature SDK.
//
// On amd64 a position of a short input (55 bytes or less: most salts and
// targeting keys) is hashed with the CPU's SHA extensions when it has
// them, in assembly; elsewhere, and with the build tag purego, by
// crypto/sha256. Both give the same positions (TestFirstWordAgreesWithSHA256).
package flags
