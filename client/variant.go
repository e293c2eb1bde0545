package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// Variants (docs/VARIANTS.md, docs/PROTOCOL.md §10): a config that reads
// dimensions (env, region…) is compiled once per combination it uses, each
// combination published at its variant path
// (payments/checkout/env=prod/region=eu). Its base path carries a variant
// index instead of a config. Watch reads that index once, picks the
// variant of the instance's dimensions (WithDimensions) and watches it
// exactly like a config. Nothing here runs per message.

// ErrVariant is wrapped by Watch's errors about variants: a config with
// variants watched by an instance that declares no dimensions, a dimension
// the config uses that the instance has no value for, a combination of
// values that is not one of the config's variants, or an explicit variant
// path that contradicts the declared values. Never a silent default, never
// another variant.
var ErrVariant = errors.New("no variant for this instance")

// PickVariant is the variant path of the dimension values dims in the
// config's variant index ix: the values of the dimensions the config uses
// (ix.Dimensions; others in dims are ignored, a config need not use every
// dimension of its namespace). It fails, wrapping ErrVariant, when dims
// lacks a value the config uses or the combination is not one of
// ix.Variants.
func PickVariant(ix cuecast.VariantIndex, dims map[string]string) (cuecast.ConfigPath, error) {
	if len(dims) == 0 {
		return "", fmt.Errorf("config %s has variants by %s: declare this instance's values "+
			"(client.WithDimensions, or --dim on watch and agent), e.g. %s; its variants: %s: %w",
			ix.Config, strings.Join(ix.Dimensions, ", "), exampleDims(ix), variantLabels(ix.Variants), ErrVariant)
	}
	used := make(map[string]string, len(ix.Dimensions))
	var missing []string
	for _, d := range ix.Dimensions {
		v, ok := dims[d]
		if !ok {
			missing = append(missing, d)
			continue
		}
		used[d] = v
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("config %s has variants by %s; this instance declares no value for %s (it declares %s): %w",
			ix.Config, strings.Join(ix.Dimensions, ", "), strings.Join(missing, ", "), dimsLabel(dims), ErrVariant)
	}
	p := cuecast.VariantPath(ix.Config, used)
	if !slices.Contains(ix.Variants, p) {
		return "", fmt.Errorf("config %s has no variant %s (its variants: %s): %w",
			ix.Config, p.VariantLabel(), variantLabels(ix.Variants), ErrVariant)
	}
	return p, nil
}

func exampleDims(ix cuecast.VariantIndex) string {
	if len(ix.Variants) > 0 {
		return ix.Variants[0].VariantLabel()
	}
	return strings.Join(ix.Dimensions, "=…,") + "=…"
}

func dimsLabel(dims map[string]string) string {
	if len(dims) == 0 {
		return "none"
	}
	return cuecast.VariantPath("x", dims).VariantLabel()
}

// variantLabels lists the first maxVariantsListed of ps, and how many more:
// a config may have hundreds, and an error names them on one line.
func variantLabels(ps []cuecast.ConfigPath) string {
	ls := make([]string, 0, min(len(ps), maxVariantsListed)+1)
	for _, p := range ps[:min(len(ps), maxVariantsListed)] {
		ls = append(ls, p.VariantLabel())
	}
	if n := len(ps) - maxVariantsListed; n > 0 {
		ls = append(ls, fmt.Sprintf("and %d more: cuecast status %s", n, ps[0].Base()))
	}
	return strings.Join(ls, "; ")
}

const maxVariantsListed = 12

// WithDimensions declares the instance's dimension values (env=prod,
// region=eu…): Watch of a config with variants watches the variant of
// these values (docs/VARIANTS.md). They are added to the labels of every
// report too (a label of the same name given by WithLabels is replaced).
// Names and values are [a-z0-9][a-z0-9_-]*.
func WithDimensions(dims map[string]string) Option {
	return func(o *options) error {
		for _, d := range slices.Sorted(maps.Keys(dims)) {
			if !cuecast.ValidSegment(d) || !cuecast.ValidSegment(dims[d]) {
				return fmt.Errorf("dimension %s=%s: want <dimension>=<value>, each [a-z0-9][a-z0-9_-]*", d, dims[d])
			}
		}
		o.dims = maps.Clone(dims)
		return nil
	}
}

