package flags

import (
	"errors"
	"fmt"
	"strconv"
)

// Schema is the value of a flag set's "schema" field that this package
// evaluates. A set naming another schema is refused with ErrUnsupportedSchema.
const Schema = "cuecast.flags/v1"

// Whole is what a rollout's weights sum to and the number of bucket
// positions: a position is in [0, Whole).
const Whole = 100000

// DefaultBucketBy is the context attribute a rollout buckets by when it
// names none: OpenFeature's targeting key.
const DefaultBucketBy = "targetingKey"

// Set is a flag set as a config compiles to it (schemas/flags.cue,
// #FlagSet): the JSON content of one config version.
type Set struct {
	Schema string          `json:"schema"`
	Flags  map[string]Flag `json:"flags"`
}

// Flag is one flag of a Set (#Flag). docs/FLAGS.md describes each field.
type Flag struct {
	Type           Type                  `json:"type"`
	Description    string                `json:"description,omitempty"`
	Variants       map[string]RawVariant `json:"variants"`
	On             *bool                 `json:"on"`
	OffVariant     string                `json:"offVariant"`
	DefaultVariant string                `json:"defaultVariant"`
	Salt           string                `json:"salt"`
	Prerequisites  []Prerequisite        `json:"prerequisites,omitempty"`
	Rules          []Rule                `json:"rules,omitempty"`
	Fallthrough    *Serve                `json:"fallthrough,omitempty"`
	// Reshuffle tells `cuecast check` that a change moving more users
	// between variants than its weights require (weights reordered, the
	// salt or bucketing attribute changed) is meant; evaluation ignores it.
	Reshuffle bool `json:"reshuffle,omitempty"`
}

// RawVariant is a variant's value as JSON; Compile checks it against the
// flag's type.
type RawVariant []byte

// UnmarshalJSON keeps the raw value.
func (r *RawVariant) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// MarshalJSON writes the raw value.
func (r RawVariant) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	return r, nil
}

// Type is a flag's value type.
type Type string

// The flag types.
const (
	TypeBool   Type = "bool"
	TypeString Type = "string"
	TypeInt    Type = "int"
	TypeFloat  Type = "float"
	TypeObject Type = "object"
)

// Prerequisite requires another flag of the set to evaluate to Variant
// (on, and not itself failing a prerequisite) for this one to go past its
// off variant.
type Prerequisite struct {
	Flag    string `json:"flag"`
	Variant string `json:"variant"`
}

// Rule serves Variant or Rollout when all its Clauses match.
type Rule struct {
	ID      string   `json:"id,omitempty"`
	Clauses []Clause `json:"clauses"`
	Serve
}

// Clause matches when the context's Attribute matches any of Values by
// Op; Negate inverts that, except that a missing attribute never matches.
type Clause struct {
	Attribute string       `json:"attribute"`
	Op        Op           `json:"op"`
	Values    []RawVariant `json:"values"`
	Negate    bool         `json:"negate,omitempty"`
}

// Op is a clause operator.
type Op string

// The clause operators.
const (
	OpIn         Op = "in"
	OpStartsWith Op = "startsWith"
	OpEndsWith   Op = "endsWith"
	OpContains   Op = "contains"
	OpLt         Op = "lt"
	OpLe         Op = "le"
	OpGt         Op = "gt"
	OpGe         Op = "ge"
	OpSemverEq   Op = "semverEq"
	OpSemverLt   Op = "semverLt"
	OpSemverGt   Op = "semverGt"
)

// Serve is what a rule or the fallthrough serves: exactly one of a
// variant and a weighted rollout.
type Serve struct {
	Variant string   `json:"variant,omitempty"`
	Rollout *Rollout `json:"rollout,omitempty"`
}

// Rollout splits contexts between variants by bucket position (Position)
// of the BucketBy attribute: the first weight whose running sum exceeds
// the position wins. Weights sum to Whole.
type Rollout struct {
	BucketBy string   `json:"bucketBy,omitempty"`
	Weights  []Weight `json:"weights"`
}

