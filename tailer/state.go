package tailer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// Bucket is the JetStream KV bucket holding every tailer's cursor, under the
// key "cursor.<Config.ID>".
const Bucket = "cuecast-tailer"

// maxRejected bounds State.Rejected; the oldest entries are dropped.
const maxRejected = 50

// maxRejectedErrors bounds the errors kept for one rejected commit.
const maxRejectedErrors = 20

// State is a tailer's durable state, stored as JSON in the KV bucket. It is
// what `cuecast status` shows about the tailer.
type State struct {
	Repo   string `json:"repo"`
	Branch string `json:"branch"`
	// Cursor is the last commit processed: published, found to publish
	// nothing, or rejected. Empty before the first commit.
	Cursor string `json:"cursor,omitempty"`
	// Base is the last commit that compiled: the published versions are its
	// tree's configs. It differs from Cursor while the commits after it are
	// rejected; the next good commit is diffed against Base, so what the
	// rejected commits changed is compiled then. Empty when unknown (before
	// the first commit, after StartAt or an accepted rewrite): the next
	// commit then compiles every config.
	Base string `json:"base,omitempty"`
	// From is the first commit to process when Cursor is empty (StartAt, or
	// the commit an accepted rewrite resumes at); empty means the root.
	From string `json:"from,omitempty"`
	// Rejected lists the commits that did not compile, oldest first (the
	// newest 50).
	Rejected []Rejected `json:"rejected,omitempty"`
	// Undeployed are configs whose latest version is published but not yet
	// deployed (see Tailer.Poll).
	Undeployed []cuecast.ConfigPath `json:"undeployed,omitempty"`
	// HighWater is the highest version number of each config the tailer
	// published (written with the cursor, after the publish). It lives in
	// another stream than the versions, so it survives damage to theirs;
	// see Tailer.Inconsistent.
	HighWater map[cuecast.ConfigPath]uint64 `json:"high_water,omitempty"`
	// Rewrite is set while publishing is halted by a history rewrite.
	Rewrite *Rewrite `json:"rewrite,omitempty"`
	// UpdatedAt is when the state was last written.
	UpdatedAt time.Time `json:"updated_at"`

	rev uint64 // KV revision read; 0 when the key does not exist
}

// Rejected is a commit that did not compile; nothing was published from it.
type Rejected struct {
	Commit  string    `json:"commit"`
	Author  string    `json:"author"`
	Message string    `json:"message"` // first line
	At      time.Time `json:"at"`      // when the tailer rejected it
	// Namespaces are the namespaces whose configs did not compile: the
	// commit's changes there were rejected, and those elsewhere published.
	// Empty when the whole commit was rejected for an error outside every
	// config (the manifest, the module, a file of the repo's own).
	Namespaces []string `json:"namespaces,omitempty"`
	// Errors are the compiler's errors (the first 20) and Total their count.
	Errors []compiler.Error `json:"errors"`
	Total  int              `json:"total"`
}

// Rewrite describes a halt: Tip does not descend from Cursor.
type Rewrite struct {
	Cursor     string    `json:"cursor"`
	Tip        string    `json:"tip"`
	DetectedAt time.Time `json:"detected_at"`
}

// store reads and writes one tailer's state with compare-and-swap.
type store struct {
	kv  jetstream.KeyValue
	key string
}

func openStore(ctx context.Context, js jetstream.JetStream, id string, replicas int) (*store, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "cuecast tailer cursors: the last commit each repo's tailer processed",
		History:     5,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", Bucket, err)
	}
	return &store{kv: kv, key: "cursor." + id}, nil
}

// load returns the stored state, or a zero State (rev 0) when there is none.
func (s *store) load(ctx context.Context) (State, error) {
	e, err := s.kv.Get(ctx, s.key)
	// A bucket just created on a cluster answers direct gets only once a
	// replica has caught up and subscribed: until then a get finds no
	// responders (TestServeOnR3Cluster failed on it once under the whole
	// suite's load). That is worth a few seconds of retries at start, not a
	// failed start.
	for wait := 50 * time.Millisecond; errors.Is(err, nats.ErrNoResponders) && wait < 5*time.Second; wait *= 2 {
		select {
		case <-ctx.Done():
			return State{}, fmt.Errorf("read %s/%s: %w", Bucket, s.key, ctx.Err())
		case <-time.After(wait):
		}
		e, err = s.kv.Get(ctx, s.key)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("read %s/%s: %w", Bucket, s.key, err)
	}
	var st State
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return State{}, fmt.Errorf("decode %s/%s revision %d: %w", Bucket, s.key, e.Revision(), err)
	}
	st.rev = e.Revision()
	return st, nil
}

// save writes st if the stored revision is still st.rev and updates st.rev.
// A concurrent writer (another process accepting a rewrite) makes it fail
// with an error wrapping errConcurrent.
func (s *store) save(ctx context.Context, st *State) error {
	st.UpdatedAt = time.Now().UTC()
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	var rev uint64
	if st.rev == 0 {
		rev, err = s.kv.Create(ctx, s.key, b)
	} else {
		rev, err = s.kv.Update(ctx, s.key, b, st.rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("write %s/%s: %w", Bucket, s.key, errConcurrent)
	}
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", Bucket, s.key, err)
	}
	st.rev = rev
	return nil
}

var errConcurrent = errors.New("state changed by another writer; re-reading it")

// StateStream is the stream behind the tailer's KV bucket, which LoadState
// reads.
const StateStream = "KV_" + Bucket

// LastMsgReader reads the newest message on a subject of one stream; a
// missing message is an error wrapping jetstream.ErrMsgNotFound, a missing
// stream one wrapping jetstream.ErrStreamNotFound.
// distributor.NewDirectStream(nc, tailer.StateStream) is one, by direct get.
type LastMsgReader interface {
	GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error)
}

// LoadState reads the state of the tailer with the given ID from the KV
// bucket's stream through r, without a Tailer (for `cuecast status` in
// another process). It returns a zero State when that tailer has not written
// one, and an error wrapping jetstream.ErrBucketNotFound when no tailer ever
// ran. Given a direct-get reader it never goes through JetStream's
// management API, so the operator's account, which reaches the bucket
// through a service import of its direct get alone, can read it
// (docs/SECURITY.md).
func LoadState(ctx context.Context, r LastMsgReader, id string) (State, error) {
	key := "cursor." + id
	m, err := r.GetLastMsgForSubject(ctx, "$KV."+Bucket+"."+key)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return State{}, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return State{}, fmt.Errorf("open bucket %s: %w", Bucket, errors.Join(jetstream.ErrBucketNotFound, err))
	case err != nil:
		return State{}, fmt.Errorf("read %s/%s: %w", Bucket, key, err)
	case m.Header.Get("KV-Operation") != "":
		return State{}, nil // deleted or purged
	}
	var st State
	if err := json.Unmarshal(m.Data, &st); err != nil {
		return State{}, fmt.Errorf("decode %s/%s revision %d: %w", Bucket, key, m.Sequence, err)
	}
	st.rev = m.Sequence
	return st, nil
}
