package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
)

// Keyring is a set of trusted public keys that remembers the signatures it
// has verified. The Clients of one process can share one (WithKeyring), so
// that a pointer signature checked by one instance is not checked again by
// the others: verification is the costliest step of an apply, which adds
// up for a sidecar or a test holding many instances (BENCHMARKS.md,
// "Distribution"). It is safe for concurrent use.
//
// A Keyring shared that way also remembers, for its Clients, the pointers
// and the contents it has seen verified: a pointer message whose header is
// byte for byte one verified before is not decoded and verified again
// (each watcher still checks its config, subject and revision), and inline
// content byte for byte equal to content whose SHA-256 matched a pointer's
// checksum is not hashed again; the Clients then share those bytes
// (Snapshot.Content) instead of each keeping its own copy. A memo only
// ever stands for identical bytes. The Keyring WithTrustedKeys makes for
// one Client does neither: that Client checks everything itself.
type Keyring struct {
	keys []nkeys.KeyPair
	pubs []string
	// shared: made by NewKeyring for WithKeyring, so it remembers
	// pointers and contents too.
	shared bool

	mu       sync.Mutex
	seen     memo[[32]byte, struct{}]
	pointers memo[string, *cuecast.Pointer] // Cuecast-Pointer header → the pointer, verified
	contents memo[string, []byte]           // checksum → content that hashes to it
}

// How much a Keyring remembers: verified signatures, pointer headers, and
// contents (of up to contentMemoMax bytes each).
const (
	keyringMemo    = 4096
	pointerMemo    = 256
	contentMemo    = 16
	contentMemoMax = 64 << 10
)

// memo is a map bounded to its first max keys, then forgetting the oldest.
type memo[K comparable, V any] struct {
	m     map[K]V
	order []K
	next  int
}

func (m *memo[K, V]) get(k K) (V, bool) {
	v, ok := m.m[k]
	return v, ok
}

func (m *memo[K, V]) put(k K, v V, max int) {
	if m.m == nil {
		m.m = map[K]V{}
	}
	if _, ok := m.m[k]; ok {
		return
	}
	if len(m.order) < max {
		m.order = append(m.order, k)
	} else {
		delete(m.m, m.order[m.next])
		m.order[m.next] = k
		m.next = (m.next + 1) % max
	}
	m.m[k] = v
}

// NewKeyring returns a Keyring trusting the given public nkeys (as printed
// by `cuecast serve`), to be shared by Clients (WithKeyring).
func NewKeyring(publicKeys ...string) (*Keyring, error) {
	k, err := newKeyring(publicKeys)
	if err != nil {
		return nil, err
	}
	k.shared = true
	return k, nil
}

// newKeyring is a Keyring for one Client (WithTrustedKeys).
func newKeyring(publicKeys []string) (*Keyring, error) {
	if len(publicKeys) == 0 {
		return nil, errors.New("new keyring: no keys given")
	}
	k := &Keyring{}
	for _, pub := range publicKeys {
		kp, err := nkeys.FromPublicKey(pub)
		if err != nil {
			return nil, fmt.Errorf("new keyring: key %q: %w", pub, err)
		}
		k.keys = append(k.keys, kp)
		k.pubs = append(k.pubs, pub)
	}
	return k, nil
}

// Verify checks sig (unpadded base64url ed25519) over data against the
// trusted keys. It returns an error wrapping cuecast.ErrBadSignature when
// sig is missing, malformed or made by no trusted key.
func (k *Keyring) Verify(data []byte, sig string) error {
	if sig == "" {
		return fmt.Errorf("unsigned: %w", cuecast.ErrBadSignature)
	}
	// Hashed from a stack buffer: every instance sharing the Keyring pays
	// this per pointer, the verification only the first.
	var buf [512]byte
	id := sha256.Sum256(append(append(append(buf[:0], data...), 0), sig...))
	k.mu.Lock()
	_, ok := k.seen.get(id)
	k.mu.Unlock()
	if ok {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("decode signature: %w", cuecast.ErrBadSignature)
	}
	for _, kp := range k.keys {
		if kp.Verify(data, raw) == nil {
			k.remember(id)
			return nil
		}
	}
	return fmt.Errorf("not signed by a trusted key: %w", cuecast.ErrBadSignature)
}

func (k *Keyring) remember(id [32]byte) {
	k.mu.Lock()
	k.seen.put(id, struct{}{}, keyringMemo)
	k.mu.Unlock()
}

// verifiedPointer sets *p to the pointer a Cuecast-Pointer header decodes
// to, if this shared Keyring has seen it verified (its signature; not its
// subject or revision, which are each watcher's). Nil-safe: a client
// without trusted keys has no Keyring.
func (k *Keyring) verifiedPointer(p *cuecast.Pointer, header string) bool {
	if k == nil || !k.shared {
		return false
	}
	k.mu.Lock()
	q, ok := k.pointers.get(header)
	k.mu.Unlock()
	if ok {
		*p = *q
	}
	return ok
}

// rememberPointer records that header decodes to *p, whose signature
// verified.
func (k *Keyring) rememberPointer(header string, p *cuecast.Pointer) {
	if k == nil || !k.shared {
		return
	}
	q := *p
	k.mu.Lock()
	k.pointers.put(header, &q, pointerMemo)
	k.mu.Unlock()
}

// verifiedContent returns the bytes remembered for checksum when they are
// body's, so that the caller can use them instead of body; ok is false when
// body has to be hashed.
func (k *Keyring) verifiedContent(checksum string, body []byte) ([]byte, bool) {
	if k == nil || !k.shared {
		return nil, false
	}
	k.mu.Lock()
	c, ok := k.contents.get(checksum)
	k.mu.Unlock()
	if !ok || !bytes.Equal(c, body) {
		return nil, false
	}
	return c, true
}

// rememberContent records body, whose SHA-256 is checksum.
func (k *Keyring) rememberContent(checksum string, body []byte) {
	if k == nil || !k.shared || len(body) > contentMemoMax {
		return
	}
	k.mu.Lock()
	k.contents.put(checksum, body, contentMemo)
	k.mu.Unlock()
}

// ReadTrustedKeys reads a trusted-keys file: one public nkey per line (the
// first field of the line), blank lines and lines starting with '#' ignored.
// `cuecast serve` writes one to <data>/trusted-keys; `cuecast keys` prints
// it. It returns an error when a line is not a public nkey, or when the file
// lists no key: that one matches ErrNoTrustedKeys (errors.Is), since a
// client given it would trust nothing.
func ReadTrustedKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read trusted keys: %w", err)
	}
	keys, err := ParseTrustedKeys(b)
	if err != nil {
		return nil, fmt.Errorf("read trusted keys %s: %w", path, err)
	}
	return keys, nil
}

// ParseTrustedKeys is ReadTrustedKeys on the file's content
// (cuecast.ParseTrustedKeys, which serve's side reads it with too).
func ParseTrustedKeys(b []byte) ([]string, error) {
	keys, err := cuecast.ParseTrustedKeys(b, nkeys.FromPublicKey)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, noKeyListed{}
	}
	return keys, nil
}

// noKeyListed is a trusted-keys file that lists no key. It is
// ErrNoTrustedKeys for errors.Is (docs/SECURITY.md promises that refusal),
// but says only what is wrong with the file: ErrNoTrustedKeys's own text
// names Go options, which `cuecast watch` users do not pass.
type noKeyListed struct{}

func (noKeyListed) Error() string        { return "no key listed" }
func (noKeyListed) Is(target error) bool { return target == ErrNoTrustedKeys }
