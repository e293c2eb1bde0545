package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cuecast/cuecast"
)

// TypedWatcher is a Watcher whose versions are decoded into T. A version
// that does not decode into T is rejected like one failing the validation
// hook: reported as failed, not applied.
type TypedWatcher[T any] struct {
	*Watcher
	updates chan TypedSnapshot[T]
	// val is the current decoded value, stored as it is published (right
	// after the Snapshot, on the same goroutine), so that Load reaches it
	// through one pointer instead of the Watcher and its Snapshot: a flag
	// evaluation reads it on every call, mostly from a cold cache.
	val atomic.Pointer[T]
}

// TypedSnapshot is one applied version with its content decoded into T
// (the zero T for a tombstone).
type TypedSnapshot[T any] struct {
	Value T
	Snapshot
}

// Typed watches cfg and decodes each version's JSON into a T. Decoding is
// lenient by default: fields the JSON has and T does not are ignored, so a
// schema that gains a field (which `cuecast check` calls a compatible
// change) does not stop a service built against the older schema.
// StrictDecoding makes them an error, for a service that must know every
// field it is given. Validation hooks: Validate sees the bytes,
// ValidateValue the decoded T.
func Typed[T any](ctx context.Context, c *Client, cfg cuecast.ConfigPath, opts ...WatchOption) (*TypedWatcher[T], error) {
	tw := &TypedWatcher[T]{updates: make(chan TypedSnapshot[T], 1)}
	decode := func(o *watchOptions) error {
		strict := o.strict
		o.decode = func(b []byte) (any, error) {
			if strict {
				return DecodeStrict[T](b)
			}
			return Decode[T](b)
		}
		o.sink = tw.publish
		o.closeSink = func() { close(tw.updates) }
		return nil
	}
	w, err := c.Watch(ctx, cfg, append(opts, decode)...)
	if err != nil {
		return nil, err
	}
	tw.Watcher = w
	return tw, nil
}

// Load returns the current decoded value alone (the zero T before any
// version is known or when the config was deleted): Value without the copy
// of the Snapshot, for a caller that reads it on every request, such as a
// flag evaluation. It never blocks.
func (t *TypedWatcher[T]) Load() T {
	if v := t.val.Load(); v != nil {
		return *v
	}
	var zero T
	return zero
}

// Value returns the current decoded value with its snapshot; the zero T
// before any version is known or when the config was deleted. It never
// blocks.
func (t *TypedWatcher[T]) Value() (T, Snapshot) {
	s := t.Current()
	v, _ := s.value.(T)
	return v, s
}

// Updates delivers each applied version decoded (the last-known-good one
// first, when loaded). Like Watcher.Updates it holds only the newest, and
// it is closed when the watcher stops. It replaces Watcher.Updates for a
// TypedWatcher: read this one.
func (t *TypedWatcher[T]) Updates() <-chan TypedSnapshot[T] { return t.updates }

// publish offers s, decoded, on updates, replacing an unread older one.
// It runs on the watcher's goroutine (or in Watch, before it starts).
func (t *TypedWatcher[T]) publish(s Snapshot) {
	v, _ := s.value.(T)
	t.val.Store(&v)
	ts := TypedSnapshot[T]{Value: v, Snapshot: s}
	for {
		select {
		case t.updates <- ts:
			return
		default:
		}
		select {
		case <-t.updates:
		default:
		}
	}
}

// StrictDecoding makes Typed refuse a version whose JSON has a field T
// does not: the version is rejected (EventRejected, and last_error in the
// instance's reports, which halts a staged rollout's health gate) instead
// of applied. Only for Typed.
func StrictDecoding() WatchOption {
	return func(o *watchOptions) error {
		o.strict = true
		return nil
	}
}

// ValidateValue is Validate for Typed, on the decoded value: a version it
// rejects is reported as failed and not applied. It runs after Validate
// (if any) and decoding; not for tombstones. T must be Typed's type.
func ValidateValue[T any](f func(T) error) WatchOption {
	return func(o *watchOptions) error {
		if f == nil {
			return errors.New("value validation hook: nil")
		}
		o.validateValue = func(v any) error {
			t, ok := v.(T)
			if !ok {
				var want T
				return fmt.Errorf("ValidateValue wants a %T, the watcher decodes into %T", want, v)
			}
			return f(t)
		}
		return nil
	}
}

// Decode decodes content into a T, ignoring fields T does not have.
func Decode[T any](content []byte) (T, error) {
	var v T
	if err := json.Unmarshal(content, &v); err != nil {
		return v, fmt.Errorf("decode config into %T: %w", v, err)
	}
	return v, nil
}

// DecodeStrict decodes content into a T, rejecting fields T does not have
// and anything after the JSON value.
func DecodeStrict[T any](content []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("decode config into %T (strict): %w", v, err)
	}
	// Not dec.More: it says false before a closing } or ], so "{…}}"
	// passed as one value. Only white space may follow.
	if rest := bytes.Trim(content[dec.InputOffset():], " \t\r\n"); len(rest) > 0 { // JSON's white space
		return v, fmt.Errorf("decode config into %T (strict): data after the JSON value", v)
	}
	return v, nil
}
