package simfleet

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Spec is the child Start runs.
type Spec struct {
	// Child is ChildEnv's value in the child, which the test binary's
	// TestMain looks for.
	Child string
	// URL is the NATS server the instances connect to.
	URL string
	// Instances is how many instances the child runs.
	Instances int
	// Env is more of the child's environment as KEY=value, for the
	// benchmark's own side of Run (the key the instances trust, say). The
	// child inherits the parent's environment besides.
	Env []string
	// RoundTimeout is how long Done waits for a round to end; default a
	// minute. A fleet of tens of thousands on a shared machine needs more.
	RoundTimeout time.Duration
}

// Child is the parent's handle on the child process. One goroutine reads
// the child's stdout into lines, so the parent can wait for each with a
// deadline.
type Child struct {
	// HeapPerInstance and RSSPerInstance are the child's heap (as
	// HeapInUse counts it) and resident set in bytes per instance, once
	// every instance had applied a version. RSS is 0 where not Linux.
	HeapPerInstance, RSSPerInstance float64

	cmd          *exec.Cmd
	in           io.WriteCloser
	lines        chan string
	roundTimeout time.Duration
}

// Start runs the test binary again as the child of s and waits up to five
// minutes for it to say its instances are ready. It fails tb, and stops the
// child, if the child does not start or get ready; otherwise the caller
// stops it with Stop.
func Start(tb testing.TB, s Spec) *Child {
	tb.Helper()
	c := Launch(tb, s)
	c.Ready(tb)
	return c
}

// Launch runs the test binary again as the child of s and returns at
// once, so that several children can set up their instances at the same
// time; Ready waits for each. It fails tb if the child does not start.
func Launch(tb testing.TB, s Spec) *Child {
	tb.Helper()
	c := &Child{lines: make(chan string, 4), roundTimeout: s.RoundTimeout}
	if c.roundTimeout <= 0 {
		c.roundTimeout = time.Minute
	}
	var out io.Reader
	c.cmd, c.in, out = Reexec(tb, "child", slices.Concat([]string{
		ChildEnv + "=" + s.Child, urlEnv + "=" + s.URL, countEnv + "=" + strconv.Itoa(s.Instances),
	}, s.Env)...)
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// Reexec runs the test binary again with env added to its environment and
// its standard error going to ours, and returns it with its standard input
// and output. It fails tb ("start what: …") if it does not start; the
// caller stops it.
func Reexec(tb testing.TB, what string, env ...string) (cmd *exec.Cmd, in io.WriteCloser, out io.ReadCloser) {
	tb.Helper()
	cmd = exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err = cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", what, err)
	}
	return cmd, in, out
}

// Ready waits up to five minutes for a launched child to say its
// instances are ready, and fills in HeapPerInstance and RSSPerInstance. It
// fails tb, and stops the child, if it does not get ready.
func (c *Child) Ready(tb testing.TB) {
	tb.Helper()
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	fields := c.expect(tb, "ready", 5*time.Minute)
	if _, err := fmt.Sscan(strings.Join(fields[1:], " "), &c.HeapPerInstance, &c.RSSPerInstance); err != nil || len(fields) != 3 {
		tb.Fatalf("from child: got %q, want ready HEAP RSS", strings.Join(fields, " "))
	}
	ok = true
}

// Pid is the child process's id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Arm starts a round: the child is to wait for every instance to reach
// want in the way kind names (Applied, or a kind of the benchmark's own
// Options.Conn). Arm returns once the child has armed, and fails tb if it
// has not within 10 s.
func (c *Child) Arm(tb testing.TB, kind string, want uint64) {
	tb.Helper()
	if _, err := io.WriteString(c.in, "arm "+kind+" "+strconv.FormatUint(want, 10)+"\n"); err != nil {
		tb.Fatalf("to child: %v", err)
	}
	c.expect(tb, "armed", 10*time.Second)
}

// Done waits up to Spec.RoundTimeout (a minute by default) for every
// instance to reach the round armed last, and returns each instance's
// latency from since, shortest first. It fails tb if the round has not
// ended by then.
func (c *Child) Done(tb testing.TB, since time.Time) []time.Duration {
	tb.Helper()
	fields := c.expect(tb, "done", c.roundTimeout)
	if len(fields) != 2 {
		tb.Fatalf("from child: got %.200q, want done T0,T1,…", strings.Join(fields, " "))
	}
	t0 := since.UnixNano()
	var lat []time.Duration
	for _, s := range strings.Split(fields[1], ",") {
		at, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			tb.Fatalf("from child: time %q: %v", s, err)
		}
		lat = append(lat, time.Duration(at-t0))
	}
	slices.Sort(lat)
	return lat
}

// Stop closes the child's stdin, at the end of which it stops its instances
// and exits, and waits for it. A child that has not exited 30 s later (one
// stuck in a round that does not end, say) is killed.
func (c *Child) Stop() {
	c.in.Close()
	kill := time.AfterFunc(30*time.Second, func() { _ = c.cmd.Process.Kill() })
	defer kill.Stop()
	_ = c.cmd.Wait()
}

// expect waits up to timeout for the child's next line, which must start
// with word, and returns its fields.
func (c *Child) expect(tb testing.TB, word string, timeout time.Duration) []string {
	tb.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			tb.Fatalf("child ended before %q", word)
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != word {
			tb.Fatalf("from child: got %.200q, want %q", line, word)
		}
		return fields
	case <-time.After(timeout):
		tb.Fatalf("child: no %q after %s", word, timeout)
	}
	return nil
}

// Percentile is the p-quantile (0 to 1) of latencies in any order; 0 if
// there are none.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(d))
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}