// VariantAt is the variant weights serve at bucket position pos: the first
// whose running sum exceeds pos (the last one when they sum to less, which
// Validate refuses). It is the rule Evaluate applies, for tools that reason
// about positions (cuecast check's rollout review).
func VariantAt(weights []Weight, pos int) string {
	sum := 0
	for _, w := range weights {
		sum += w.Weight
		if pos < sum {
			return w.Variant
		}
	}
	if len(weights) == 0 {
		return ""
	}
	return weights[len(weights)-1].Variant
}

// Weight is one variant's share of a Rollout, in thousandths of a percent.
type Weight struct {
	Variant string `json:"variant"`
	Weight  int    `json:"weight"`
}

// Reason says why an evaluation returned its value. The values are
// OpenFeature's.
type Reason string

// The reasons.
const (
	// ReasonStatic: the flag is on and has no prerequisites or rules; it
	// serves its fallthrough variant to everyone.
	ReasonStatic Reason = "STATIC"
	// ReasonDefault: no rule matched and the fallthrough is a variant, or
	// the flag has no fallthrough, or a rollout could not bucket the
	// context (the attribute is missing or not a string or integer): the
	// default variant.
	ReasonDefault Reason = "DEFAULT"
	// ReasonTargetingMatch: a rule serving a variant matched.
	ReasonTargetingMatch Reason = "TARGETING_MATCH"
	// ReasonSplit: a rollout (a rule's or the fallthrough's) chose the
	// variant by bucket position.
	ReasonSplit Reason = "SPLIT"
	// ReasonDisabled: the flag is off; it serves its off variant.
	ReasonDisabled Reason = "DISABLED"
	// ReasonPrerequisiteFailed: a prerequisite was not met; the off variant.
	ReasonPrerequisiteFailed Reason = "PREREQUISITE_FAILED"
	// ReasonError: no value; ErrorCode says why and the caller's default
	// applies.
	ReasonError Reason = "ERROR"
)

// ErrorCode says why an evaluation failed (Reason ERROR). The values are
// OpenFeature's.
type ErrorCode string

// The error codes.
const (
	ErrorFlagNotFound ErrorCode = "FLAG_NOT_FOUND"
	ErrorTypeMismatch ErrorCode = "TYPE_MISMATCH"
	// ErrorNotReady: evaluated with a nil Evaluator (Watch has no
	// version yet, or the config was deleted).
	ErrorNotReady ErrorCode = "PROVIDER_NOT_READY"
)

// Sentinel errors.
var (
	// ErrUnsupportedSchema: the flag set's "schema" is not Schema.
	ErrUnsupportedSchema = errors.New("unsupported flag schema")
	// ErrInvalid wraps every *FieldError that Validate and Compile return.
	ErrInvalid = errors.New("invalid flag")
)

// FieldError is one validation failure: the flag and field it is about.
// It wraps ErrInvalid.
type FieldError struct {
	Flag  string // the flag's key
	Field string // e.g. "rules[2].clauses[0].values[1]"
	Msg   string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("flag %q: %s: %s", e.Flag, e.Field, e.Msg)
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Path is the field's path in the flag set config as CUE spells it
// (cue.ParsePath), e.g. flags."checkout-v2".rules[0].variant: where the
// compiler finds the file and line to report.
func (e *FieldError) Path() string {
	return "flags." + label(e.Flag) + "." + e.Field
}

// label quotes name unless it is a plain identifier (and not a keyword).
func label(name string) string {
	switch name {
	case "true", "false", "null", "_", "if", "for", "in", "let", "import", "package":
		return strconv.Quote(name)
	}
	for i, c := range name {
		letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return strconv.Quote(name)
		}
	}
	if name == "" {
		return `""`
	}
	return name
}
