package mutator

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
)

// Sentinels matched with errors.Is; the typed errors below wrap them.
var (
	// ErrConflict: an expected value (Request.Expect) is not the current one
	// (a *ConflictError), or another writer moved or holds the branch or
	// the index while the change was verified: nothing was written, and
	// the request may be sent again.
	ErrConflict = errors.New("value changed since it was read")
	// ErrRefused: a value's origin is not a literal the mutator may edit.
	ErrRefused = errors.New("value cannot be set at its origin")
	// ErrInvalid: the change would leave a config invalid.
	ErrInvalid = errors.New("change breaks a config")
	// ErrBadRequest: the request names no such config, path or variant, or
	// a value that is not a CUE literal.
	ErrBadRequest = errors.New("bad request")
)

// ConflictError is Set's error when Request.Expect does not hold: Current
// is the value at the head the request was applied to.
type ConflictError struct {
	Config   cuecast.ConfigPath `json:"config"`
	Path     string             `json:"path"`
	Expected json.RawMessage    `json:"expected"`
	Current  json.RawMessage    `json:"current"`
	// Head is the commit the value was read at.
	Head string `json:"head"`
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s is %s, not %s as expected (at %s)", e.Config, e.Path, e.Current, e.Expected, cuecast.ShortCommit(e.Head))
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// conflictf is ErrConflict for a branch or an index another writer moved
// or holds: no value was compared, so the message does not say one changed
// (ErrConflict's text), only what moved and what to do.
func conflictf(format string, args ...any) error {
	return &writerConflict{msg: fmt.Sprintf(format, args...)}
}

type writerConflict struct{ msg string }

func (e *writerConflict) Error() string { return e.msg }
func (e *writerConflict) Unwrap() error { return ErrConflict }

// RefusedError is Set's error for a value whose origin the mutator does not
// edit: computed, a reference, a variant's tag, a default outside the
// config's directory, or a literal in a vendored schema (cue.mod/).
type RefusedError struct {
	Config cuecast.ConfigPath `json:"config"`
	Path   string             `json:"path"`
	// Kind is the origin: compiler.Origin's labels, or "schema" for a
	// literal or default the mutator will not edit where it is.
	Kind string `json:"kind"`
	// Positions are where the value comes from (explain's deciding ones).
	Positions []compiler.Position `json:"positions"`
	// Via is the chain of references followed, for a reference.
	Via []string `json:"via,omitempty"`
	// Hint says what would have to change instead.
	Hint string `json:"hint"`
}

func (e *RefusedError) Error() string {
	pos := make([]string, len(e.Positions))
	for i, p := range e.Positions {
		pos[i] = p.String()
	}
	via := ""
	if len(e.Via) > 0 {
		via = " via " + strings.Join(e.Via, ", ")
	}
	return fmt.Sprintf("%s: %s is %s%s at %s: %s", e.Config, e.Path, e.Kind, via, strings.Join(pos, ", "), e.Hint)
}

func (e *RefusedError) Unwrap() error { return ErrRefused }

// CompileError is Set's error when the recompiled configs have errors the
// head did not have, or a flag rollout is reshuffled: Errors are the
// compiler's own, with file:line:col. Report is the check that found them.
type CompileError struct {
	Errors []compiler.Error `json:"errors"`
	Report *ci.Report       `json:"report"`
}

func (e *CompileError) Error() string {
	switch {
	case len(e.Errors) == 0 && e.Report != nil && e.Report.Risk.Reshuffles > 0:
		var names []string
		for _, f := range e.Report.Risk.FlagRollouts {
			if f.Fails() {
				names = append(names, fmt.Sprintf("%s %s %s", f.Config, f.Flag, f.Where))
			}
		}
		return fmt.Sprintf("the change reshuffles a flag rollout's users: %s (see the report's flag rollouts: keep the variants' order in the weights, or set reshuffle: true on the flag)", strings.Join(names, ", "))
	case len(e.Errors) == 0:
		return "the change breaks a config"
	case len(e.Errors) == 1:
		return e.Errors[0].Error()
	}
	return fmt.Sprintf("%s (and %d more)", e.Errors[0], len(e.Errors)-1)
}

func (e *CompileError) Unwrap() error { return ErrInvalid }

// RequestError is Set's error for a request that cannot apply to the repo
// as it is: Err says which part.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }

// Unwrap returns both ErrBadRequest and the cause (compiler.ErrUnknownPath…).
func (e *RequestError) Unwrap() []error { return []error{ErrBadRequest, e.Err} }

func badRequest(format string, args ...any) error {
	return &RequestError{Err: fmt.Errorf(format, args...)}
}
