package scalesim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// withFloor generates spec's configuration for the namespace, as the tree
// does, and returns it before and after floorConf.
func withFloor(t *testing.T, spec natsconf.Spec) (conf, got string) {
	t.Helper()
	spec.StoreDir, spec.Namespaces = t.TempDir(), []string{Namespace}
	spec.Passwords = map[string]string{"distributor": "d", "leaf": "l", "operator": "o", "sys": "s", "svc-payments": "p"}
	conf, err := natsconf.Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = floorConf(conf); err != nil {
		t.Fatal(err)
	}
	return conf, got
}

// TestFloorConf: the floor's subject is exported by CUECAST to the
// namespace's account and imported there, beside ccr.<ns>.>, and a
// configuration without those lines is refused rather than run without
// a floor.
func TestFloorConf(t *testing.T) {
	conf, got := withFloor(t, natsconf.Spec{Level: natsconf.Node, Name: "n", Listen: "127.0.0.1:4222",
		Upstreams: []string{"127.0.0.1:7422"}})
	for _, want := range []string{
		`{stream: "_INBOX_payments.floor", accounts: ["SVC_payments"]}`,
		`{stream: {account: "CUECAST", subject: "_INBOX_payments.floor"}}`,
	} {
		if strings.Count(got, want) != 1 {
			t.Errorf("want %s once in\n%s", want, got)
		}
	}
	if len(got) != len(conf)+len("\n{stream: \"_INBOX_payments.floor\", accounts: [\"SVC_payments\"]}")+len("\n{stream: {account: \"CUECAST\", subject: \"_INBOX_payments.floor\"}}") {
		t.Errorf("floorConf changed more than the two lines")
	}
	if _, err := floorConf("port: 4222\n"); err == nil {
		t.Error("floorConf of a configuration without the namespace's imports: no error")
	}
}

