package ofrep

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
)

// Tokens are the credentials OFREP requests carry, each reading the flag
// sets of the namespaces it names and no other.
type Tokens struct {
	// by SHA-256 of the token: a lookup by digest compares no secret byte
	// by byte, so its time says nothing of how much of a guess was right.
	by map[[sha256.Size]byte][]string
}

// MinTokenLen is the shortest token ParseTokens accepts: 128 bits of
// entropy written in hex, so that a token cannot be guessed.
const MinTokenLen = 32

// namespaceRE is a config path segment (cuecast.ValidSegment), repeated
// here because this package imports only flags and the standard library.
var namespaceRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ErrBadTokens wraps every error ParseTokens returns.
var ErrBadTokens = errors.New("bad OFREP tokens")

// ParseTokens reads a tokens file: one "NAMESPACE TOKEN" per line, blank
// lines and lines starting with # ignored. A token listed on several lines
// reads each namespace named. The file name is only for messages.
func ParseTokens(name string, b []byte) (*Tokens, error) {
	t := &Tokens{by: map[[sha256.Size]byte][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%w: %s:%d: want NAMESPACE TOKEN", ErrBadTokens, name, n)
		}
		ns, tok := fields[0], fields[1]
		if !namespaceRE.MatchString(ns) {
			return nil, fmt.Errorf("%w: %s:%d: namespace %q must match [a-z0-9][a-z0-9_-]*", ErrBadTokens, name, n, ns)
		}
		if len(tok) < MinTokenLen {
			return nil, fmt.Errorf("%w: %s:%d: token shorter than %d characters (make one with `openssl rand -hex 32`)", ErrBadTokens, name, n, MinTokenLen)
		}
		d := sha256.Sum256([]byte(tok))
		if !slices.Contains(t.by[d], ns) {
			t.by[d] = append(t.by[d], ns)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadTokens, name, err)
	}
	if len(t.by) == 0 {
		return nil, fmt.Errorf("%w: %s: no token", ErrBadTokens, name)
	}
	return t, nil
}

// ErrTokensFileMode is ReadTokensFile's error for a file that users other
// than its owner and group may read, or its group may write.
var ErrTokensFileMode = errors.New("OFREP tokens file open to other users")

// ReadTokensFile reads and parses a tokens file (ParseTokens). Its tokens
// read flags, so a file that other users may read gives them away, and one
// they or its group may write lets them add their own: such a file is
// refused (ErrTokensFileMode), as ssh refuses such a private key, so that
// a file written under the usual umask (0644) is not served from. Mode 600
// or 640 passes; Windows, whose files have no such mode, is not checked.
func ReadTokensFile(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read OFREP tokens: %w", err)
	}
	defer f.Close()
	// The mode of the file read, not of whatever the path names a moment
	// later.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read OFREP tokens: %w", err)
	}
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o027 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o: other users may read its tokens or its group write its own (chmod 600 %s, or 640 for its group to read it)",
			ErrTokensFileMode, path, perm, path)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read OFREP tokens: %w", err)
	}
	return ParseTokens(path, b)
}

// namespaces returns the namespaces token reads; nil for an unknown token.
func (t *Tokens) namespaces(token string) []string {
	if token == "" {
		return nil
	}
	return t.by[sha256.Sum256([]byte(token))]
}
