package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cuecast/cuecast"
)

// Reading a version's content (inline, a kept copy, the stream, its chunks)
// and verifying it and its pointer against what the distributor signed.

// fetch sets *meta to the verified metadata of the version p names and
// returns its verified content: the inline body when p has one, else a
// copy kept here (staged, or the version before the current one), else the
// stored version.
func (w *Watcher) fetch(meta *cuecast.Version, p *cuecast.Pointer, inline []byte) ([]byte, error) {
	if p.Inline {
		*meta = p.Meta()
		body, err := w.verifyContent(meta, p, inline)
		if err == nil {
			return body, nil
		}
		// Damaged on the way, or a forgery: the stream's copy decides.
		w.inlineRejected(p, err)
	}
	return w.fetchKept(meta, p)
}

// inlineRejected is out of line: every apply runs fetch.
func (w *Watcher) inlineRejected(p *cuecast.Pointer, err error) {
	w.event(EventRejected, p.Version, "inline content does not verify; reading the stored version", err)
}

// fetchKept is fetch without inline content: a kept copy, else the stored
// version. Apart from fetch so that the common case, inline content, keeps a
// small stack frame.
func (w *Watcher) fetchKept(meta *cuecast.Version, p *cuecast.Pointer) ([]byte, error) {
	if cv, ok := w.cache[p.Version]; ok && cv.seq == p.Seq {
		*meta = cv.meta
		body, err := w.verifyContent(meta, p, cv.body)
		if err == nil {
			return body, nil
		}
		delete(w.cache, p.Version)
	}
	if pv := w.prev; pv != nil && pv.seq == p.Seq && pv.meta.Version == p.Version {
		*meta = pv.meta
		if body, err := w.verifyContent(meta, p, pv.body); err == nil {
			return body, nil
		}
	}
	*meta = cuecast.Version{}
	var body []byte
	{
		ctx, cancel := context.WithTimeout(w.ctx, w.c.o.timeout)
		defer cancel()
		m, err := getBySeq(ctx, w.c.nc, w.c.o.directGet, p.Seq)
		if errors.Is(err, cuecast.ErrNotFound) {
			return nil, fmt.Errorf("read version %d at %d: %w", p.Version, p.Seq, cuecast.ErrPurged)
		}
		if err != nil {
			return nil, fmt.Errorf("read version %d at %d: %w", p.Version, p.Seq, err)
		}
		if s := m.Header.Get(headerSubj); s != cuecast.VersionSubject(w.cfg) {
			return nil, fmt.Errorf("pointer names sequence %d on %s, not a version of %s: %w", p.Seq, s, w.cfg, cuecast.ErrChecksumMismatch)
		}
		var stored cuecast.Version
		if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderMeta)), &stored); err != nil {
			return nil, fmt.Errorf("decode version %d metadata: %w", p.Version, err)
		}
		*meta, body = stored, m.Data
	}
	return w.verifyContent(meta, p, body)
}

// verifyContent checks version metadata against the pointer, its signature,
// and the content (reading chunks) against the metadata; it returns the
// content verified.
func (w *Watcher) verifyContent(meta *cuecast.Version, p *cuecast.Pointer, body []byte) ([]byte, error) {
	if meta.Config != w.cfg || meta.Version != p.Version || meta.Checksum != p.Checksum {
		return nil, metaMismatch(meta, p)
	}
	// The version's own signature is not checked here: the pointer's
	// (verified before) covers the checksum and size that the content is
	// checked against below, so it authenticates the content, and one
	// ed25519 verification per apply instead of two halves the cost for a
	// fleet sharing a host. The last-known-good file keeps the signed pointer
	// it was applied from, verified again when it is loaded.
	if len(meta.Chunks) > 0 && len(body) == 0 {
		// A kept copy holds the whole content; a version message none.
		var err error
		if body, err = w.fetchChunks(meta); err != nil {
			return nil, err
		}
	}
	if int64(len(body)) == meta.Size {
		// Bytes a shared Keyring has seen hash to this checksum.
		if c, ok := w.c.o.keyring.verifiedContent(meta.Checksum, body); ok {
			return c, nil
		}
		if cuecast.ChecksumMatches(body, meta.Checksum) {
			w.c.o.keyring.rememberContent(meta.Checksum, body)
			return body, nil
		}
	}
	return nil, contentMismatch(meta, body)
}

