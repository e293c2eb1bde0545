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
	// pending are the configs whose first version has not come yet
	// (Pending), sorted: their keys, and a bulk evaluation that would
	// include them, are answered "not ready".
	pending []string
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
	if !isFlagSet(content) {
		if old, ok := s.remove(config); ok {
			return false, fmt.Errorf("apply %s@%d: %w (no schema cuecast.flags/…): its flags are no longer served (%s@%d was a flag set)",
				config, version, ErrNotFlagSet, config, old)
		}
		return false, nil
	}
	ev, err := flags.Compile(content)
	if err != nil {
		// A version came, even if this build cannot serve it: the config
		// is no longer waiting, and keeps the set it had.
		s.update(config, func(prev *set) *set { return prev })
		return true, fmt.Errorf("apply %s@%d: %w", config, version, err)
	}
	st := &set{config: config, namespace: namespaceOf(config), version: version, ev: ev, keys: ev.Keys()}
	s.update(config, func(*set) *set { return st })
	return true, nil
}

// Evaluable returns the error Apply would for content when it is a flag
// set that does not compile (wrapping flags.ErrInvalid or
// flags.ErrUnsupportedSchema), nil for any other content. A server that
// can refuse a version before it takes it (the agent, through its
// client's validation hook) refuses such a one, rather than take it and
// go on evaluating the version before.
func Evaluable(content []byte) error {
	if !isFlagSet(content) {
		return nil
	}
	if _, err := flags.Compile(content); err != nil {
		return fmt.Errorf("this build cannot evaluate this flag set: %w", err)
	}
	return nil
}

// isFlagSet reports whether content is a flag set: a schema cuecast.flags/….
func isFlagSet(content []byte) bool {
	var head struct {
		Schema string `json:"schema"`
	}
	return json.Unmarshal(content, &head) == nil && strings.HasPrefix(head.Schema, "cuecast.flags/")
}

// Delete removes config's flag set, if the store has it.
func (s *Store) Delete(config string) { s.remove(config) }

// remove removes config's flag set and returns its version, if the store
// has it.
func (s *Store) remove(config string) (uint64, bool) {
	prev := s.update(config, func(*set) *set { return nil })
	if prev == nil {
		return 0, false
	}
	return prev.version, true
}

// Pending marks configs as waiting for their first version: until Apply
// or Delete of one, a single evaluation of a key under it answers 500
// GENERAL "not ready: waiting for the first version of <config>", and a
// bulk evaluation of a caller who may read its namespace answers that 500
// too, naming every such config. For a server that watches named configs
// and serves before they have all come (the agent): a key of one not yet
// come would be FLAG_NOT_FOUND, and a bulk evaluation without its set,
// which a caller takes for the truth. The other configs' keys answer
// meanwhile, so that one that never comes (a misspelt path) holds up only
// its own keys and the bulk evaluation.
func (s *Store) Pending(configs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sets.Load()
	pending := slices.Clone(old.pending)
	for _, c := range configs {
		if i, found := slices.BinarySearch(pending, c); !found {
			pending = slices.Insert(pending, i, c)
		}
	}
	s.sets.Store(&snapshot{sets: old.sets, configs: old.configs, notReady: old.notReady, pending: pending})
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
	s.sets.Store(&snapshot{sets: old.sets, configs: old.configs, notReady: why, pending: old.pending})
}

// Version returns the version of config's flag set the store holds.
func (s *Store) Version(config string) (uint64, bool) {
	st, ok := s.sets.Load().sets[config]
	if !ok {
		return 0, false
	}
	return st.version, true
}

// update makes next(its set) config's set, none when nil, and ends
// config's wait for its first version (Pending): whatever a version does
// to the store, it is the version waited for. It returns the set before.
func (s *Store) update(config string, next func(prev *set) *set) *set {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.sets.Load()
	prev := old.sets[config]
	st := next(prev)
	i, waiting := slices.BinarySearch(old.pending, config)
	if st == prev && !waiting {
		return prev
	}
	snap := &snapshot{sets: old.sets, configs: old.configs, notReady: old.notReady, pending: old.pending}
	if waiting {
		snap.pending = slices.Delete(slices.Clone(old.pending), i, i+1)
	}
	if st != prev {
		snap.sets = maps.Clone(old.sets)
		if st == nil {
			delete(snap.sets, config)
		} else {
			snap.sets[config] = st
		}
		snap.configs = slices.Sorted(maps.Keys(snap.sets))
	}
	s.sets.Store(snap)
	return prev
}

// namespaceOf is a config path's first segment.
func namespaceOf(config string) string {
	ns, _, _ := strings.Cut(config, "/")
	return ns
}