// TestFloorConfHub: at the hub the floor also goes to the fan-out account,
// which the links from below are bound to; without it no node gets the
// floor's message (TestScaleSmall timed out so once the links moved there).
func TestFloorConfHub(t *testing.T) {
	_, got := withFloor(t, natsconf.Spec{Level: natsconf.Hub, Name: "hub", Listen: "127.0.0.1:4222", LeafListen: "127.0.0.1:7422"})
	for _, want := range []string{
		`{stream: "_INBOX_payments.floor", accounts: ["SVC_payments"]}`,
		`{stream: {account: "CUECAST", subject: "_INBOX_payments.floor"}}`,
		`{stream: "_INBOX_payments.floor", accounts: ["FANOUT"]}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %s in\n%s", want, got)
		}
	}
	if n := strings.Count(got, `{stream: {account: "CUECAST", subject: "_INBOX_payments.floor"}}`); n != 2 {
		t.Errorf("the floor imported from CUECAST %d times, want 2 (SVC_payments and FANOUT)", n)
	}
}

// TestProcUsage reads this process's own CPU time and memory (Linux's
// /proc, which the scale runs need).
func TestProcUsage(t *testing.T) {
	u, err := ProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS {
		t.Errorf("RSS %d, HWM %d: want 0 < RSS <= HWM", u.RSS, u.HWM)
	}
	if _, err := ProcUsage(-1); err == nil {
		t.Error("ProcUsage(-1): no error")
	}
	if f := strings.Fields(LoadAverage()); len(f) != 3 {
		t.Errorf("LoadAverage() = %q, want three numbers", LoadAverage())
	}
}

// TestParseIntervals: the instances' intervals travel to the children as
// three durations; a 0 keeps the client's default, and anything else
// malformed is refused rather than run with the defaults unnoticed.
func TestParseIntervals(t *testing.T) {
	for _, tc := range []struct {
		in           string
		client, dial int
		wantErr      bool
	}{
		{in: "", client: 0, dial: 0},
		{in: "0s,0s,0s", client: 0, dial: 0},
		{in: "1m0s,5m0s,1m0s", client: 2, dial: 1},
		{in: "1m0s,0s,0s", client: 1, dial: 0},
		{in: "0s,0s,30s", client: 0, dial: 1},
		{in: "1m", wantErr: true},
		{in: "1m,x,0s", wantErr: true},
		{in: "-1s,0s,0s", wantErr: true},
	} {
		co, no, err := parseIntervals(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseIntervals(%q): error %v, want error %t", tc.in, err, tc.wantErr)
			continue
		}
		if len(co) != tc.client || len(no) != tc.dial {
			t.Errorf("parseIntervals(%q): %d client and %d dial options, want %d and %d", tc.in, len(co), len(no), tc.client, tc.dial)
		}
	}
	tr := &Tree{opts: Options{Heartbeat: time.Minute, Ping: 30 * time.Second}}
	if got, want := tr.intervals(), "1m0s,0s,30s"; got != want {
		t.Errorf("intervals() = %q, want %q", got, want)
	}
}

// TestMeanCost: the mean of rest windows is what one window as long as
// them all would have measured, scaled back to one; the resident set is
// the last window's, since it is a level, not a count.
func TestMeanCost(t *testing.T) {
	hb := 15 * time.Second
	for _, tc := range []struct {
		name    string
		windows []HubCost
		want    HubCost
	}{
		{"none", nil, HubCost{}},
		{"one", []HubCost{{Window: hb, InMsgs: 4, InBytes: 3500, CPU: 60 * time.Millisecond, RSS: 7, GCs: 0.25}},
			HubCost{Window: hb, InMsgs: 4, InBytes: 3500, CPU: 60 * time.Millisecond, RSS: 7, GCs: 0.25}},
		{"three", []HubCost{
			{Window: hb, InMsgs: 4, InBytes: 3000, CPU: 60 * time.Millisecond, GCCPU: time.Millisecond, RSS: 9, GCs: 0.25, RegionCPU: time.Second, SummarizerCPU: 300 * time.Millisecond},
			{Window: hb, InMsgs: 5, InBytes: 4000, CPU: 72 * time.Millisecond, RSS: 8, RegionCPU: 2 * time.Second},
			{Window: hb, InMsgs: 3, InBytes: 3500, CPU: 48 * time.Millisecond, GCCPU: 2 * time.Millisecond, RSS: 7, GCs: 0.5, SummarizerCPU: 600 * time.Millisecond},
		}, HubCost{Window: hb, InMsgs: 4, InBytes: 3500, CPU: 60 * time.Millisecond, GCCPU: time.Millisecond, RSS: 7, GCs: 0.25,
			RegionCPU: time.Second, SummarizerCPU: 300 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MeanCost(tc.windows); got != tc.want {
				t.Errorf("MeanCost:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestRestTrend: the line through a mode's rest windows, read at its
// smallest and largest size, with the standard error of the difference;
// no line from fewer than three windows or from one size, and the other
// mode's windows left out.
func TestRestTrend(t *testing.T) {
	row := func(mode string, instances int, cpuMs ...float64) ModeRow {
		r := ModeRow{Mode: mode, Instances: instances}
		for _, c := range cpuMs {
			r.RestWindows = append(r.RestWindows, HubCost{CPU: time.Duration(c * 1e6)})
		}
		return r
	}
	for _, tc := range []struct {
		name string
		rows []ModeRow
		want Trend
		ok   bool
	}{
		{"flat with scatter", []ModeRow{row("summary", 1000, 20, 22), row("summary", 100000, 21, 21)},
			// residuals 1, 1, 0, 0 (ms): sqrt(2/2 / (4 × 49,500²)) × 99,000 = 1 ms
			Trend{Windows: 4, Low: 1000, High: 100000, AtLow: 21 * time.Millisecond, AtHigh: 21 * time.Millisecond, ChangeError: time.Millisecond}, true},
		{"a straight line", []ModeRow{row("summary", 1000, 20), row("summary", 50500, 25), row("summary", 100000, 30)},
			Trend{Windows: 3, Low: 1000, High: 100000, AtLow: 20 * time.Millisecond, AtHigh: 30 * time.Millisecond}, true},
		{"the other mode left out", []ModeRow{row("per-instance", 1000, 150, 160), row("summary", 1000, 20, 22), row("per-instance", 10000, 600), row("summary", 100000, 21, 21)},
			Trend{Windows: 4, Low: 1000, High: 100000, AtLow: 21 * time.Millisecond, AtHigh: 21 * time.Millisecond, ChangeError: time.Millisecond}, true},
		{"no windows of the mode", []ModeRow{row("per-instance", 1000, 150, 160), row("per-instance", 10000, 600)}, Trend{}, false},
		{"two windows", []ModeRow{row("summary", 1000, 20), row("summary", 10000, 25)}, Trend{}, false},
		{"one size", []ModeRow{row("summary", 1000, 20, 21, 22)}, Trend{}, false},
		// a run at one size alone (twelve windows at 1,000) once logged a
		// line of +0.0 ± 0.0 ms: there is no spread of sizes to fit against
		{"one size, twelve windows", []ModeRow{row("summary", 1000, 18, 28, 23, 25, 22, 19, 19, 16, 20, 20, 24, 24)}, Trend{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RestTrend(tc.rows, "summary")
			round := func(tr Trend) Trend {
				tr.AtLow, tr.AtHigh, tr.ChangeError = tr.AtLow.Round(time.Microsecond), tr.AtHigh.Round(time.Microsecond), tr.ChangeError.Round(time.Microsecond)
				return tr
			}
			if ok != tc.ok || round(got) != tc.want {
				t.Errorf("RestTrend = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestReportsLeaveInStateOrder: the heartbeat and apply send reports of the
// same instances at once, and a summarizer keeps the last message on an
// instance's subject, so an instance's reports must leave in the order of
// its state. Before, send read the state and published it after letting go
// of the lock: a heartbeat that had read v1 could publish after apply's
// report on v2, and the instance then read as on v1 until its next
// heartbeat (on D, changes at 50,000 and 100,000 waited a 5 s heartbeat
// for one or two instances). Here the heartbeat's publish of v1 waits for
// apply's report on v2 (up to a bound it reaches only when apply cannot
// run meanwhile); the last report published must be on v2.
func TestReportsLeaveInStateOrder(t *testing.T) {
	var mu sync.Mutex
	var sent []uint64 // instance 1's reports' versions, in the order published
	inBeat, applied := make(chan struct{}), make(chan struct{})
	g := &reporters{hb: time.Second, names: []string{"r-0", "r-1"}, buckets: []int{0, 0},
		versions: []uint64{0, 1}, sums: []string{"", "sum1"}, applied: []time.Time{{}, time.Now()}}
	g.publish = func(subject string, data []byte) error {
		var r cuecast.Report
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		if r.Version == 1 {
			close(inBeat)
			select {
			case <-applied:
			case <-time.After(500 * time.Millisecond):
			}
		}
		mu.Lock()
		sent = append(sent, r.Version)
		mu.Unlock()
		if r.Version == 2 {
			close(applied)
		}
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { g.send(1) }) // the heartbeat's report, on v1
	<-inBeat
	wg.Go(func() { g.set(1, 2, "sum2", time.Now()) }) // apply moves instance 1 to v2 and reports it
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 || sent[len(sent)-1] != 2 {
		t.Errorf("instance 1's reports left on versions %v: want the one on v2 last", sent)
	}
}

// TestStartBusy: the child StartBusy runs, which TestScaleModesSoak's
// measuring runs keep beside the fleet, spins a thread per core at nice
// 19, so that it takes only what nothing else wants, and Stop ends it.
func TestStartBusy(t *testing.T) {
	t.Parallel()
	b := StartBusy(t)
	pid := b.Pid()
	poll.Until(t, "a thread per core at nice 19", poll.Patience, func() (bool, string) {
		niced, err := nice19Threads(pid)
		if err != nil {
			return false, err.Error()
		}
		return niced >= runtime.NumCPU(), fmt.Sprintf("%d of %d cores", niced, runtime.NumCPU())
	})
	b.Stop()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("busy child %d after Stop: signal 0 gave %v, want no such process", pid, err)
	}
}

// nice19Threads counts the threads of pid at nice 19 (/proc/PID/task/*/stat,
// whose 19th field is the nice value).
func nice19Threads(pid int) (int, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		if f, ok := statFields(b); ok && len(f) > 16 && f[16] == "19" {
			n++
		}
	}
	return n, nil
}
