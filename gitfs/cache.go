package gitfs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Cache keeps decoded trees and small blobs by hash, so file systems over
// successive commits of one repository (which share almost every tree) and
// Diff do not read and decode the same objects again. Git objects are
// immutable, so an entry never goes stale. A Cache is safe for concurrent
// use. Eviction is generational: when the current generation holds half the
// budget it becomes the old one and the previous old one is dropped; a hit in
// the old generation moves the entry back.
type Cache struct {
	maxObjects int
	maxBlob    int64

	mu       sync.Mutex
	cur, old map[plumbing.Hash]any // *object.Tree or []byte
}

// NewCache returns a cache holding up to about maxObjects trees and blobs;
// blobs larger than 64 KiB are never cached.
func NewCache(maxObjects int) *Cache {
	return &Cache{maxObjects: max(maxObjects, 2), maxBlob: 64 << 10,
		cur: make(map[plumbing.Hash]any), old: make(map[plumbing.Hash]any)}
}

// FS returns the file system of tree in s, reading through the cache.
func (c *Cache) FS(s storer.EncodedObjectStorer, tree plumbing.Hash, modTime time.Time) (*FS, error) {
	t, err := c.tree(s, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", tree, err)
	}
	return &FS{s: s, modTime: modTime, cache: c, trees: map[string]*object.Tree{".": t}}, nil
}

func (c *Cache) get(h plumbing.Hash) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.cur[h]; ok {
		return v, true
	}
	if v, ok := c.old[h]; ok {
		c.putLocked(h, v)
		return v, true
	}
	return nil, false
}

func (c *Cache) put(h plumbing.Hash, v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(h, v)
}

func (c *Cache) putLocked(h plumbing.Hash, v any) {
	if len(c.cur) >= c.maxObjects/2 {
		c.old, c.cur = c.cur, make(map[plumbing.Hash]any, c.maxObjects/2)
	}
	c.cur[h] = v
}

// tree returns the decoded tree h. The caller must not modify it.
func (c *Cache) tree(s storer.EncodedObjectStorer, h plumbing.Hash) (*object.Tree, error) {
	if v, ok := c.get(h); ok {
		if t, ok := v.(*object.Tree); ok {
			return t, nil
		}
	}
	t, err := object.GetTree(s, h)
	if err != nil {
		return nil, err
	}
	c.put(h, t)
	return t, nil
}

// blob returns blob h's content, from the cache when it is there; read
// reads it otherwise. The caller must not modify the result.
func (c *Cache) blob(h plumbing.Hash, read func() ([]byte, error)) ([]byte, error) {
	if v, ok := c.get(h); ok {
		if b, ok := v.([]byte); ok {
			return b, nil
		}
	}
	b, err := read()
	if err != nil {
		return nil, err
	}
	if int64(len(b)) <= c.maxBlob {
		c.put(h, b)
	}
	return b, nil
}

// cached returns blob h's content when the cache holds it. The caller
// must not modify the result.
func (c *Cache) cached(h plumbing.Hash) ([]byte, bool) {
	if v, ok := c.get(h); ok {
		b, ok := v.([]byte)
		return b, ok
	}
	return nil, false
}

// size returns the cached size of blob h, if its content is cached.
func (c *Cache) size(h plumbing.Hash) (int64, bool) {
	if v, ok := c.get(h); ok {
		if b, ok := v.([]byte); ok {
			return int64(len(b)), true
		}
	}
	return 0, false
}

// Prefetch reads into c, on workers goroutines, the trees below tree whose
// directories want accepts and the blobs it accepts (want is given the
// slash path and whether it names a directory; the root is always read),
// until c holds about a third of its budget: a file system over the tree
// then finds them decoded, and the reads, which one FS makes one at a time,
// have used every core. Submodules and symbolic links are not followed.
// It returns the first read error, or ctx's.
func (c *Cache) Prefetch(ctx context.Context, objs *Objects, tree plumbing.Hash, workers int, want func(p string, dir bool) bool) error {
	q := &prefetchQueue{items: []prefetchItem{{dir: ".", h: tree, tree: true}}, pending: 1, budget: c.maxObjects / 3}
	q.cond = sync.NewCond(&q.mu)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				it, ok := q.pop()
				if !ok {
					return
				}
				var more []prefetchItem
				err := ctx.Err()
				if err == nil {
					more, err = c.prefetchOne(objs, it, want)
				}
				q.done(more, err)
			}
		}()
	}
	wg.Wait()
	return q.err
}

type prefetchItem struct {
	dir  string // the tree's path, or the blob's
	h    plumbing.Hash
	tree bool
}

// prefetchQueue hands out the objects to read; pending counts those queued
// or being read, so workers stop when it reaches zero.
type prefetchQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	items   []prefetchItem
	pending int
	budget  int // objects still to read
	err     error
}

func (q *prefetchQueue) pop() (prefetchItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && q.pending > 0 && q.err == nil {
		q.cond.Wait()
	}
	if len(q.items) == 0 || q.err != nil {
		return prefetchItem{}, false
	}
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return it, true
}

func (q *prefetchQueue) done(more []prefetchItem, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil && q.err == nil {
		q.err = err
	}
	more = more[:min(len(more), max(q.budget, 0))]
	q.budget -= len(more)
	q.items = append(q.items, more...)
	q.pending += len(more) - 1
	q.cond.Broadcast()
}

// prefetchOne reads one object into c and returns, for a tree, the
// entries to read next.
func (c *Cache) prefetchOne(objs *Objects, it prefetchItem, want func(string, bool) bool) ([]prefetchItem, error) {
	if !it.tree {
		if _, ok := c.cached(it.h); ok {
			return nil, nil
		}
		obj, err := objs.EncodedObject(plumbing.BlobObject, it.h)
		if err != nil {
			return nil, fmt.Errorf("read blob %s: %w", it.h, err)
		}
		if obj.Size() > c.maxBlob {
			return nil, nil // left for whoever needs it
		}
		b, err := readObject(obj)
		if err != nil {
			return nil, err
		}
		c.put(it.h, b)
		return nil, nil
	}
	t, err := c.tree(objs, it.h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", it.h, err)
	}
	var more []prefetchItem
	for _, e := range t.Entries {
		p := e.Name
		if it.dir != "." {
			p = it.dir + "/" + e.Name
		}
		switch e.Mode {
		case filemode.Dir:
			if want(p, true) {
				more = append(more, prefetchItem{dir: p, h: e.Hash, tree: true})
			}
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
			if want(p, false) {
				more = append(more, prefetchItem{dir: p, h: e.Hash})
			}
		}
	}
	return more, nil
}
