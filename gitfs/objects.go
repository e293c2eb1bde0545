package gitfs

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Objects reads a repository's objects and, unlike go-git's object
// storage, is safe for concurrent use, so two file systems over two
// commits, or a prefetch (Cache.Prefetch), can read on several cores.
// Objects in packfiles (what a clone or a CI checkout holds) are read
// straight from the pack with positioned reads and no lock; anything else
// (loose objects, alternates) goes through the storer it wraps, one read at
// a time. Blobs larger than maxInMemory are not inflated when looked up:
// their size comes from the pack's header, and their content is read on
// the first Read of the object's Reader.
//
// Objects implements storer.EncodedObjectStorer: reads are answered as
// above, writes go to the wrapped storer.
type Objects struct {
	storer.EncodedObjectStorer

	mu    sync.Mutex // serialises the wrapped storer
	packs []*pack
	bases baseCache
	// maxInMemory is the largest object inflated when looked up.
	maxInMemory int64
}

// pack is one packfile and its index (version 2), read with ReadAt.
type pack struct {
	name string
	f    billy.File
	size int64
	// fanout[b] is the number of objects whose hash starts with a byte <= b.
	fanout  [256]uint32
	names   []byte // n 20-byte hashes, sorted
	offsets []byte // n 4-byte offsets
	large   []byte // 8-byte offsets
}

// OpenObjects reads the pack indexes under objects/pack of the .git
// directory dotgit (a filesystem.Storage's Filesystem()) and returns the
// object reader over them and s. maxInMemory is the largest object read
// into memory when looked up. A pack whose index it cannot read (an old
// version 1 index, another hash function) is left to s. Close releases the
// packs.
func OpenObjects(dotgit billy.Filesystem, s storer.EncodedObjectStorer, maxInMemory int64) (*Objects, error) {
	o := &Objects{EncodedObjectStorer: s, maxInMemory: maxInMemory}
	o.bases.max = 16 << 20
	ents, err := dotgit.ReadDir("objects/pack")
	if err != nil {
		return o, nil // no packs: everything goes through s
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok || e.IsDir() {
			continue
		}
		p, err := openPack(dotgit, path.Join("objects/pack", name))
		if err != nil {
			_ = o.Close()
			return nil, err
		}
		if p != nil {
			o.packs = append(o.packs, p)
		}
	}
	return o, nil
}

// openPack opens base.idx and base.pack; nil when the index is not one it
// reads (the wrapped storer then serves those objects).
func openPack(dotgit billy.Filesystem, base string) (*pack, error) {
	idx, err := readAll(dotgit, base+".idx")
	if err != nil {
		return nil, err
	}
	p := &pack{name: base + ".pack"}
	if !p.parseIndex(idx) {
		return nil, nil
	}
	f, err := dotgit.Open(p.name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // an index being written or removed: left to the storer
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.name, err)
	}
	fi, err := dotgit.Stat(p.name)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("stat %s: %w", p.name, err)
	}
	p.f, p.size = f, fi.Size()
	return p, nil
}

