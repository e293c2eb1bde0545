package compiler

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/cuecast/cuecast"
)

// DefaultMaxRunaways is how many abandoned evaluations NewRunaways lets run
// at once when given no limit. Each can hold gigabytes and a core until it
// ends on its own, so the limit is small: two keeps a second runaway config
// from being refused only because of the first, and no more.
const DefaultMaxRunaways = 2

// Runaways keeps account of the config evaluations abandoned at their
// timeout (CUE cannot interrupt an evaluation, so its goroutine runs on)
// across compiles, so that they cannot pile up. A long-running caller
// such as the tailer makes one and passes it in every Compile's Options;
// without one each Compile keeps its own account, which bounds only what
// that compile abandons.
//
// Three rules, checked before a config is evaluated:
//   - while an abandoned evaluation of a config (or variant) is running, a
//     new one of it is refused at once: a commit a minute to a config that
//     never finishes would otherwise add a goroutine a minute;
//   - while the limit of abandoned evaluations is reached, every
//     evaluation is refused, since any of them might be abandoned too;
//   - a config whose inputs (every file its evaluation loads, its tags
//     and the limit) are what they were when it timed out is refused
//     without evaluating it: it would time out again.
//
// A refusal is a config/timeout error saying which rule refused. A
// Runaways is safe for concurrent use.
type Runaways struct {
	max int

	mu sync.Mutex
	// running counts the abandoned evaluations of each output path still
	// running; abandoned is their total.
	running   map[cuecast.ConfigPath]int
	abandoned int
	// timedOut is the digest of the inputs of each output path whose last
	// evaluation timed out.
	timedOut map[cuecast.ConfigPath]string
	// idle is closed and replaced whenever abandoned falls to zero (Idle).
	idle chan struct{}
}

// NewRunaways returns an account that lets at most max abandoned
// evaluations run at once; max <= 0 means DefaultMaxRunaways. Since the
// workers of a compile can time out at the same moment, the count can
// exceed max by at most Workers-1 (each had been admitted below it).
func NewRunaways(max int) *Runaways {
	if max <= 0 {
		max = DefaultMaxRunaways
	}
	return &Runaways{max: max, running: make(map[cuecast.ConfigPath]int),
		timedOut: make(map[cuecast.ConfigPath]string), idle: make(chan struct{})}
}

// Running returns how many abandoned evaluations are still running.
func (r *Runaways) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.abandoned
}

// admit says why the evaluation of out, whose inputs digest lazily, must
// not start, or "" when it may. The digest is taken only for a config that
// timed out before, so the common path hashes nothing.
func (r *Runaways) admit(out cuecast.ConfigPath, digest func() string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.running[out] > 0:
		return fmt.Sprintf("%s was not evaluated: its previous evaluation, abandoned at the time limit, is still running (CUE cannot stop it); it is evaluated again once that ends", out)
	case r.abandoned >= r.max:
		return fmt.Sprintf("%s was not evaluated: %d abandoned evaluations of configs that exceeded the time limit are still running, the most allowed at once; it is evaluated again once one ends", out, r.abandoned)
	}
	if prev, ok := r.timedOut[out]; ok && prev == digest() {
		return fmt.Sprintf("%s was not evaluated: nothing it reads has changed since its evaluation exceeded the time limit", out)
	}
	return ""
}

// abandon records that the evaluation of out was given up while running,
// and, when it was for its timeout, the digest of its inputs. The
// returned function is called when the evaluation ends.
func (r *Runaways) abandon(out cuecast.ConfigPath, digest string) (ended func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[out]++
	r.abandoned++
	if digest != "" {
		r.timedOut[out] = digest
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.running[out]--; r.running[out] == 0 {
			delete(r.running, out)
		}
		if r.abandoned--; r.abandoned == 0 {
			close(r.idle)
			r.idle = make(chan struct{})
		}
	}
}

// finished records that out was evaluated within the limit: a digest kept
// from an earlier timeout no longer describes it.
func (r *Runaways) finished(out cuecast.ConfigPath) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.timedOut, out)
}

// Idle returns a channel closed once no abandoned evaluation is running,
// for a caller that must not leave them behind (a test, a shutdown that
// wants the memory back).
func (r *Runaways) Idle() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abandoned == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return r.idle
}

// inputsDigest hashes what the evaluation of j reads: the files the loader
// is offered for it (loadBatch offers the same directories), its tags and
// injected fields, its namespace schema and the time limit, which a larger
// value might let it meet.
func (c *compilation) inputsDigest(j job) string {
	h := sha256.New()
	dirs := slices.Clone(j.deps)
	if j.wrapDir != "" {
		dirs = append(dirs, j.wrapDir)
	}
	ov := c.loadConfigFor(dirs).Overlay
	names := make([]string, 0, len(ov))
	for name := range ov {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rel := strings.TrimPrefix(name, c.root+"/")
		b := c.mem.files[rel]
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%q %v %q %s", j.tags, j.injects, j.ns.Schema, c.opts.Timeout)
	io.WriteString(h, "\x00")
	return hex.EncodeToString(h.Sum(nil))
}

// refusal reports a config admit refused, where a timeout of it would be
// reported, since that is the likeliest reason it was refused.
func (c *compilation) refusal(j job, why string) Error {
	e := c.timeoutError(j)
	e.Message = fmt.Sprintf("%s (limit %s)", why, c.opts.Timeout)
	return e
}
