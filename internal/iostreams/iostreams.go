// Package iostreams is where every command writes: it knows whether a person
// is watching (a terminal) or a script is reading (a pipe), so commands can show
// progress and tables to people and keep piped output clean.
package iostreams

import (
	"bytes"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// IOStreams bundles the standard streams of one command invocation.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	outTTY bool
	errTTY bool
}

// System returns the process's own streams.
func System() *IOStreams {
	return &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
		ErrOut: os.Stderr,
		outTTY: isTerminal(os.Stdout),
		errTTY: isTerminal(os.Stderr),
	}
}

// Test returns streams backed by buffers, never a terminal.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: &bytes.Buffer{}, Out: out, ErrOut: errOut}, out, errOut
}

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// IsStderrTTY reports whether standard error is a terminal: progress lines go
// there, and only when it is one.
func (s *IOStreams) IsStderrTTY() bool { return s.errTTY }

// SetTTY overrides terminal detection, for tests of the interactive paths.
func (s *IOStreams) SetTTY(out, err bool) { s.outTTY, s.errTTY = out, err }

// isTerminal asks the terminal driver, not the file mode: /dev/null is a
// character device too, and output sent there must not get progress lines.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// SyncBuffer is a buffer that a running command (or server) writes while a
// test reads it: Write and String hold a lock. The zero value is empty.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