func readAll(dotgit billy.Filesystem, name string) ([]byte, error) {
	f, err := dotgit.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

// parseIndex reads a version 2 pack index: magic, version, fanout, names,
// CRCs, offsets, large offsets, two checksums.
func (p *pack) parseIndex(b []byte) bool {
	const hashLen = len(plumbing.Hash{})
	if hashLen != 20 || len(b) < 8+256*4 || !bytes.Equal(b[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return false
	}
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(b[8+4*i:])
	}
	n := int(p.fanout[255])
	at := 8 + 256*4
	if len(b) < at+n*(hashLen+8)+2*hashLen {
		return false
	}
	p.names = b[at : at+n*hashLen]
	at += n*hashLen + n*4 // names, CRCs
	p.offsets = b[at : at+n*4]
	at += n * 4
	p.large = b[at : len(b)-2*hashLen]
	return true
}

// find returns the offset of h in the pack.
func (p *pack) find(h plumbing.Hash) (int64, bool) {
	lo := 0
	if h[0] > 0 {
		lo = int(p.fanout[h[0]-1])
	}
	hi := int(p.fanout[h[0]])
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch c := bytes.Compare(p.names[mid*20:mid*20+20], h[:]); {
		case c == 0:
			off := binary.BigEndian.Uint32(p.offsets[mid*4:])
			if off&0x80000000 == 0 {
				return int64(off), true
			}
			i := int(off&0x7fffffff) * 8
			if i+8 > len(p.large) {
				return 0, false
			}
			return int64(binary.BigEndian.Uint64(p.large[i:])), true
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return 0, false
}

// Packs returns how many packfiles Objects reads itself.
func (o *Objects) Packs() int { return len(o.packs) }

// Close closes the packfiles. The wrapped storer is the caller's.
func (o *Objects) Close() error {
	var errs []error
	for _, p := range o.packs {
		errs = append(errs, p.f.Close())
	}
	return errors.Join(errs...)
}

// EncodedObject returns object h if it has type t (or t is AnyObject).
func (o *Objects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	for _, p := range o.packs {
		off, ok := p.find(h)
		if !ok {
			continue
		}
		obj, err := o.packed(p, off, h)
		if err != nil {
			return nil, err
		}
		if t != plumbing.AnyObject && obj.Type() != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return obj, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.EncodedObjectStorer.EncodedObject(t, h)
}

// EncodedObjectSize returns the size of object h's content.
func (o *Objects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	for _, p := range o.packs {
		if off, ok := p.find(h); ok {
			obj, err := o.packed(p, off, h)
			if err != nil {
				return 0, err
			}
			return obj.Size(), nil
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.EncodedObjectStorer.EncodedObjectSize(h)
}

// HasEncodedObject returns nil when h is in the repository.
func (o *Objects) HasEncodedObject(h plumbing.Hash) error {
	for _, p := range o.packs {
		if _, ok := p.find(h); ok {
			return nil
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.EncodedObjectStorer.HasEncodedObject(h)
}

// The packfile's object types.
const (
	objOfsDelta = 6
	objRefDelta = 7
)

// packed returns the object at off in p. A small object is inflated (and a
// delta resolved) now; a large whole object is read on demand.
func (o *Objects) packed(p *pack, off int64, h plumbing.Hash) (plumbing.EncodedObject, error) {
	r := getReader(p, off)
	typ, size, err := r.header()
	if err == nil && typ != objOfsDelta && typ != objRefDelta {
		if size > o.maxInMemory {
			putReader(r)
			return &lazyObject{hash: h, typ: plumbing.ObjectType(typ), size: size, p: p, off: off}, nil
		}
		var b []byte
		b, err = r.inflate(size)
		putReader(r)
		if err != nil {
			return nil, fmt.Errorf("read object %s in %s: %w", h, p.name, err)
		}
		return &memObject{hash: h, typ: plumbing.ObjectType(typ), b: b}, nil
	}
	if err == nil {
		// A delta states the size of what it makes: a large one is
		// resolved only when read.
		var target int64
		if target, err = r.deltaTarget(typ, size); err == nil && target > o.maxInMemory {
			putReader(r)
			return &lazyDelta{o: o, hash: h, size: target, p: p, off: off}, nil
		}
	}
	putReader(r)
	if err != nil {
		return nil, fmt.Errorf("read object %s in %s: %w", h, p.name, err)
	}
	t, b, err := o.resolve(p, off, 0)
	if err != nil {
		return nil, fmt.Errorf("read object %s in %s: %w", h, p.name, err)
	}
	return &memObject{hash: h, typ: t, b: b}, nil
}

// maxDeltaChain bounds a chain of deltas (git's default depth is 50).
const maxDeltaChain = 10000

// resolve returns the type and content of the object at off in p,
// applying deltas. Delta bases are cached.
func (o *Objects) resolve(p *pack, off int64, depth int) (plumbing.ObjectType, []byte, error) {
	if depth > maxDeltaChain {
		return 0, nil, errors.New("delta chain too long")
	}
	if t, b, ok := o.bases.get(p, off); ok {
		return t, b, nil
	}
	r := getReader(p, off)
	typ, size, err := r.header()
	if err != nil {
		putReader(r)
		return 0, nil, err
	}
	var baseOff int64
	var baseHash plumbing.Hash
	switch typ {
	case objOfsDelta:
		rel, err := r.ofs()
		if err != nil || rel <= 0 || rel > off {
			putReader(r)
			return 0, nil, fmt.Errorf("bad delta base offset at %d", off)
		}
		baseOff = off - rel
	case objRefDelta:
		if _, err := io.ReadFull(r.br, baseHash[:]); err != nil {
			putReader(r)
			return 0, nil, err
		}
	}
	data, err := r.inflate(size)
	putReader(r)
	if err != nil {
		return 0, nil, err
	}
	if typ != objOfsDelta && typ != objRefDelta {
		return plumbing.ObjectType(typ), data, nil
	}
	var bt plumbing.ObjectType
	var base []byte
	if typ == objOfsDelta {
		bt, base, err = o.resolve(p, baseOff, depth+1)
	} else {
		bt, base, err = o.content(baseHash, depth+1)
	}
	if err != nil {
		return 0, nil, err
	}
	o.bases.put(p, baseOff, bt, base, typ == objOfsDelta)
	out, err := packfile.PatchDelta(base, data)
	if err != nil {
		return 0, nil, err
	}
	return bt, out, nil
}

// content returns the type and content of object h, wherever it is.
func (o *Objects) content(h plumbing.Hash, depth int) (plumbing.ObjectType, []byte, error) {
	for _, p := range o.packs {
		if off, ok := p.find(h); ok {
			return o.resolve(p, off, depth)
		}
	}
	o.mu.Lock()
	obj, err := o.EncodedObjectStorer.EncodedObject(plumbing.AnyObject, h)
	o.mu.Unlock()
	if err != nil {
		return 0, nil, fmt.Errorf("delta base %s: %w", h, err)
	}
	rc, err := obj.Reader()
	if err != nil {
		return 0, nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return obj.Type(), b, err
}

// baseCache holds the delta bases resolved so far, up to max bytes (then
// it starts over): the deltas of a pack mostly share a few bases.
type baseCache struct {
	mu    sync.Mutex
	max   int
	bytes int
	m     map[baseKey]baseEntry
}

type baseKey struct {
	p   *pack
	off int64
}

type baseEntry struct {
	t plumbing.ObjectType
	b []byte
}

func (c *baseCache) get(p *pack, off int64) (plumbing.ObjectType, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[baseKey{p, off}]
	return e.t, e.b, ok
}

func (c *baseCache) put(p *pack, off int64, t plumbing.ObjectType, b []byte, cacheable bool) {
	if !cacheable || len(b) > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+len(b) > c.max {
		c.m, c.bytes = make(map[baseKey]baseEntry), 0
	}
	c.m[baseKey{p, off}] = baseEntry{t, b}
	c.bytes += len(b)
}

// packReader reads one object's header and inflates its data with
// positioned reads of the pack; pooled.
type packReader struct {
	sec io.SectionReader
	br  *bufio.Reader
	zr  io.ReadCloser
}

var readers = sync.Pool{New: func() any { return &packReader{br: bufio.NewReaderSize(nil, 4096)} }}

func getReader(p *pack, off int64) *packReader {
	r := readers.Get().(*packReader)
	r.sec = *io.NewSectionReader(p.f, off, p.size-off)
	r.br.Reset(&r.sec)
	return r
}

func putReader(r *packReader) {
	if r == nil {
		return
	}
	r.sec = io.SectionReader{}
	r.br.Reset(nil)
	readers.Put(r)
}

// header reads an object header: type and inflated size.
func (r *packReader) header() (typ byte, size int64, err error) {
	c, err := r.br.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	typ = (c >> 4) & 7
	size = int64(c & 15)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if shift > 56 {
			return 0, 0, errors.New("object size overflows")
		}
		if c, err = r.br.ReadByte(); err != nil {
			return 0, 0, err
		}
		size |= int64(c&0x7f) << shift
	}
	switch typ {
	case byte(plumbing.CommitObject), byte(plumbing.TreeObject), byte(plumbing.BlobObject), byte(plumbing.TagObject), objOfsDelta, objRefDelta:
		return typ, size, nil
	}
	return 0, 0, fmt.Errorf("unknown object type %d", typ)
}

// ofs reads an OFS_DELTA's negative base offset.
func (r *packReader) ofs() (int64, error) {
	c, err := r.br.ReadByte()
	if err != nil {
		return 0, err
	}
	v := int64(c & 0x7f)
	for c&0x80 != 0 {
		if v > 1<<55 {
			return 0, errors.New("delta offset overflows")
		}
		if c, err = r.br.ReadByte(); err != nil {
			return 0, err
		}
		v = ((v + 1) << 7) | int64(c&0x7f)
	}
	return v, nil
}

// inflate reads the zlib stream that follows the header: size bytes.
func (r *packReader) inflate(size int64) ([]byte, error) {
	if err := r.resetZlib(); err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r.zr, b); err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	return b, nil
}

func (r *packReader) resetZlib() error {
	if r.zr == nil {
		zr, err := zlib.NewReader(r.br)
		if err != nil {
			return fmt.Errorf("inflate: %w", err)
		}
		r.zr = zr
		return nil
	}
	if err := r.zr.(zlib.Resetter).Reset(r.br, nil); err != nil {
		return fmt.Errorf("inflate: %w", err)
	}
	return nil
}

// deltaTarget reads, after a delta's header, the size of the object the
// delta makes (the second of the two sizes its data starts with).
func (r *packReader) deltaTarget(typ byte, size int64) (int64, error) {
	var skip int
	switch typ {
	case objOfsDelta:
		if _, err := r.ofs(); err != nil {
			return 0, err
		}
	case objRefDelta:
		skip = len(plumbing.Hash{})
	}
	if _, err := r.br.Discard(skip); err != nil {
		return 0, err
	}
	if err := r.resetZlib(); err != nil {
		return 0, err
	}
	var buf [20]byte
	n, err := io.ReadFull(r.zr, buf[:min(size, int64(len(buf)))])
	if err != nil {
		return 0, fmt.Errorf("inflate: %w", err)
	}
	b := buf[:n]
	var sizes [2]int64
	for i := range sizes {
		for shift := 0; ; shift += 7 {
			if len(b) == 0 || shift > 56 {
				return 0, errors.New("bad delta header")
			}
			c := b[0]
			b = b[1:]
			sizes[i] |= int64(c&0x7f) << shift
			if c&0x80 == 0 {
				break
			}
		}
	}
	return sizes[1], nil
}

// lazyDelta is a large object stored as a delta: its size is known from
// the delta, its content is resolved when read.
type lazyDelta struct {
	o    *Objects
	hash plumbing.Hash
	size int64
	p    *pack
	off  int64
}

func (l *lazyDelta) Hash() plumbing.Hash         { return l.hash }
func (l *lazyDelta) SetType(plumbing.ObjectType) {}
func (l *lazyDelta) Size() int64                 { return l.size }
func (l *lazyDelta) SetSize(int64)               {}
func (l *lazyDelta) Writer() (io.WriteCloser, error) {
	return nil, errors.New("gitfs: object is read-only")
}

// Type is the type of the delta's base, read from the pack.
func (l *lazyDelta) Type() plumbing.ObjectType {
	off := l.off
	for range maxDeltaChain {
		r := getReader(l.p, off)
		typ, _, err := r.header()
		var rel int64
		if err == nil && typ == objOfsDelta {
			rel, err = r.ofs()
		}
		var base plumbing.Hash
		if err == nil && typ == objRefDelta {
			_, err = io.ReadFull(r.br, base[:])
		}
		putReader(r)
		switch {
		case err != nil:
			return plumbing.InvalidObject
		case typ == objOfsDelta:
			off -= rel
		case typ == objRefDelta:
			t, _, err := l.o.content(base, 0)
			if err != nil {
				return plumbing.InvalidObject
			}
			return t
		default:
			return plumbing.ObjectType(typ)
		}
	}
	return plumbing.InvalidObject
}

func (l *lazyDelta) Reader() (io.ReadCloser, error) {
	_, b, err := l.o.resolve(l.p, l.off, 0)
	if err != nil {
		return nil, fmt.Errorf("read object %s: %w", l.hash, err)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// memObject is an object read into memory. It is read-only: Writer and
// the setters fail or do nothing.
type memObject struct {
	hash plumbing.Hash
	typ  plumbing.ObjectType
	b    []byte
}

func (m *memObject) Hash() plumbing.Hash            { return m.hash }
func (m *memObject) Type() plumbing.ObjectType      { return m.typ }
func (m *memObject) SetType(plumbing.ObjectType)    {}
func (m *memObject) Size() int64                    { return int64(len(m.b)) }
func (m *memObject) SetSize(int64)                  {}
func (m *memObject) Reader() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(m.b)), nil }
func (m *memObject) Writer() (io.WriteCloser, error) {
	return nil, errors.New("gitfs: object is read-only")
}

// lazyObject is a large whole object in a pack; Reader inflates it as it
// is read.
type lazyObject struct {
	hash plumbing.Hash
	typ  plumbing.ObjectType
	size int64
	p    *pack
	off  int64
}

func (l *lazyObject) Hash() plumbing.Hash         { return l.hash }
func (l *lazyObject) Type() plumbing.ObjectType   { return l.typ }
func (l *lazyObject) SetType(plumbing.ObjectType) {}
func (l *lazyObject) Size() int64                 { return l.size }
func (l *lazyObject) SetSize(int64)               {}
func (l *lazyObject) Writer() (io.WriteCloser, error) {
	return nil, errors.New("gitfs: object is read-only")
}

func (l *lazyObject) Reader() (io.ReadCloser, error) {
	sec := io.NewSectionReader(l.p.f, l.off, l.p.size-l.off)
	br := bufio.NewReader(sec)
	r := &packReader{br: br}
	if _, _, err := r.header(); err != nil {
		return nil, fmt.Errorf("read object %s: %w", l.hash, err)
	}
	zr, err := zlib.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("read object %s: %w", l.hash, err)
	}
	return &limitedReadCloser{Reader: io.LimitReader(zr, l.size), c: zr}, nil
}

type limitedReadCloser struct {
	io.Reader
	c io.Closer
}

func (l *limitedReadCloser) Close() error { return l.c.Close() }
