package distributor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
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
	tmp, err := writeTemp(filepath.Dir(path), ".signing-key-*", append(seed, '\n'), 0o600)
	if err == nil {
		defer os.Remove(tmp)
		// Link, not rename: a concurrent creator must not replace our key
		// after we returned it, nor we theirs.
		err = os.Link(tmp, path)
	}
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("create signing key %s: %w", path, err)
	}
	return kp, true, nil
}

// TrustedKeysFile is the file in serve's data directory that lists the
// public keys clients trust: the signing key's, and during a rotation the
// other one (docs/OPERATIONS.md, "Rotating the signing key"). `cuecast keys`
// prints it; services read it with client.WithTrustedKeysFile or
// `--trusted-keys-file`.
const TrustedKeysFile = "trusted-keys"

const trustedKeysHeader = `# Public keys that verify what cuecast serve signs (docs/OPERATIONS.md, "Keys").
# Give this file to every service: cuecast watch/agent --trusted-keys-file, or
# client.WithTrustedKeysFile. One key per line; '#' starts a comment.
`

// ReadTrustedKeys returns the public keys listed in the trusted-keys file at
// path (one per line, '#' comments), in order (cuecast.ParseTrustedKeys,
// which clients read it with too). A missing file gives an error wrapping
// os.ErrNotExist; a file listing no key gives none and no error, so that
// serve adds its key to it (TrustKey) and `cuecast keys` says what to do.
func ReadTrustedKeys(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read trusted keys: %w", err)
	}
	keys, err := cuecast.ParseTrustedKeys(b, nkeys.FromPublicKey)
	if err != nil {
		return nil, fmt.Errorf("read trusted keys %s: %w", path, err)
	}
	return keys, nil
}

// TrustKey makes the trusted-keys file at path list pub, creating the file
// when missing; the keys it lists already stay (a rotation's old key is
// trusted until RetireKey). It returns the keys now listed.
func TrustKey(path, pub string) ([]string, error) {
	if _, err := nkeys.FromPublicKey(pub); err != nil {
		return nil, fmt.Errorf("trust key %q: %w", pub, err)
	}
	keys, err := ReadTrustedKeys(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if slices.Contains(keys, pub) {
		return keys, nil
	}
	keys = append(keys, pub)
	if err := writeTrustedKeys(path, keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// ErrLastKey is RetireKey's refusal to leave the trusted-keys file empty.
var ErrLastKey = errors.New("it is the only key")

// ErrNotListed is RetireKey's answer for a key the trusted-keys file does
// not list: retired already, or a typo.
var ErrNotListed = errors.New("not listed")

// RetireKey removes pub from the trusted-keys file at path and returns the
// keys left. It refuses to leave the file empty (ErrLastKey) and a key the
// file does not list (ErrNotListed, naming the keys it does list); a
// missing file gives an error wrapping os.ErrNotExist.
func RetireKey(path, pub string) ([]string, error) {
	keys, err := ReadTrustedKeys(path)
	if err != nil {
		return nil, err
	}
	i := slices.Index(keys, pub)
	if i < 0 {
		listed := "no key"
		switch len(keys) {
		case 0:
		case 1:
			listed = "1 key: " + keys[0]
		default:
			listed = fmt.Sprintf("%d keys: %s", len(keys), strings.Join(keys, ", "))
		}
		return nil, fmt.Errorf("retire key %s: %w in %s, which lists %s", pub, ErrNotListed, path, listed)
	}
	if len(keys) == 1 {
		return nil, fmt.Errorf("retire key %s: %w in %s; clients would trust nothing", pub, ErrLastKey, path)
	}
	keys = slices.Delete(keys, i, i+1)
	if err := writeTrustedKeys(path, keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// writeTrustedKeys replaces the file at path atomically (readable by all:
// public keys are not secret).
func writeTrustedKeys(path string, keys []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write trusted keys %s: %w", path, err)
	}
	tmp, err := writeTemp(filepath.Dir(path), ".trusted-keys-*", []byte(trustedKeysHeader+strings.Join(keys, "\n")+"\n"), 0o644)
	if err == nil {
		defer os.Remove(tmp)
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("write trusted keys %s: %w", path, err)
	}
	return nil
}

// writeTemp writes data with mode perm to a new file in dir (named by
// pattern, as os.CreateTemp does), synced and closed, and returns its name
// for the caller to move into place and then remove. On an error it leaves
// no file.
func writeTemp(dir, pattern string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
