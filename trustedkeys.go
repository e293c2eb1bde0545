package cuecast

import (
	"fmt"
	"slices"
	"strings"
)

// ParseTrustedKeys reads the content of a trusted-keys file (docs/PROTOCOL.md
// §6): one public key per line (the line's first field), blank lines and
// lines starting with '#' skipped. It returns the keys in file order, each
// once, or an error naming the first line whose key publicKey refuses.
// publicKey is nkeys.FromPublicKey: the caller brings the decoder so that
// this package stays standard-library only (docs/ARCHITECTURE.md).
//
// A file listing no key gives no keys and no error: what that means is the
// caller's to say (a client refuses to start, client.ErrNoTrustedKeys; serve
// adds its own key to it).
func ParseTrustedKeys[K any](b []byte, publicKey func(string) (K, error)) ([]string, error) {
	var keys []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key := strings.Fields(line)[0]
		if _, err := publicKey(key); err != nil {
			return nil, fmt.Errorf("line %d: %q is not a public key: %w", i+1, key, err)
		}
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys, nil
}
