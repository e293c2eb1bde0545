package tailer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/cuecast/cuecast"
)

// mark is the highest version number of one config that the tailer ever
// reserved in the data directory, with what that number stands for.
type mark struct {
	Config   cuecast.ConfigPath `json:"config"`
	Version  uint64             `json:"version"`
	Commit   string             `json:"commit"`
	Checksum string             `json:"checksum"`
	Deleted  bool               `json:"deleted,omitempty"`
}

func (m mark) same(v cuecast.Version) bool {
	return m.Version == v.Version && m.Commit == v.Commit && m.Checksum == v.Checksum && m.Deleted == v.Deleted
}

// highWater is the data directory's copy of the version numbers the tailer
// published: a file outside the JetStream store, so that losing or damaging
// the store does not lose the record of which numbers are taken. A number is
// written (and fsynced) here BEFORE it is published: the file is never behind
// the stream, whatever the store loses in a crash or a power cut (JetStream
// does not fsync each message). The price is that a crash between the write
// and the publish leaves the file one number ahead of the stream; that number
// is then only ever published again with the same commit and checksum (see
// Tailer.checkNumber), so it never stands for two contents.
//
// The file is append-only JSON lines, one per reservation, compacted to one
// line per config when opened. A torn last line (a crash mid-write) is
// ignored: its fsync never returned, so nothing was published under it.
type highWater struct {
	path string
	mu   sync.Mutex
	m    map[cuecast.ConfigPath]mark
}

// highWaterFile names the file in the data directory of the tailer with id.
func highWaterFile(dataDir, id string) string {
	return filepath.Join(dataDir, "highwater."+id+".jsonl")
}

// openHighWater reads (and compacts) the file at path; a missing file is an
// empty record. An empty path gives a highWater that keeps nothing on disk.
func openHighWater(path string) (*highWater, error) {
	h := &highWater{path: path, m: make(map[cuecast.ConfigPath]mark)}
	if path == "" {
		return h, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read high-water marks %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var m mark
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.Config == "" {
			continue // a torn write: never fsynced, so never published
		}
		if m.Version >= h.m[m.Config].Version {
			h.m[m.Config] = m
		}
	}
	// Compacting only a file mostly made of superseded lines keeps the
	// window small in which another process (accept-rewrite beside a running
	// serve) could rename over an append.
	if lines > 2*len(h.m)+1024 {
		if err := h.compact(); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// compact rewrites the file with one line per config: a temporary file,
// fsynced, renamed over the old one, and the directory fsynced.
func (h *highWater) compact() error {
	var buf bytes.Buffer
	for _, cp := range slices.Sorted(maps.Keys(h.m)) {
		b, err := json.Marshal(h.m[cp])
		if err != nil {
			return fmt.Errorf("encode high-water mark: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	tmp := h.path + ".tmp"
	if err := writeSync(tmp, buf.Bytes(), os.O_CREATE|os.O_TRUNC|os.O_WRONLY); err != nil {
		return fmt.Errorf("write high-water marks: %w", err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		return fmt.Errorf("write high-water marks: %w", err)
	}
	if err := syncDir(filepath.Dir(h.path)); err != nil {
		return fmt.Errorf("write high-water marks: %w", err)
	}
	return nil
}

// get returns the mark of cp.
func (h *highWater) get(cp cuecast.ConfigPath) (mark, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.m[cp]
	return m, ok
}

// all returns a copy of every mark.
func (h *highWater) all() map[cuecast.ConfigPath]mark {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[cuecast.ConfigPath]mark, len(h.m))
	for k, v := range h.m {
		out[k] = v
	}
	return out
}

// reserve records v's number durably before it is published. A number at or
// below the mark is not written again.
func (h *highWater) reserve(v cuecast.Version) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v.Version <= h.m[v.Config].Version {
		return nil
	}
	m := mark{Config: v.Config, Version: v.Version, Commit: v.Commit, Checksum: v.Checksum, Deleted: v.Deleted}
	if h.path != "" {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode high-water mark: %w", err)
		}
		if err := writeSync(h.path, append(b, '\n'), os.O_CREATE|os.O_APPEND|os.O_WRONLY); err != nil {
			return fmt.Errorf("record high-water mark %s@%d in %s: %w", v.Config, v.Version, h.path, err)
		}
	}
	h.m[v.Config] = m
	return nil
}

func writeSync(path string, b []byte, flag int) error {
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
