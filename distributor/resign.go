package distributor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// ResignPointers moves every config's stored pointers onto the signing key
// after a key rotation (docs/OPERATIONS.md, "Rotating the signing key"):
// each config holding a pointer the key did not sign has all its cohort,
// all-buckets, instance and staged pointers written again, unchanged but for
// a new revision, signed by the key. Without it, services that trust only
// the new key could not start from a config that has not changed since the
// switch. The relative order of a config's pointers is kept (the new
// revisions rise in the order of the old ones), and they are published
// newest first, so a subscriber sees the pointer that governs it first and
// never, even briefly, one that does not. Activation pointers are left: no
// subscriber reads them back, and re-sending one would apply it again.
//
// It must run before anything else writes pointers (serve runs it when it
// becomes the active replica, before the tailer and the rollout
// controller). It returns how many pointers it wrote.
func (d *Distributor) ResignPointers(ctx context.Context) (int, error) {
	if d.o.SigningKey == nil {
		return 0, nil
	}
	cfgs, err := d.Configs(ctx)
	if err != nil {
		return 0, fmt.Errorf("re-sign pointers: %w", err)
	}
	total := 0
	var errs []error
	for _, cfg := range cfgs {
		n, err := d.resignConfig(ctx, cfg)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("re-sign pointers of %s: %w", cfg, err))
		}
	}
	if total > 0 {
		d.log.Info("re-signed pointers with the current key", "pointers", total, "configs", len(cfgs))
	}
	return total, errors.Join(errs...)
}

// storedPointer is a pointer message as stored: the pointer, its subject
// and sequence, and its body (the inline content).
type storedPointer struct {
	cachedPointer
	subj string
	body []byte
}

func (d *Distributor) resignConfig(ctx context.Context, cfg cuecast.ConfigPath) (int, error) {
	ns, name := cfg.Namespace(), cuecast.SubjectName(cfg)
	var subjs []string
	for _, f := range []string{cuecast.StoredPrefix + "." + ns + ".p.*." + name, cuecast.InstancePointerSubject(cfg, "*"), cuecast.StagedSubject(cfg)} {
		info, err := d.stream.Info(ctx, jetstream.WithSubjectFilter(f))
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", f, err)
		}
		for s := range info.State.Subjects {
			subjs = append(subjs, s)
		}
	}
	var ptrs []storedPointer
	stale := false
	for _, subj := range subjs {
		m, err := d.stream.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", subj, err)
		}
		var p cuecast.Pointer
		if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderPointer)), &p); err != nil {
			return 0, fmt.Errorf("decode pointer at %d: %w", m.Sequence, err)
		}
		stale = stale || !d.signedHere(p, subj)
		ptrs = append(ptrs, storedPointer{cachedPointer: cachedPointer{p: p, seq: m.Sequence}, subj: subj, body: m.Data})
	}
	if !stale {
		return 0, nil
	}
	// Oldest first, as subscribers rank them; all of the config's pointers,
	// so that one re-signed cannot overtake a newer one left as it was.
	slices.SortFunc(ptrs, func(a, b storedPointer) int {
		switch {
		case a.governs(b.cachedPointer):
			return 1
		case b.governs(a.cachedPointer):
			return -1
		}
		return 0
	})
	first, err := d.nextRevisions(ctx, cfg, len(ptrs))
	if err != nil {
		return 0, err
	}
	written := 0
	for i := len(ptrs) - 1; i >= 0; i-- {
		sp := ptrs[i]
		p := sp.p
		p.Subject, p.Revision = sp.subj, first+uint64(i)
		enc, err := d.encodePointer(&p)
		if err != nil {
			return written, err
		}
		m := pointerMsg(sp.subj, enc, sp.body)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(sp.seq, 10))
		ack, err := d.js.PublishMsg(ctx, m)
		if err != nil {
			d.ptrs.Delete(sp.subj)
			if isWrongLastSeq(err) {
				err = fmt.Errorf("%s moved concurrently: %w", sp.subj, cuecast.ErrConflict)
			}
			return written, fmt.Errorf("write %s: %w", sp.subj, err)
		}
		d.ptrs.Store(sp.subj, cachedPointer{p: p, seq: ack.Sequence})
		written++
	}
	return written, nil
}

// signedHere reports whether p, stored on subj, carries this Distributor's
// signature in the current format.
func (d *Distributor) signedHere(p cuecast.Pointer, subj string) bool {
	if p.Subject != subj || p.Revision == 0 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(p.Signature)
	return err == nil && d.o.SigningKey.Verify(p.SigningBytes(), sig) == nil
}