// resolveVariant is the path Watch watches for cfg: cfg itself for a plain
// config, the instance's variant when cfg's newest version is a variant
// index. An explicit variant path is kept when it agrees with the declared
// dimensions. When the index cannot be read (the server is down at start),
// the variant named by the last-known-good file is taken if it matches the
// declared dimensions; else cfg is watched, and a variant index arriving
// there is refused (acceptIndex) with a hint to Watch again.
//
// An index that fails verification (a bad signature or checksum) is not
// taken for "no variants": it is refused like a forged pointer, in an
// EventRejected and in refused, which the caller puts in the watcher's
// reports (Report.Refused, docs/PROTOCOL.md §4.3), and the path watched is
// chosen as when the index cannot be read.
func (c *Client) resolveVariant(ctx context.Context, cfg cuecast.ConfigPath, wo watchOptions) (_ cuecast.ConfigPath, refused string, _ error) {
	if cfg.IsVariant() {
		for _, dv := range cfg.Variant() {
			if v, ok := c.o.dims[dv.Dim]; ok && v != dv.Value {
				return "", "", fmt.Errorf("variant %s: this instance declares %s=%s: %w", cfg, dv.Dim, v, ErrVariant)
			}
		}
		return cfg, "", nil
	}
	ix, version, err := c.readIndex(ctx, cfg)
	switch {
	case err != nil:
		p, ok := c.variantFromLKG(cfg, wo.lkgPath)
		ev := Event{Kind: EventError, Config: cfg, Err: err, At: time.Now(),
			Detail: fmt.Sprintf("could not read the newest version of %s to pick a variant; watching %s", cfg, p)}
		if errors.Is(err, cuecast.ErrBadSignature) || errors.Is(err, cuecast.ErrChecksumMismatch) {
			ev.Kind, ev.Version = EventRejected, version
			ev.Detail = fmt.Sprintf("variant index refused; watching %s", p)
			refused = fmt.Sprintf("version %d: variant index: %v", version, err)
		}
		if !ok {
			ev.Detail += " (if it has variants, Watch again once its variant index verifies)"
		}
		c.o.events(ev)
		return p, refused, nil
	case ix == nil:
		return cfg, "", nil
	}
	p, err := PickVariant(*ix, c.o.dims)
	return p, "", err
}

// readIndex reads cfg's newest version; it returns its variant index, or
// nil when cfg has no version, was removed, or holds a config. An index
// is verified like a last-known-good file: the version's signature covers
// the checksum and size its content is checked against. A version is never
// signed again, so one signed by a key retired since is verified instead
// by cfg's all-buckets pointer naming it (pointedAt), as a config's
// content is: serve re-signs pointers when its key changes.
// version is the number the index claims, for a refusal.
func (c *Client) readIndex(ctx context.Context, cfg cuecast.ConfigPath) (_ *cuecast.VariantIndex, version uint64, _ error) {
	if !c.nc.IsConnected() {
		return nil, 0, errors.New("not connected")
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.timeout)
	defer cancel()
	m, err := getLast(ctx, c.nc, c.o.directGet, cuecast.VersionSubject(cfg))
	if errors.Is(err, cuecast.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the newest version of %s: %w", cfg, err)
	}
	var meta cuecast.Version
	if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderMeta)), &meta); err != nil {
		return nil, 0, fmt.Errorf("decode the newest version of %s: %w", cfg, err)
	}
	if meta.Deleted || meta.Config != cfg || len(meta.Chunks) > 0 {
		// A variant index is small: it is never chunked.
		return nil, 0, nil
	}
	ix, ok := cuecast.ParseVariantIndex(m.Data)
	if !ok {
		return nil, 0, nil
	}
	if int64(len(m.Data)) != meta.Size || !cuecast.ChecksumMatches(m.Data, meta.Checksum) {
		return nil, meta.Version, fmt.Errorf("variant index of %s version %d: content does not match its checksum: %w", cfg, meta.Version, cuecast.ErrChecksumMismatch)
	}
	if c.o.keyring != nil {
		if err := c.o.keyring.Verify(meta.SigningBytes(), meta.Signature); err != nil {
			if perr := c.pointedAt(ctx, cfg, &meta, m); perr != nil {
				return nil, meta.Version, fmt.Errorf("variant index of %s version %d: %w; nor does a trusted pointer name it: %v", cfg, meta.Version, err, perr)
			}
		}
	}
	if ix.Config != cfg {
		return nil, meta.Version, fmt.Errorf("variant index at %s names config %s: %w", cfg, ix.Config, cuecast.ErrChecksumMismatch)
	}
	return &ix, meta.Version, nil
}

