package metrics

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// Messages the tap reads. They are the parts' log messages, spelled once here.
const (
	msgCommitProcessed = "commit processed"
	msgCommitNoConfig  = "commit affects no config"
	msgCommitRejected  = "commit rejected"
	msgCompiled        = "compiled"
)

// tap is a slog.Handler that turns the parts' logged events into metrics and
// passes every record on to next.
type tap struct {
	m    *Metrics
	next slog.Handler
}

var _ slog.Handler = (*tap)(nil)

// Enabled is true down to debug, whatever next wants: the events the tap
// reads include debug ones. Handle drops what next would not have taken.
func (t *tap) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || t.next.Enabled(ctx, l)
}

func (t *tap) Handle(ctx context.Context, r slog.Record) error {
	t.observe(r)
	if !t.next.Enabled(ctx, r.Level) {
		return nil
	}
	return t.next.Handle(ctx, r)
}

func (t *tap) WithAttrs(as []slog.Attr) slog.Handler {
	return &tap{m: t.m, next: t.next.WithAttrs(as)}
}

func (t *tap) WithGroup(name string) slog.Handler {
	return &tap{m: t.m, next: t.next.WithGroup(name)}
}

func (t *tap) observe(r slog.Record) {
	switch {
	case r.Message == msgCommitProcessed:
		result := ResultUnchanged
		if n, ok := intAttr(r, "versions"); ok && n > 0 {
			result = ResultPublished
		}
		t.m.observeCommit(result, durationAttr(r, "elapsed"))
	case r.Message == msgCommitNoConfig:
		t.m.observeCommit(ResultUnchanged, 0)
	case strings.HasPrefix(r.Message, msgCommitRejected):
		t.m.observeCommit(ResultRejected, 0)
	case r.Message == msgCompiled:
		if d := durationAttr(r, "elapsed"); d > 0 {
			t.m.compile.Observe(d.Seconds())
		}
	}
}

func findAttr(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	var found bool
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value.Resolve(), true
			return false
		}
		return true
	})
	return v, found
}

func intAttr(r slog.Record, key string) (int64, bool) {
	v, ok := findAttr(r, key)
	if !ok {
		return 0, false
	}
	switch v.Kind() {
	case slog.KindInt64:
		return v.Int64(), true
	case slog.KindUint64:
		return int64(v.Uint64()), true
	}
	return 0, false
}

func durationAttr(r slog.Record, key string) time.Duration {
	v, ok := findAttr(r, key)
	if !ok || v.Kind() != slog.KindDuration {
		return 0
	}
	return v.Duration()
}
