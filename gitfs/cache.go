package gitfs

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
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
