package client

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// Option configures a Client. Options validate their arguments; New reports
// the first invalid one.
type Option func(*options) error

type options struct {
	instance  string
	labels    map[string]string
	dims      map[string]string // WithDimensions
	keyring   *Keyring          // nil: signatures are not checked (only with insecure)
	insecure  bool              // WithInsecureSkipVerify: no keys, on purpose
	health    func() cuecast.Health
	applyErr  func(cuecast.ConfigPath) string // WithApplyError; nil: none
	heartbeat time.Duration
	reconcile time.Duration
	timeout   time.Duration
	events    func(Event)
	directGet string // direct-get subject of the stream read (WithStream)
}

// WithInstance sets the instance ID (required): it names the instance in
// reports and decides its cohort. It must be 1-128 of [A-Za-z0-9_-].
func WithInstance(id string) Option {
	return func(o *options) error {
		if err := cuecast.ValidateInstance(id); err != nil {
			return err
		}
		o.instance = id
		return nil
	}
}

// WithLabels attaches labels (region, host, build…) to every report.
func WithLabels(labels map[string]string) Option {
	return func(o *options) error {
		o.labels = make(map[string]string, len(labels))
		for k, v := range labels {
			o.labels[k] = v
		}
		return nil
	}
}

// WithTrustedKeys makes the client accept only versions and pointers signed
// by one of these public nkeys (as `cuecast keys` prints them, and as `cuecast
// serve` writes them to <data>/trusted-keys). Unsigned or badly signed ones
// are rejected and reported. A client needs trusted keys (this,
// WithTrustedKeysFile or WithKeyring) unless it is told
// WithInsecureSkipVerify. It conflicts with WithKeyring.
func WithTrustedKeys(publicKeys ...string) Option {
	return func(o *options) error {
		if o.keyring != nil {
			return errors.New("trusted keys: a keyring is already set")
		}
		k, err := newKeyring(publicKeys)
		if err != nil {
			return fmt.Errorf("trusted keys: %w", err)
		}
		o.keyring = k
		return nil
	}
}

// WithTrustedKeysFile is WithTrustedKeys with the keys read from a file: the
// <data>/trusted-keys file `cuecast serve` writes (or `cuecast keys` prints),
// one public key per line, '#' starting a comment (ReadTrustedKeys). During
// a key rotation it lists the old and the new key.
func WithTrustedKeysFile(path string) Option {
	return func(o *options) error {
		keys, err := ReadTrustedKeys(path)
		if err != nil {
			return fmt.Errorf("trusted keys: %w", err)
		}
		return WithTrustedKeys(keys...)(o)
	}
}

// WithInsecureSkipVerify makes the client accept unsigned versions and
// pointers, and any signature: anyone who can publish on the server's
// subjects then decides what the service runs. It exists for tests and
// demos; New refuses a client with neither trusted keys nor this. The
// client says so in an EventError when each watcher starts. It conflicts
// with trusted keys.
func WithInsecureSkipVerify() Option {
	return func(o *options) error {
		o.insecure = true
		return nil
	}
}

// WithKeyring is WithTrustedKeys with a Keyring shared by several Clients in
// one process, so each signature is verified once, and each pointer and
// each content once (see Keyring). It conflicts with WithTrustedKeys.
func WithKeyring(k *Keyring) Option {
	return func(o *options) error {
		if k == nil {
			return errors.New("keyring: nil")
		}
		if o.keyring != nil {
			return errors.New("keyring: trusted keys are already set")
		}
		o.keyring = k
		return nil
	}
}

// WithHealth sets the health provider consulted for every report; by default
// an instance reports healthy.
func WithHealth(f func() cuecast.Health) Option {
	return func(o *options) error {
		if f == nil {
			return errors.New("health provider: nil")
		}
		o.health = f
		return nil
	}
}

// WithApplyError sets where the client asks, for each report of a
// config, why the service does not run what the instance applied: a
// sidecar could not write the config's file, or the service's reload
// failed ("" when nothing is wrong). It is reported in the report's
// last_error, after the watcher's own error if there is one, cut to
// MaxApplyError bytes, so that status shows why an instance is unhealthy
// and not only that it is. Every reader of the reports sees it: name no
// secret, and no path of this host the readers have no use for.
func WithApplyError(f func(cfg cuecast.ConfigPath) string) Option {
	return func(o *options) error {
		if f == nil {
			return errors.New("apply error provider: nil")
		}
		o.applyErr = f
		return nil
	}
}

// WithHeartbeat sets how often the instance reports even when nothing
// changes; default 15s. It must match the distributor's Heartbeat, which
// expires reports after four of them.
func WithHeartbeat(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("heartbeat %s: want a positive duration", d)
		}
		o.heartbeat = d
		return nil
	}
}

// WithReconcile sets how often the instance re-reads its pointer even when
// no gap was seen (anti-entropy); default 60s, jittered by ±10%.
func WithReconcile(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("reconcile interval %s: want a positive duration", d)
		}
		o.reconcile = d
		return nil
	}
}

