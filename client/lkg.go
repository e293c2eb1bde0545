package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cuecast/cuecast"
)

// The last-known-good file is one line of JSON (lkgHeader) followed by the
// content bytes exactly as published, so the checksum (and signature) can be
// verified before the file is trusted.
const lkgFormat = "cuecast-lkg-v1"

type lkgHeader struct {
	Format  string          `json:"format"`
	Meta    cuecast.Version `json:"meta"`
	SavedAt time.Time       `json:"saved_at"`
}

// readLKG loads and verifies a last-known-good file. It returns an error
// wrapping os.ErrNotExist when there is none.
func readLKG(path string, cfg cuecast.ConfigPath) (cuecast.Version, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cuecast.Version{}, nil, fmt.Errorf("read last-known-good %s: %w", path, err)
	}
	line, content, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return cuecast.Version{}, nil, fmt.Errorf("read last-known-good %s: no header line: %w", path, cuecast.ErrChecksumMismatch)
	}
	var h lkgHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return cuecast.Version{}, nil, fmt.Errorf("read last-known-good %s: header: %w", path, err)
	}
	if h.Format != lkgFormat {
		return cuecast.Version{}, nil, fmt.Errorf("read last-known-good %s: format %q, want %q", path, h.Format, lkgFormat)
	}
	if h.Meta.Config != cfg {
		return cuecast.Version{}, nil, fmt.Errorf("read last-known-good %s: holds %s, want %s", path, h.Meta.Config, cfg)
	}
	if got := cuecast.Checksum(content); got != h.Meta.Checksum || int64(len(content)) != h.Meta.Size {
		return cuecast.Version{}, nil, fmt.Errorf("read last-known-good %s: content hashes to %s (%d bytes), header says %s (%d bytes): %w",
			path, got, len(content), h.Meta.Checksum, h.Meta.Size, cuecast.ErrChecksumMismatch)
	}
	return h.Meta, content, nil
}

// writeLKG replaces the file atomically: write a temporary file beside it,
// fsync, rename over, fsync the directory.
func writeLKG(path string, meta cuecast.Version, content []byte) (err error) {
	hdr, err := json.Marshal(lkgHeader{Format: lkgFormat, Meta: meta, SavedAt: time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("write last-known-good %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write last-known-good %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(append(hdr, '\n')); err != nil {
		return fmt.Errorf("write last-known-good %s: %w", path, err)
	}
	if _, err = f.Write(content); err != nil {
		return fmt.Errorf("write last-known-good %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write last-known-good %s: sync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write last-known-good %s: close: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write last-known-good %s: rename: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		serr := d.Sync()
		d.Close()
		if serr != nil && !errors.Is(serr, os.ErrInvalid) {
			return fmt.Errorf("write last-known-good %s: sync directory: %w", path, serr)
		}
	}
	return nil
}
