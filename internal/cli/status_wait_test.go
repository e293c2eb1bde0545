package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// reportFleet is a NATS server with the streams and the rollout state
// serve creates, and instances reporting on checkout the way the client
// does; under natstest.BothModes' tree mode, a hub with them and a
// summarising region to whose server the instances report.
type reportFleet struct {
	t   *testing.T
	fl  *natstest.Fleet // nil: a server the test configured itself
	url string
	// login is the operator's at url (tree mode).
	login []string
	nc    *nats.Conn // the distributor's, at url
	// inst is where the instances report.
	inst *nats.Conn
	js   jetstream.JetStream
	d    *distributor.Distributor
	// heard is each instance's last version reported on checkout; summary
	// (tree mode) the last summary of checkout the hub received.
	heard   map[string]uint64
	mu      sync.Mutex
	summary distributor.Summary
}

func newReportFleet(t *testing.T, nc *nats.Conn, url string, o distributor.Options) *reportFleet {
	t.Helper()
	o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	d, err := distributor.New(t.Context(), nc, o)
	if err != nil {
		t.Fatalf("new distributor: %v", err)
	}
	t.Cleanup(d.Close)
	if _, err := rollout.New(t.Context(), nc, d, nil, rollout.Options{Logger: o.Logger}); err != nil {
		t.Fatalf("new rollout controller: %v", err)
	}
	js := natstest.JetStream(t, nc)
	// checkout exists: a wait on a config never published is wrong usage.
	if err := d.Publish(t.Context(), cuecast.Version{Config: checkoutCfg, Version: 1, Commit: "c1"}, []byte(`{"v":1}`)); err != nil {
		t.Fatalf("publish checkout v1: %v", err)
	}
	return &reportFleet{t: t, url: url, nc: nc, inst: nc, js: js, d: d, heard: map[string]uint64{}}
}

