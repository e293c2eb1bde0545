package distributor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
)

// LoadOrCreateKey returns the signing key stored at path (an nkeys seed),
// creating an account-type key there (mode 0600, written atomically) when the
// file does not exist; created says which. `cuecast serve` calls it on start
// and prints the key's public half for clients to trust.
func LoadOrCreateKey(path string) (kp nkeys.KeyPair, created bool, err error) {
	seed, err := os.ReadFile(path)
	if err == nil {
		kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
		if err != nil {
			return nil, false, fmt.Errorf("load signing key %s: %w", path, err)
		}
		return kp, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("load signing key %s: %w", path, err)
	}
	kp, err = nkeys.CreateAccount()
	if err != nil {
		return nil, false, fmt.Errorf("create signing key: %w", err)
	}
	seed, err = kp.Seed()
	if err != nil {
		return nil, false, fmt.Errorf("create signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("create signing key %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".signing-key-*")
	if err != nil {
		return nil, false, fmt.Errorf("create signing key %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(append(seed, '\n'))
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Link, not rename: a concurrent creator must not replace our key
		// after we returned it, nor we theirs.
		err = os.Link(tmp.Name(), path)
	}
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("create signing key %s: %w", path, err)
	}
	return kp, true, nil
}
