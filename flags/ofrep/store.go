package ofrep

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cuecast/cuecast/flags"
)

// Store holds the flag sets a Handler evaluates, by config path: the newest
// version applied of each. Writers (Apply, Delete) are serialized; readers
// see an immutable snapshot.
type Store struct {
	mu   sync.Mutex // serializes writers
	sets atomic.Pointer[snapshot]
}

// snapshot is the store's content at one moment; never modified.
type snapshot struct {
	sets    map[string]*set
	configs []string // sorted: the order of a bulk evaluation
}

// set is one flag set version.
type set struct {
	config    string
	namespace string
	version   uint64
	ev        *flags.Evaluator
	keys      []string // flag names, sorted
}

// NewStore returns an empty store.
func NewStore() *Store {
	s := &Store{}
	s.sets.Store(&snapshot{sets: map[string]*set{}})
	return s
}

// Apply records version of config with its compiled content: a flag set
// (schema flags.Schema) is compiled and replaces the config's set; any
// other config is not one, and Apply returns false and leaves the store
// alone. deleted (a tombstone) removes the config's set. A flag set that
// does not compile returns the error (wrapping flags.ErrInvalid or
// flags.ErrUnsupportedSchema) and the store keeps the version it had, as a
// service's watcher keeps its evaluator.
func (s *Store) Apply(config string, version uint64, content []byte, deleted bool) (bool, error) {
	if deleted {
		s.Delete(config)
		return false, nil
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if json.Unmarshal(content, &head) != nil || !strings.HasPrefix(head.Schema, "cuecast.flags/") {
		return false, nil
	}
	ev, err := flags.Compile(content)
	if err != nil {
		return true, fmt.Errorf("apply %s@%d: %w", config, version, err)
	}
	s.put(&set{config: config, namespace: namespaceOf(config), version: version, ev: ev, keys: ev.Keys()})
	return true, nil
}

// Delete removes config's flag set, if the store has it.
func (s *Store) Delete(config string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sets.Load()
	if _, ok := old.sets[config]; !ok {
		return
	}
	next := maps.Clone(old.sets)
	delete(next, config)
	s.sets.Store(newSnapshot(next))
}

// Version returns the version of config's flag set the store holds.
func (s *Store) Version(config string) (uint64, bool) {
	st, ok := s.sets.Load().sets[config]
	if !ok {
		return 0, false
	}
	return st.version, true
}

func (s *Store) put(st *set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := maps.Clone(s.sets.Load().sets)
	next[st.config] = st
	s.sets.Store(newSnapshot(next))
}

func newSnapshot(sets map[string]*set) *snapshot {
	return &snapshot{sets: sets, configs: slices.Sorted(maps.Keys(sets))}
}

// namespaceOf is a config path's first segment.
func namespaceOf(config string) string {
	ns, _, _ := strings.Cut(config, "/")
	return ns
}