// startReportFleet starts the fleet of t's mode (natstest.BothModes), for
// instances of checkout's namespace and of namespaces. On a tree the
// instances report every fleet heartbeat, and the distributor has that
// heartbeat unless o sets one.
func startReportFleet(t *testing.T, o distributor.Options, namespaces ...string) *reportFleet {
	t.Helper()
	fo := natstest.FleetOptions{Namespaces: append([]string{checkoutCfg.Namespace()}, namespaces...), Heartbeat: o.Heartbeat,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	fl := natstest.StartFleet(t, fo)
	if fl.Tree != nil {
		o.Heartbeat = fl.Heartbeat()
	}
	f := newReportFleet(t, fl.Hub(t), fl.HubURL(), o)
	f.fl, f.login = fl, fl.Login(natsconf.OperatorUser)
	if fl.Tree != nil {
		f.inst = fl.Instance(t, checkoutCfg.Namespace())
		// The summaries as they reach the hub, to see one arrive without
		// reading the report stream, whose reads the tests count.
		sub, err := f.nc.Subscribe(cuecast.SummaryWildcard(checkoutCfg), func(m *nats.Msg) {
			if s, err := distributor.DecodeSummary(m.Subject, m.Data); err == nil {
				f.mu.Lock()
				f.summary = s
				f.mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	fl.Summarize(t)
	return f
}

// inBothModesTwoOnV1 runs test in parallel in each of natstest.BothModes'
// modes, on a fleet of that mode with web-1 and web-2 reported on v1 of
// checkout, where most wait tests begin.
func inBothModesTwoOnV1(t *testing.T, test func(t *testing.T, f *reportFleet)) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		f := startReportFleet(t, distributor.Options{})
		f.report("web-1", 1)
		f.report("web-2", 1)
		test(t, f)
	})
}

// report stores inst's report of version v of checkout, as the instance
// sends it; it returns once the hub holds it (on a tree: in its region's
// summary).
func (f *reportFleet) report(inst string, v uint64) {
	f.t.Helper()
	f.reportOn(checkoutCfg, inst, v)
	if f.fl == nil || f.fl.Tree == nil {
		return
	}
	f.heard[inst] = v
	want := map[uint64]int{}
	for _, v := range f.heard {
		want[v]++
	}
	poll.Until(f.t, fmt.Sprintf("the hub hearing %s on v%d", inst, v), poll.Patience, func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		got := map[uint64]int{}
		for _, g := range f.summary.Groups {
			got[g.Version] += g.Count()
		}
		return maps.Equal(got, want), fmt.Sprintf("instances by version %v, want %v", got, want)
	})
}

// reportOn stores inst's report of version v of cfg.
func (f *reportFleet) reportOn(cfg cuecast.ConfigPath, inst string, v uint64) {
	f.t.Helper()
	r := cuecast.Report{Instance: inst, Config: cfg, Version: v, Healthy: true, At: time.Now().UTC()}
	if f.fl != nil {
		f.fl.Report(f.t, r)
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.js.Publish(f.t.Context(), cuecast.ReportSubject(cfg, inst), b); err != nil {
		f.t.Fatalf("report %s on %s v%d: %v", inst, cfg, v, err)
	}
}

// heartbeat makes inst report v every interval until the returned stop is
// called (or the test ends); sent counts the reports sent so far.
func (f *reportFleet) heartbeat(inst string, v uint64, interval time.Duration) (stop func(), sent func() int) {
	done := make(chan struct{})
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			b, _ := json.Marshal(cuecast.Report{Instance: inst, Config: checkoutCfg, Version: v, Healthy: true, At: time.Now().UTC()})
			if f.inst.Publish(cuecast.ReportSubject(checkoutCfg, inst), b) == nil {
				n.Add(1)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	f.t.Cleanup(stop)
	return stop, func() int { return int(n.Load()) }
}

// reads counts the reads of the report stream: batched direct gets (a
// read walks the stream with one or more of them), seen on the report
// stream's direct get subject.
func (f *reportFleet) reads() func() int {
	f.t.Helper()
	return f.requests(func(m *nats.Msg) bool { return strings.Contains(string(m.Data), `"next_by_subj"`) },
		"$JS.API.DIRECT.GET."+cuecast.ReportStream)
}

// recordReads counts the reads of a rollout record the server has routed
// since it was called: a wait reads checkout's record on every look.
func (f *reportFleet) recordReads() func() int {
	f.t.Helper()
	stream := "KV_" + rollout.Bucket
	return f.requests(func(*nats.Msg) bool { return true },
		"$JS.API.DIRECT.GET."+stream+".>", "$JS.API.DIRECT.GET."+stream, "$JS.API.STREAM.MSG.GET."+stream)
}

// requests counts the requests on subjects that keep accepts, from a
// subscription that answers nothing. The server routes a copy of each
// request to it before the request is answered, and the connection's
// reader puts it on the channel before it reads the flush's answer, so
// after a flush the channel holds every request answered before. (A
// callback subscription counted in a goroutine of its own, which a flush
// does not wait for: it missed requests.)
func (f *reportFleet) requests(keep func(*nats.Msg) bool, subjects ...string) func() int {
	f.t.Helper()
	ch := make(chan *nats.Msg, 4096)
	for _, subj := range subjects {
		sub, err := f.nc.ChanSubscribe(subj, ch)
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := f.nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
	n := 0
	return func() int {
		if err := f.nc.Flush(); err != nil {
			f.t.Fatal(err)
		}
		for {
			select {
			case m := <-ch:
				if keep(m) {
					n++
				}
			default:
				return n
			}
		}
	}
}

type waitResult struct {
	code        int
	out, errOut string
}

// startWait runs `status --wait` in the background.
func (f *reportFleet) startWait(args ...string) <-chan waitResult {
	res := make(chan waitResult, 1)
	go func() {
		code, out, errOut := run(f.t.Context(), append(append([]string{"status", "--nats", f.url}, f.login...), args...)...)
		res <- waitResult{code, out.String(), errOut.String()}
	}()
	return res
}

// startWaitRead starts `status --wait` and returns once the wait has read
// the report stream: sent a batched direct get, and then none for quietFor.
// extra then counts the batched direct gets on the report stream since.
//
// quietFor is well above the moment a read spends between two of its
// batches and well below the 250 ms between the looks of a wait that reads
// the stream on every look, whose later reads extra then counts.
func (f *reportFleet) startWaitRead(args ...string) (res <-chan waitResult, extra func() int) {
	f.t.Helper()
	const quietFor = 100 * time.Millisecond
	reads := f.reads()
	before := reads()
	res = f.startWait(args...)
	poll.Until(f.t, "the wait's read of the report stream", 10*time.Second, func() (bool, string) {
		c := reads() - before
		return c > 0, fmt.Sprintf("%d batched direct gets", c)
	})
	last, since := reads(), time.Now()
	poll.Until(f.t, "the wait's read done", 10*time.Second, func() (bool, string) {
		if n := reads(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quietFor, "a batched direct get less than " + quietFor.String() + " ago"
	})
	base := reads()
	return res, func() int { return reads() - base }
}

// noExtraReads fails the test if extra (from startWaitRead) counts reads of
// the report stream beyond the wait's first, during what is described.
func (f *reportFleet) noExtraReads(extra func() int, during string) {
	f.t.Helper()
	if n := extra(); n != 0 {
		f.t.Errorf("reads of %s during %s beyond its first: got %d batched direct gets, want 0", cuecast.ReportStream, during, n)
	}
}

// stillWaiting fails the test if the wait of res has ended (when, what
// should have held it).
func (f *reportFleet) stillWaiting(res <-chan waitResult, when string) {
	f.t.Helper()
	select {
	case r := <-res:
		f.t.Fatalf("the wait ended %s: exit %d, stdout %q stderr %q", when, r.code, r.out, r.errOut)
	default:
	}
}

func (f *reportFleet) result(res <-chan waitResult) waitResult {
	f.t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(30 * time.Second):
		f.t.Fatalf("status --wait still running after 30s")
		return waitResult{}
	}
}

// TestStatusWaitReadsReportsOnce: a wait that times out after several looks
// has read the report stream once, by batched direct get, the initial
// read; the stragglers are listed as before.
func TestStatusWaitReadsReportsOnce(t *testing.T) {
	inBothModesTwoOnV1(t, func(t *testing.T, f *reportFleet) {
		res, extra := f.startWaitRead("--wait", "payments/checkout@2", "--timeout", "1500ms")
		r := f.result(res)
		if r.code != cli.ExitHalted {
			t.Fatalf("exit %d, want %d; stdout %q stderr %q", r.code, cli.ExitHalted, r.out, r.errOut)
		}
		want := "payments/checkout@2: timed out after 1.5s: 0 of 2 live instances report it\n" +
			"  straggler web-1 on v1\n" +
			"  straggler web-2 on v1\n"
		if r.errOut != want {
			t.Errorf("stderr: got %q, want %q", r.errOut, want)
		}
		f.noExtraReads(extra, "a 1.5s wait")
	})
}

// TestStatusWaitSeesInstancesMoveAfterItStarted: instances that reach the
// version only after the wait's one read of the stream end it, from their
// reports as they arrive.
func TestStatusWaitSeesInstancesMoveAfterItStarted(t *testing.T) {
	inBothModesTwoOnV1(t, func(t *testing.T, f *reportFleet) {
		res, extra := f.startWaitRead("--wait", "payments/checkout@2", "--timeout", "20s")
		f.stillWaiting(res, "before the instances moved")
		f.report("web-1", 2)
		f.report("web-2", 2)
		r := f.result(res)
		if r.code != 0 || !strings.HasPrefix(r.out, "payments/checkout@2: all 2 live instances report it (") {
			t.Fatalf("exit %d, stdout %q stderr %q; want 0 and all 2 instances", r.code, r.out, r.errOut)
		}
		f.noExtraReads(extra, "the wait")
	})
}

// TestStatusWaitExpiresSilentInstances: an instance that stops reporting
// stops counting four heartbeats after its last report, as in the report
// stream, whose max age (here 4 × 100ms, set by serve's distributor) the
// wait follows rather than its own default heartbeat.
func TestStatusWaitExpiresSilentInstances(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		f := startReportFleet(t, distributor.Options{Heartbeat: 100 * time.Millisecond})
		f.heartbeat("web-1", 2, 50*time.Millisecond)
		stopWeb2, web2Sent := f.heartbeat("web-2", 1, 50*time.Millisecond)
		res, _ := f.startWaitRead("--wait", "payments/checkout@2", "--timeout", "20s")
		// Still reporting v1, web-2 holds the wait for longer than one of its
		// reports lives: counted in steps, web-2's reports (20 × 50ms, 2.5
		// report lives) and the wait's looks, not in a guessed sleep, so a slow
		// machine slows what is counted too.
		looks := f.recordReads()
		from := web2Sent()
		poll.Until(t, "web-2 reporting v1 through 2.5 report lives", poll.Patience, func() (bool, string) {
			n, l := web2Sent()-from, looks()
			return n >= 20 && l >= 4, fmt.Sprintf("%d reports sent, %d looks by the wait", n, l)
		})
		f.stillWaiting(res, "while web-2 reported v1")
		stopWeb2()
		// Done before --timeout 20s only if the wait expires web-2's last
		// report by the stream's life (4 × 100ms); by its own default (4 ×
		// the 15 s heartbeat, 60 s) it times out and exits 1.
		r := f.result(res)
		if r.code != 0 || !strings.HasPrefix(r.out, "payments/checkout@2: all 1 live instances report it (") {
			t.Fatalf("exit %d, stdout %q stderr %q; want 0 and web-1 the only live instance", r.code, r.out, r.errOut)
		}
	})
}

// TestStatusWaitWithoutReportPermission: under a NATS configuration that
// does not let the user subscribe to reports (generated before operators
// could), the wait reads the report stream on every look, and says so.
func TestStatusWaitWithoutReportPermission(t *testing.T) {
	dir := t.TempDir()
	s := natstest.StartConfFile(t, dir, "nats.conf", fmt.Sprintf(`listen: "127.0.0.1:-1"
jetstream { store_dir: %q }
authorization {
  users: [
    {user: admin, password: admin}
    {user: operator, password: operator, permissions: {publish: ">", subscribe: ["_INBOX.>", "ccr.>"]}}
  ]
}
`, filepath.Join(dir, "store")))
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f := newReportFleet(t, nc, s.ClientURL(), distributor.Options{})
	f.report("web-1", 1)
	r := f.result(f.startWait("--user", "operator", "--password", "operator", "--wait", "payments/checkout@1", "--timeout", "10s"))
	if r.code != 0 || !strings.HasPrefix(r.out, "payments/checkout@1: all 1 live instances report it (") {
		t.Fatalf("exit %d, stdout %q stderr %q; want 0", r.code, r.out, r.errOut)
	}
	if !strings.Contains(r.errOut, "cannot follow reports live") {
		t.Errorf("stderr: got %q, want a warning that reports are read on every look", r.errOut)
	}
}

// TestStatusWaitShowsProgressOnATerminal: on a terminal, a wait says how far
// it is as instances move (it printed nothing for up to --timeout, issue 17
// item 8); with stderr not a terminal it stays quiet until the outcome
// (TestStatusWaitReadsReportsOnce).
func TestStatusWaitShowsProgressOnATerminal(t *testing.T) {
	inBothModesTwoOnV1(t, func(t *testing.T, f *reportFleet) {
		stdout, stderr := &syncBuffer{}, &syncBuffer{}
		io := &iostreams.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
		io.SetTTY(false, true)
		res := make(chan int, 1)
		go func() {
			res <- cli.Main(t.Context(), append(append([]string{"status", "--nats", f.url}, f.login...), "--wait", "payments/checkout@2", "--timeout", "20s"), io, func(string) string { return "" })
		}()
		poll.Until(t, "progress with none on v2", 10*time.Second, func() (bool, string) {
			s := stderr.String()
			return strings.Contains(s, "payments/checkout@2: waiting: 0 of 2 live instances report it; behind: web-1 on v1, web-2 on v1"), s
		})
		f.report("web-1", 2)
		poll.Until(t, "progress with web-1 on v2", 10*time.Second, func() (bool, string) {
			s := stderr.String()
			return strings.Contains(s, "payments/checkout@2: waiting: 1 of 2 live instances report it; behind: web-2 on v1"), s
		})
		f.report("web-2", 2)
		select {
		case code := <-res:
			if code != 0 || !strings.HasPrefix(stdout.String(), "payments/checkout@2: all 2 live instances report it (") {
				t.Fatalf("exit %d, stdout %q stderr %q; want 0 and all 2 instances", code, stdout, stderr)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("status --wait still running after 30s")
		}
	})
}

// TestStatusWaitUnknownConfig: a wait on a config never published is wrong
// usage at once (exit 2, as `status` of it), not a wait of the whole
// timeout ending in exit 4: a typo in a deploy step.
func TestStatusWaitUnknownConfig(t *testing.T) {
	f := startReportFleet(t, distributor.Options{})
	f.report("web-1", 1)
	r := f.result(f.startWait("--wait", "payments/chekout@1", "--timeout", "10m"))
	if r.code != cli.ExitUsage || !strings.Contains(r.errOut, "payments/chekout") || !strings.Contains(r.errOut, "hint: ") {
		t.Fatalf("exit %d, stdout %q stderr %q; want 2 naming payments/chekout with a hint", r.code, r.out, r.errOut)
	}
	code, _, _ := run(t.Context(), "status", "--nats", f.url, "payments/chekout")
	if code != r.code {
		t.Errorf("status payments/chekout exits %d, status --wait payments/chekout@1 %d: want the same", code, r.code)
	}
	// Every way of asking the status of a config never published says so,
	// with log's hint where to find the configs that are; --instances listed
	// none and exited 0.
	for _, args := range [][]string{{"nope/nope"}, {"nope/nope", "--instances"}, {"payments/checkout", "nope/nope", "--instances", "-o", "json"}} {
		code, out, errOut := run(t.Context(), append([]string{"status", "--nats", f.url}, args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut.String(), "nope/nope") || !strings.Contains(errOut.String(), "hint: see `cuecast status` for the configs published") {
			t.Errorf("status %v: exit %d, stdout %q, stderr %q; want %d naming nope/nope, with log's hint", args, code, out, errOut, cli.ExitUsage)
		}
	}
}

// TestStatusWaitJSON: --output json makes the wait's outcome one JSON
// document on stdout, whether it succeeds or times out.
func TestStatusWaitJSON(t *testing.T) {
	inBothModesTwoOnV1(t, func(t *testing.T, f *reportFleet) {
		for _, tc := range []struct {
			args    []string
			code    int
			outcome string
			on      int
			behind  []string
		}{
			{[]string{"--wait", "payments/checkout@1", "-o", "json"}, 0, "applied", 2, nil},
			{[]string{"--wait", "payments/checkout@2", "--timeout", "300ms", "--output", "json"}, cli.ExitHalted, "timed_out", 0, []string{"web-1", "web-2"}},
		} {
			r := f.result(f.startWait(tc.args...))
			var got struct {
				Config    string `json:"config"`
				Version   uint64 `json:"version"`
				Outcome   string `json:"outcome"`
				Instances int    `json:"instances"`
				OnVersion int    `json:"on_version"`
				Behind    []struct {
					Instance string `json:"instance"`
				} `json:"behind"`
			}
			if err := json.Unmarshal([]byte(r.out), &got); err != nil {
				t.Fatalf("%v: stdout %q is not JSON: %v (stderr %q)", tc.args, r.out, err, r.errOut)
			}
			var behind []string
			for _, b := range got.Behind {
				behind = append(behind, b.Instance)
			}
			if r.code != tc.code || got.Config != "payments/checkout" || got.Outcome != tc.outcome || got.Instances != 2 ||
				got.OnVersion != tc.on || strings.Join(behind, ",") != strings.Join(tc.behind, ",") {
				t.Errorf("%v: exit %d, %+v; want exit %d, outcome %s, 2 instances, %d on the version, behind %v", tc.args, r.code, got, tc.code, tc.outcome, tc.on, tc.behind)
			}
		}
	})
}

// TestStatusWaitCountsWhatTheControllerWaitsFor: a wait returned 0 ("all 1
// live instances report it") while the rollout still waited for a second
// instance: it counted only the instances whose reports it saw. The rule
// (docs/ROLLOUT.md, "Waiting for a version"): the wait also needs the
// controller to be done with the current stage of the version's rollout
// (holding or complete), so the instances the controller knows are live
// count too. Here web-2 is one: waited for by the stage, its report
// expired before the wait looked.
func TestStatusWaitCountsWhatTheControllerWaitsFor(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		f := startReportFleet(t, distributor.Options{Heartbeat: 100 * time.Millisecond})
		if err := f.d.Publish(t.Context(), cuecast.Version{Config: checkoutCfg, Version: 2, Commit: "c2"}, []byte(`{"v":2}`)); err != nil {
			t.Fatal(err)
		}
		latest, err := f.d.Latest(t.Context(), checkoutCfg)
		if err != nil {
			t.Fatal(err)
		}
		stopWeb1, _ := f.heartbeat("web-1", 1, 50*time.Millisecond)
		stopWeb2, _ := f.heartbeat("web-2", 1, 50*time.Millisecond)
		ctl, err := rollout.New(t.Context(), f.nc, f.d, rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}}},
			rollout.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Interval: 50 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "both instances live", poll.Patience, func() (bool, string) {
			reps, err := f.d.Reports(t.Context(), checkoutCfg)
			return distributor.Weigh(reps) == 2, fmt.Sprintf("%d instances (%v)", distributor.Weigh(reps), err)
		})
		if err := ctl.Deploy(t.Context(), latest); err != nil {
			t.Fatal(err)
		}
		rec, err := ctl.Record(t.Context(), checkoutCfg)
		if err != nil || rec.Current == nil || rec.Current.State != rollout.StateWaiting || len(rec.Current.Unconfirmed) != 2 {
			t.Fatalf("after deploy: %+v (%v), want v2 waiting for web-1 and web-2", rec.Current, err)
		}
		// web-1 applies v2; web-2 falls silent until its report expires.
		stopWeb1()
		f.heartbeat("web-1", 2, 50*time.Millisecond)
		stopWeb2()
		poll.Until(t, "web-2's report expired", poll.Patience, func() (bool, string) {
			reps, err := f.d.Reports(t.Context(), checkoutCfg)
			return len(reps) == 1 && reps[0].Weight() == 1 && reps[0].Instance == "web-1" && reps[0].Version == 2, fmt.Sprintf("%+v (%v)", reps, err)
		})
		r := f.result(f.startWait("--wait", "payments/checkout@2", "--timeout", "300ms"))
		if r.code != cli.ExitHalted || !strings.Contains(r.errOut, "the rollout of v2 is still waiting in its stage all") || !strings.Contains(r.errOut, "web-2") {
			t.Fatalf("with the stage waiting for web-2: exit %d, stdout %q stderr %q; want 4 naming the stage and web-2", r.code, r.out, r.errOut)
		}
		// web-2 is back on v2 and the controller runs: the stage is done, and
		// so is the wait.
		f.heartbeat("web-2", 2, 50*time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan struct{})
		go func() { defer close(ran); ctl.Run(ctx) }()
		defer func() { cancel(); <-ran }()
		r = f.result(f.startWait("--wait", "payments/checkout@2", "--timeout", "20s"))
		if r.code != 0 || !strings.HasPrefix(r.out, "payments/checkout@2: all 2 live instances report it") {
			t.Fatalf("exit %d, stdout %q stderr %q; want 0 with both instances once the stage is done", r.code, r.out, r.errOut)
		}
	})
}
