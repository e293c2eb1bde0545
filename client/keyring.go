package client

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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
type Keyring struct {
	keys []nkeys.KeyPair
	pubs []string

	mu    sync.Mutex
	seen  map[[32]byte]struct{}
	order [][32]byte // FIFO of seen, bounded by keyringMemo
	next  int
}

// keyringMemo bounds how many verified signatures a Keyring remembers.
const keyringMemo = 4096

// NewKeyring returns a Keyring trusting the given public nkeys (as printed
// by `cuecast serve`).
func NewKeyring(publicKeys ...string) (*Keyring, error) {
	if len(publicKeys) == 0 {
		return nil, errors.New("new keyring: no keys given")
	}
	k := &Keyring{seen: map[[32]byte]struct{}{}}
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
	_, ok := k.seen[id]
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
	defer k.mu.Unlock()
	if _, ok := k.seen[id]; ok {
		return
	}
	if len(k.order) < keyringMemo {
		k.order = append(k.order, id)
	} else {
		delete(k.seen, k.order[k.next])
		k.order[k.next] = id
		k.next = (k.next + 1) % keyringMemo
	}
	k.seen[id] = struct{}{}
}

// ReadTrustedKeys reads a trusted-keys file: one public nkey per line (the
// first field of the line), blank lines and lines starting with '#' ignored.
// `cuecast serve` writes one to <data>/trusted-keys; `cuecast keys` prints
// it. It returns an error when the file lists no key or a line is not a
// public nkey.
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

// ParseTrustedKeys is ReadTrustedKeys on the file's content.
func ParseTrustedKeys(b []byte) ([]string, error) {
	var keys []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key := strings.Fields(line)[0]
		if _, err := nkeys.FromPublicKey(key); err != nil {
			return nil, fmt.Errorf("line %d: %q is not a public key: %w", i+1, key, err)
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no key listed")
	}
	return keys, nil
}
