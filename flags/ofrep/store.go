package ofrep

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cuecast/cuecast/flags"
)

// ErrNotFlagSet is what Apply returns for a version that is not a flag set
// of a config whose set the store held: that set is no longer served.
var ErrNotFlagSet = errors.New("no longer a flag set")

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
	// notReady, when set, is why no evaluation is answered (SetNotReady).
	notReady string
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
// other config is not one, and Apply returns false. A version that is not
// a flag set removes the config's set, as deleted (a tombstone) does: a
// set is served only while its newest version is one, and when one is
// removed so, Apply returns an error wrapping ErrNotFlagSet for the caller
// to say. A flag set that does not compile returns the error (wrapping
// flags.ErrInvalid or flags.ErrUnsupportedSchema) and the store keeps the
// version it had, as a service's watcher keeps its evaluator.
func (s *Store) Apply(config string, version uint64, content []byte, deleted bool) (bool, error) {
	if deleted {
		s.Delete(config)
		return false, nil
	}
	var head struct {
		Schema string `json:"schema"`
	}
	if json.Unmarshal(content, &head) != nil || !strings.HasPrefix(head.Schema, "cuecast.flags/") {
		if old, ok := s.remove(config); ok {
			return false, fmt.Errorf("apply %s@%d: %w (no schema cuecast.flags/…): its flags are no longer served (%s@%d was a flag set)",
				config, version, ErrNotFlagSet, config, old)
		}
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
func (s *Store) Delete(config string) { s.remove(config) }

// remove removes config's flag set and returns its version, if the store
// has it.
func (s *Store) remove(config string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sets.Load()
	st, ok := old.sets[config]
	if !ok {
		return 0, false
	}
	next := maps.Clone(old.sets)
	delete(next, config)
	s.sets.Store(newSnapshot(next, old.notReady))
	return st.version, true
}

// SetNotReady makes every evaluation answer 500 GENERAL "not ready: why"
// until SetReady (NotReady): for a store not yet filled, whose
// FLAG_NOT_FOUND or empty bulk evaluation a caller would take for the
// truth.
func (s *Store) SetNotReady(why string) { s.setNotReady(why) }

// SetReady ends SetNotReady: evaluations read the store's flag sets.
func (s *Store) SetReady() { s.setNotReady("") }

func (s *Store) setNotReady(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sets.Load()
	s.sets.Store(&snapshot{sets: old.sets, configs: old.configs, notReady: why})
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
	old := s.sets.Load()
	next := maps.Clone(old.sets)
	next[st.config] = st
	s.sets.Store(newSnapshot(next, old.notReady))
}

func newSnapshot(sets map[string]*set, notReady string) *snapshot {
	return &snapshot{sets: sets, configs: slices.Sorted(maps.Keys(sets)), notReady: notReady}
}

// namespaceOf is a config path's first segment.
func namespaceOf(config string) string {
	ns, _, _ := strings.Cut(config, "/")
	return ns
}