// WithRequestTimeout bounds each read from the server; default 5s. The
// reads of one re-read of the pointers (the cohort's three, and after them
// the staged pointer of a strict config) share one such bound.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("request timeout %s: want a positive duration", d)
		}
		o.timeout = d
		return nil
	}
}

// WithEvents receives what the client would otherwise log: applies,
// rejections, errors. The callback runs on the watcher's goroutine (the
// events of Watch's own start, loading the last-known-good file and
// picking a variant, on the goroutine calling Watch) and must not block.
func WithEvents(f func(Event)) Option {
	return func(o *options) error {
		if f == nil {
			return errors.New("events callback: nil")
		}
		o.events = f
		return nil
	}
}

// WatchOption configures one Watch.
type WatchOption func(*watchOptions) error

type watchOptions struct {
	lkgPath       string
	validate      func([]byte) error
	decode        func([]byte) (any, error) // set by Typed
	strict        bool                      // StrictDecoding
	validateValue func(any) error           // ValidateValue
	// sink receives every published snapshot, closeSink runs when the
	// watcher stops: Typed's decoded Updates.
	sink      func(Snapshot)
	closeSink func()
}

// LastKnownGood keeps the last applied version in the file at path (written
// atomically) and starts from it on the next start, before any pointer is
// read (and without NATS at all when it is down). It is also what keeps an
// instance that restarts from going back for an old rollback pointer that
// whoever can write the stream stored again: only a rollback newer than the
// file's pointer is followed (docs/SECURITY.md).
func LastKnownGood(path string) WatchOption {
	return func(o *watchOptions) error {
		if path == "" {
			return errors.New("last-known-good path: empty")
		}
		o.lkgPath = path
		return nil
	}
}

// Validate sets the service's own check of a version's content (the
// bytes; with Typed, ValidateValue checks the decoded value). A version
// it rejects is reported as failed and not applied; the instance keeps what
// it has. It is not called for tombstones.
func Validate(f func(content []byte) error) WatchOption {
	return func(o *watchOptions) error {
		if f == nil {
			return errors.New("validation hook: nil")
		}
		o.validate = f
		return nil
	}
}

// ConnectOptions are the nats.Options a service should connect with:
//
//   - reconnect forever, waiting before attempt a a random time in
//     [0, min(1 s · 2^(a-1), 30 s)): a fleet dropped at once comes back
//     spread over a second, then two, four…, rather than all within 100 ms
//     at a server that logs clients in one at a time;
//   - give the server 10 s to complete a login (nats.Timeout), and a dial
//     2 s: a login abandoned at nats.go's default 2 s is made again, and a
//     busy server's queue only grows (docs/SCALING.md, "A reconnect storm");
//   - close the socket of an abandoned login before dialing again (nats.go
//     leaves it open until the garbage collector finds it);
//   - connect even when the server is down at start (the watcher serves its
//     last-known-good file meanwhile), and keep buffering while
//     disconnected;
//   - ping the server every 15 s and give up on a connection after two
//     unanswered pings: nats.go's default (2 min) left a connection whose
//     way back had died (a one-way partition, a middlebox that dropped its
//     state) looking healthy for 4–6 minutes; now it is noticed in 30–45 s.
//
// Append your own options after them; later options win. The dialer is a
// nats.CustomDialer, so nats.Dialer and nats.MultipathTCP have no effect
// unless nats.SetCustomDialer replaces it, and nats.Timeout bounds the
// login only. The slice may serve several connections: each one dials
// through a dialer of its own.
func ConnectOptions() []nats.Option {
	return []nats.Option{
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(2),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.Timeout(handshakeTimeout),
		withDialer(),
	}
}

// pingInterval is how often a connection made with ConnectOptions pings
// its server. Each ping is a few bytes; 10,000 instances cost their
// servers under 700 pings a second between them.
const pingInterval = 15 * time.Second

// handshakeTimeout bounds a login (nats.go's INFO, CONNECT, PING and PONG)
// on a connection made with ConnectOptions: a server logging in a fleet
// after a storm answers late but answers.
const handshakeTimeout = 10 * time.Second

// maxReconnectWait caps the wait before a reconnect attempt.
const maxReconnectWait = 30 * time.Second

// reconnectDelay is the wait before reconnect attempt a (from 1, as nats.go
// counts them): full jitter, drawn from [0, reconnectCeiling(a)).
func reconnectDelay(attempt int) time.Duration {
	return rand.N(reconnectCeiling(attempt))
}

// reconnectCeiling is 1 s doubling per attempt, up to maxReconnectWait.
func reconnectCeiling(attempt int) time.Duration {
	return min(time.Second<<min(max(attempt, 1)-1, 5), maxReconnectWait)
}

// backoff doubles base per attempt up to limit.
func backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// jittered draws from [d/2, d).
func jittered(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}
