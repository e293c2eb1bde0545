package client

import (
	"bufio"
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
// content bytes exactly as published, so the checksum (and the signature of
// the pointer the content was applied from, which covers checksum, size and
// commit) can be verified before the file is trusted.
const lkgFormat = "cuecast-lkg-v2"

type lkgHeader struct {
	Format  string          `json:"format"`
	Pointer cuecast.Pointer `json:"pointer"`
	SavedAt time.Time       `json:"saved_at"`
}

// readLKG loads and verifies a last-known-good file. It returns an error
// wrapping os.ErrNotExist when there is none.
func readLKG(path string, cfg cuecast.ConfigPath) (cuecast.Pointer, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cuecast.Pointer{}, nil, fmt.Errorf("read last-known-good %s: %w", path, err)
	}
	line, content, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return cuecast.Pointer{}, nil, fmt.Errorf("read last-known-good %s: no header line: %w", path, cuecast.ErrChecksumMismatch)
	}
	var h lkgHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return cuecast.Pointer{}, nil, fmt.Errorf("read last-known-good %s: header: %w", path, err)
	}
	if h.Format != lkgFormat {
		return cuecast.Pointer{}, nil, fmt.Errorf("read last-known-good %s: format %q, want %q", path, h.Format, lkgFormat)
	}
	if h.Pointer.Config != cfg {
		return cuecast.Pointer{}, nil, fmt.Errorf("read last-known-good %s: holds %s, want %s", path, h.Pointer.Config, cfg)
	}
	if got := cuecast.Checksum(content); got != h.Pointer.Checksum || int64(len(content)) != h.Pointer.Size {
		return cuecast.Pointer{}, nil, fmt.Errorf("read last-known-good %s: content hashes to %s (%d bytes), header says %s (%d bytes): %w",
			path, got, len(content), h.Pointer.Checksum, h.Pointer.Size, cuecast.ErrChecksumMismatch)
	}
	h.Pointer.Inline = false
	return h.Pointer, content, nil
}

// writeLKG replaces the file atomically: write a temporary file beside it,
// fsync, rename over, fsync the directory.
func writeLKG(path string, p cuecast.Pointer, content []byte) (err error) {
	hdr, err := json.Marshal(lkgHeader{Format: lkgFormat, Pointer: p, SavedAt: time.Now().UTC()})
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

// lkgConfig is the config a last-known-good file holds, from its header,
// unverified (the watcher verifies the file when it loads it).
func lkgConfig(path string) (cuecast.ConfigPath, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read last-known-good %s: %w", path, err)
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if err != nil {
		return "", fmt.Errorf("read last-known-good %s: header: %w", path, err)
	}
	var h lkgHeader
	if err := json.Unmarshal(line, &h); err != nil || h.Format != lkgFormat {
		return "", fmt.Errorf("read last-known-good %s: header: not %s", path, lkgFormat)
	}
	return h.Pointer.Config, nil
}
