package client

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// Client is one service instance's connection to cuecast. It holds the
// instance's identity and the policy shared by its watchers; it is safe for
// concurrent use.
type Client struct {
	nc *nats.Conn
	o  options

	mu       sync.Mutex
	watchers map[*Watcher]struct{}
	closed   bool
	// status listens to the connection while any watcher runs; one
	// forwarder per Client hands each change to every watcher (notifyStatus)
	// through its message channel, so a watcher waits on that one channel.
	status chan nats.Status
}

// ErrNoTrustedKeys is New's refusal of a client that would accept content
// nobody signed: without trusted keys, anyone who can publish on the
// server's subjects would decide what the service runs.
var ErrNoTrustedKeys = errors.New("no trusted keys: pass WithTrustedKeysFile(\"<data>/trusted-keys\") " +
	"or WithTrustedKeys(<key>) with the keys `cuecast keys` prints on the serve host " +
	"(WithInsecureSkipVerify accepts unsigned content, for tests only)")

// New returns a Client for nc, which the caller owns (connect it with
// ConnectOptions so that it reconnects forever). WithInstance is required,
// and so are trusted keys (WithTrustedKeysFile, WithTrustedKeys or
// WithKeyring): without them, or with a keys file that lists none, New
// returns an error matching ErrNoTrustedKeys, unless WithInsecureSkipVerify
// says to accept unsigned content. New does no I/O besides reading a keys
// file.
func New(nc *nats.Conn, opts ...Option) (*Client, error) {
	if nc == nil {
		return nil, errors.New("new client: nil connection")
	}
	o := options{
		heartbeat: 15 * time.Second,
		reconcile: 60 * time.Second,
		timeout:   5 * time.Second,
		health:    func() cuecast.Health { return cuecast.Health{Healthy: true} },
		events:    func(Event) {},
		directGet: directGet,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("new client: %w", err)
		}
	}
	if o.instance == "" {
		return nil, fmt.Errorf("new client: WithInstance is required: %w", cuecast.ErrInvalidInstance)
	}
	switch {
	case o.keyring == nil && !o.insecure:
		return nil, fmt.Errorf("new client: %w", ErrNoTrustedKeys)
	case o.keyring != nil && o.insecure:
		return nil, errors.New("new client: WithInsecureSkipVerify and trusted keys together: drop WithInsecureSkipVerify")
	}
	if len(o.dims) > 0 {
		labels := maps.Clone(o.labels)
		if labels == nil {
			labels = make(map[string]string, len(o.dims))
		}
		maps.Copy(labels, o.dims)
		o.labels = labels
	}
	return &Client{nc: nc, o: o, watchers: map[*Watcher]struct{}{}}, nil
}

// Close stops every watcher. It does not close the connection.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	ws := make([]*Watcher, 0, len(c.watchers))
	for w := range c.watchers {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

func (c *Client) track(w *Watcher) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("client closed")
	}
	c.watchers[w] = struct{}{}
	if c.status == nil {
		c.status = c.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
		go c.forwardStatus(c.status)
	}
	return nil
}

func (c *Client) untrack(w *Watcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.watchers, w)
	if len(c.watchers) == 0 && c.status != nil {
		c.nc.RemoveStatusListener(c.status) // closes it: forwardStatus returns
		c.status = nil
	}
}

// forwardStatus tells every watcher of each status change on ch until ch
// is closed.
func (c *Client) forwardStatus(ch chan nats.Status) {
	for st := range ch {
		c.mu.Lock()
		ws := make([]*Watcher, 0, len(c.watchers))
		for w := range c.watchers {
			ws = append(ws, w)
		}
		c.mu.Unlock()
		for _, w := range ws {
			w.notifyStatus(st)
		}
	}
}

// Snapshot is one applied version of a config. It is immutable: Content is
// shared between readers and must not be modified.
type Snapshot struct {
	Config   cuecast.ConfigPath `json:"config"`
	Version  uint64             `json:"version"`
	Checksum string             `json:"checksum"`
	Commit   string             `json:"commit,omitempty"`
	Content  []byte             `json:"-"`
	// Deleted: the config was removed on main (a tombstone); Content is empty.
	Deleted bool `json:"deleted,omitempty"`
	// FromLastKnownGood: loaded from the last-known-good file at start and
	// not yet confirmed by the distributor.
	FromLastKnownGood bool      `json:"from_last_known_good,omitempty"`
	AppliedAt         time.Time `json:"applied_at"`

	value any // decoded by a TypedWatcher
}

// IsZero reports whether no version has been applied yet.
func (s Snapshot) IsZero() bool { return s.Version == 0 && s.Config == "" }

// EventKind says what an Event is about.
type EventKind int

const (
	// EventApplied: a version was verified, validated and swapped in.
	EventApplied EventKind = iota + 1
	// EventLoaded: the last-known-good file was loaded at start.
	EventLoaded
	// EventRejected: a version or pointer failed verification (checksum,
	// signature) or the validation hook; it was not applied.
	EventRejected
	// EventError: a failure, most of them retried (a read, a report,
	// writing the last-known-good file, at each heartbeat until it is
	// written); some are said once: an unusable
	// last-known-good file, the variant that could not be picked at Watch
	// (NATS down at start), the connection closed for good, the
	// WithInsecureSkipVerify warning.
	EventError
	// EventSkipped: a pointer the watcher did not follow because it names a
	// version older than the one applied and is not a rollback.
	EventSkipped
	// EventResync: the pointer was re-read; Detail says why (gap,
	// reconnect, reconcile, retry, purged, staged). The read at start sends
	// none.
	EventResync
	// EventNotFound: a warning that no version is deployed to this
	// instance, so Current stays what it is (zero without a last-known-good
	// file). Detail tells a config with no version at all (a misspelt
	// path) from one whose rollout has not reached the instance; Err wraps
	// cuecast.ErrNotFound. Sent at the first read that finds nothing, then
	// while it lasts no sooner than 9/10 of the reconcile interval
	// (WithReconcile) after the last one, so about once per interval.
	EventNotFound
)

func (k EventKind) String() string {
	switch k {
	case EventApplied:
		return "applied"
	case EventLoaded:
		return "loaded"
	case EventRejected:
		return "rejected"
	case EventError:
		return "error"
	case EventSkipped:
		return "skipped"
	case EventResync:
		return "resync"
	case EventNotFound:
		return "not-found"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is what the client reports instead of logging.
type Event struct {
	Kind    EventKind
	Config  cuecast.ConfigPath
	Version uint64
	Detail  string
	Err     error
	At      time.Time
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %s", e.Kind, e.Config)
	if e.Version != 0 {
		s += fmt.Sprintf("@%d", e.Version)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