// metaMismatch and contentMismatch are verifyContent's errors, out of
// line: every apply runs verifyContent.
func metaMismatch(meta *cuecast.Version, p *cuecast.Pointer) error {
	return fmt.Errorf("pointer names %s@%d %s, stored version is %s@%d %s: %w",
		p.Config, p.Version, p.Checksum, meta.Config, meta.Version, meta.Checksum, cuecast.ErrChecksumMismatch)
}

func contentMismatch(meta *cuecast.Version, body []byte) error {
	return fmt.Errorf("version %d content hashes to %s (%d bytes), metadata says %s (%d bytes): %w",
		meta.Version, cuecast.Checksum(body), len(body), meta.Checksum, meta.Size, cuecast.ErrChecksumMismatch)
}

func (w *Watcher) fetchChunks(meta *cuecast.Version) ([]byte, error) {
	if meta.Size < 0 || meta.Size > 1<<30 {
		return nil, fmt.Errorf("version %d: size %d out of range: %w", meta.Version, meta.Size, cuecast.ErrChecksumMismatch)
	}
	buf := make([]byte, 0, meta.Size)
	want := strconv.FormatUint(meta.Version, 10)
	for i, seq := range meta.Chunks {
		ctx, cancel := context.WithTimeout(w.ctx, w.c.o.timeout)
		m, err := getBySeq(ctx, w.c.nc, w.c.o.directGet, seq)
		cancel()
		if errors.Is(err, cuecast.ErrNotFound) {
			return nil, fmt.Errorf("read chunk %d/%d of version %d: %w", i+1, len(meta.Chunks), meta.Version, cuecast.ErrPurged)
		}
		if err != nil {
			return nil, fmt.Errorf("read chunk %d/%d of version %d: %w", i+1, len(meta.Chunks), meta.Version, err)
		}
		if m.Header.Get(headerSubj) != cuecast.ChunkSubject(w.cfg) || m.Header.Get(cuecast.HeaderChunkVersion) != want {
			return nil, fmt.Errorf("chunk %d/%d at %d is not part of version %d: %w", i+1, len(meta.Chunks), seq, meta.Version, cuecast.ErrChecksumMismatch)
		}
		buf = append(buf, m.Data...)
	}
	return buf, nil
}

// verifyPointer checks that p is a pointer of this watcher's config written
// to subj (for the last-known-good file, subj is "": any subject it applies
// pointers from), and its signature. The signed subject is what keeps a
// pointer for another bucket or instance, replayed here, from applying.
func (w *Watcher) verifyPointer(p *cuecast.Pointer, subj string) error {
	if err := w.checkTarget(p, subj); err != nil {
		return err
	}
	if w.c.o.keyring == nil {
		return nil
	}
	return w.c.o.keyring.Verify(p.SigningBytes(), p.Signature)
}

// checkTarget is verifyPointer without the signature: p names this
// watcher's config and subj.
func (w *Watcher) checkTarget(p *cuecast.Pointer, subj string) error {
	if p.Config != w.cfg {
		return fmt.Errorf("pointer on %s names config %s: %w", cuecast.PointerSubject(w.cfg, w.bucket), p.Config, cuecast.ErrBadSignature)
	}
	if subj == "" && !w.appliesFrom(p.Subject) || subj != "" && p.Subject != subj {
		return w.wrongSubject(p, subj)
	}
	return nil
}

// appliesFrom reports whether the watcher applies pointers stored on subj.
func (w *Watcher) appliesFrom(subj string) bool {
	return subj != "" && (subj == w.activationStored || subj == w.ptrSubjects[0] || subj == w.ptrSubjects[1] || subj == w.ptrSubjects[2])
}

// wrongSubject is out of line: verifyPointer runs for every message.
func (w *Watcher) wrongSubject(p *cuecast.Pointer, subj string) error {
	if subj == "" {
		subj = "this instance's subjects"
	}
	return fmt.Errorf("pointer written to %q arrived on %s: %w", p.Subject, subj, cuecast.ErrBadSignature)
}