// pointedAt checks that cfg's all-buckets pointer, which every deploy of
// an index writes (docs/ROLLOUT.md, "A variant index"), is signed by a
// trusted key and names the version meta read in m: the pointer's
// signature covers the checksum and size the index was checked against,
// so it authenticates the index (docs/PROTOCOL.md §10 step 3).
func (c *Client) pointedAt(ctx context.Context, cfg cuecast.ConfigPath, meta *cuecast.Version, m *nats.Msg) error {
	subj := cuecast.AllPointerSubject(cfg)
	pm, err := getLast(ctx, c.nc, c.o.directGet, subj)
	if err != nil {
		return fmt.Errorf("read %s: %w", subj, err)
	}
	var p cuecast.Pointer
	if err := decodePointer(&p, pm.Header.Get(cuecast.HeaderPointer)); err != nil {
		return fmt.Errorf("decode the pointer on %s: %w", subj, err)
	}
	if p.Config != cfg || p.Subject != subj {
		return fmt.Errorf("pointer on %s was written for %s on %q: %w", subj, p.Config, p.Subject, cuecast.ErrBadSignature)
	}
	if err := c.o.keyring.Verify(p.SigningBytes(), p.Signature); err != nil {
		return fmt.Errorf("pointer on %s: %w", subj, err)
	}
	seq, _, err := seqHeaders(m)
	if err != nil {
		return fmt.Errorf("version %d: %w", meta.Version, err)
	}
	if p.Version != meta.Version || p.Seq != seq || p.Checksum != meta.Checksum || p.Size != meta.Size || p.Commit != meta.Commit || p.Deleted {
		return fmt.Errorf("pointer on %s names version %d at %d, not version %d at %d", subj, p.Version, p.Seq, meta.Version, seq)
	}
	return nil
}

// variantFromLKG is the variant of cfg the last-known-good file holds,
// when it agrees with every declared dimension; else cfg. The file itself
// is verified when the watcher loads it.
func (c *Client) variantFromLKG(cfg cuecast.ConfigPath, path string) (cuecast.ConfigPath, bool) {
	if path == "" || len(c.o.dims) == 0 {
		return cfg, false
	}
	held, err := lkgConfig(path)
	if err != nil || held.Base() != cfg || !held.IsVariant() {
		return cfg, false
	}
	for _, dv := range held.Variant() {
		if c.o.dims[dv.Dim] != dv.Value {
			return cfg, false
		}
	}
	return held, true
}

// acceptIndex refuses a variant index arriving as the content of the
// config this watcher watches: an instance must never run the index as its
// config. It runs once per version applied, not per message.
func (w *Watcher) acceptIndex(content []byte) error {
	ix, ok := cuecast.ParseVariantIndex(content)
	if !ok {
		return nil
	}
	if _, err := PickVariant(ix, w.c.o.dims); err != nil {
		return err
	}
	if w.indexRefused != "" {
		return fmt.Errorf("config %s has variants (by %s), but its variant index was refused when this watcher started (%s); Watch it again to pick this instance's variant once the index verifies: %w",
			ix.Config, strings.Join(ix.Dimensions, ", "), w.indexRefused, ErrVariant)
	}
	return fmt.Errorf("config %s now has variants (by %s): this watcher was started before; Watch it again to pick this instance's variant: %w",
		ix.Config, strings.Join(ix.Dimensions, ", "), ErrVariant)
}

// variantRemoved says that the variant this watcher follows was removed
// (tombstoned): the config's variants changed. The watcher holds the
// tombstone like any removed config; picking the new variant takes a new
// Watch of the base path.
func (w *Watcher) variantRemoved(version uint64) {
	w.event(EventError, version, fmt.Sprintf("variant %s was removed from %s's variants: Watch %s again to pick this instance's variant",
		w.cfg, w.cfg.Base(), w.cfg.Base()), ErrVariant)
}
