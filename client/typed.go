package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/cuecast/cuecast"
)

// TypedWatcher is a Watcher whose versions are decoded into T. A version
// that does not decode into T is rejected like one failing the validation
// hook: reported as failed, not applied.
type TypedWatcher[T any] struct {
	*Watcher
}

// Typed watches cfg and decodes each version's JSON into a T (strictly:
// unknown fields are an error, so a schema change the service does not know
// about is caught before it is applied).
func Typed[T any](ctx context.Context, c *Client, cfg cuecast.ConfigPath, opts ...WatchOption) (*TypedWatcher[T], error) {
	decode := func(o *watchOptions) error {
		o.decode = func(b []byte) (any, error) { return Decode[T](b) }
		return nil
	}
	w, err := c.Watch(ctx, cfg, append(opts, decode)...)
	if err != nil {
		return nil, err
	}
	return &TypedWatcher[T]{Watcher: w}, nil
}

// Value returns the current decoded value with its snapshot; the zero T
// before any version is known or when the config was deleted. It never
// blocks.
func (t *TypedWatcher[T]) Value() (T, Snapshot) {
	s := t.Current()
	v, _ := s.value.(T)
	return v, s
}

// Decode decodes content into a T, rejecting unknown fields.
func Decode[T any](content []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("decode config into %T: %w", v, err)
	}
	return v, nil
}
