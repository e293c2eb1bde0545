package scalesim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/simfleet"
)

// The two report modes side by side (TestScaleModesSoak): a hub, regional
// leaf servers and, in summary mode, a summarizer per region, each in its
// own process; the simulated instances are report generators, one child
// process per region and growth step, connected to the region's server as
// the namespace's services. What is real: the generated configurations,
// the servers and their links, the distributor at the top, the
// summarizers (distributor.Summarizer, as `cuecast summarize` runs it),
// each generator's first instance (a client.Watcher on the region's
// mirror, verifying signatures and reporting as every instance does), and
// the hub's view that `status --wait` reads (distributor.WatchReports).
// What is simulated: the generator's other instances, which send the
// reports a client sends (the same JSON, one per heartbeat spread over it,
// and one after each apply, delayed as client.Watcher delays it) over the
// generator's one connection when its real instance applies a version.

// The summarizers' and report generators' roles and environment.
const (
	summarizerRole = "summarizer"
	reportersRole  = "reporters"
	urlEnv         = "CUECAST_SCALESIM_URL"
	userEnv        = "CUECAST_SCALESIM_USER"
	passwordEnv    = "CUECAST_SCALESIM_PASSWORD"
	regionEnv      = "CUECAST_SCALESIM_REGION"
	heartbeatEnv   = "CUECAST_SCALESIM_HEARTBEAT"
	countEnv       = "CUECAST_SCALESIM_COUNT"
	prefixEnv      = "CUECAST_SCALESIM_PREFIX"
)

// summarizerLogin is the user a region's summarizer logs in to the
// region's server as, and its password: the one `cuecast nats-config`
// gives it, summarizer-<region>, which may speak only for its region
// (docs/SCALING.md). The only place the harness says so.
func summarizerLogin(passwords map[string]string, region string) (user, password string) {
	u := natsconf.SummarizerUser(region)
	return u, passwords[u]
}

// heartbeat is the instances' report interval, and the distributor's and
// summarizers'.
func (t *Tree) heartbeat() time.Duration {
	if t.opts.Heartbeat > 0 {
		return t.opts.Heartbeat
	}
	return 15 * time.Second
}

// startSummarizers starts a summarizer for each region, each in its own
// process, logged in to the region's server.
func (t *Tree) startSummarizers(tb testing.TB) {
	tb.Helper()
	for _, r := range t.Regions {
		user, password := summarizerLogin(t.passwords, r.Name)
		s := startChild(tb, "summarizer-"+r.Name, roleEnv+"="+summarizerRole, urlEnv+"="+r.URL, userEnv+"="+user, passwordEnv+"="+password,
			regionEnv+"="+r.Name, heartbeatEnv+"="+t.heartbeat().String())
		s.line(tb, "ready")
		t.Summarizers = append(t.Summarizers, s)
	}
}

// summarizerMain runs a region's summarizer until its stdin ends.
func summarizerMain(in io.Reader, out io.Writer) int {
	hb, err := time.ParseDuration(os.Getenv(heartbeatEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalesim summarizer:", err)
		return 1
	}
	nc, err := nats.Connect(os.Getenv(urlEnv), nats.UserInfo(os.Getenv(userEnv), os.Getenv(passwordEnv)), nats.Timeout(10*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalesim summarizer:", err)
		return 1
	}
	defer nc.Close()
	s, err := distributor.NewSummarizer(nc, distributor.SummarizerOptions{Region: os.Getenv(regionEnv), Heartbeat: hb})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalesim summarizer:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	fmt.Fprintln(out, "ready")
	_, _ = io.Copy(io.Discard, in)
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "scalesim summarizer:", err)
		return 1
	}
	return 0
}

// GrowReporters starts one more report generator per region, each with
// perRegion instances, and waits until the hub's view (status --wait's)
// has every instance live on the current version.
func (t *Tree) GrowReporters(tb testing.TB, perRegion int) {
	tb.Helper()
	if len(t.Reporters) == 0 {
		t.Reporters, t.ReporterSizes = make([][]*Server, len(t.Regions)), make([][]int, len(t.Regions))
	}
	svc := natsconf.ServiceUser(Namespace)
	var started []*Server
	for i, r := range t.Regions {
		u := strings.Replace(r.URL, "nats://", "nats://"+svc+":"+t.passwords[svc]+"@", 1)
		prefix := fmt.Sprintf("r%dg%d", i+1, len(t.Reporters[i])+1)
		g := startChild(tb, "reporters-"+prefix, roleEnv+"="+reportersRole, urlEnv+"="+u, prefixEnv+"="+prefix,
			countEnv+"="+strconv.Itoa(perRegion), heartbeatEnv+"="+t.heartbeat().String(), keyEnv+"="+t.pubKey)
		t.Reporters[i] = append(t.Reporters[i], g)
		t.ReporterSizes[i] = append(t.ReporterSizes[i], perRegion)
		started = append(started, g)
	}
	for _, g := range started {
		g.line(tb, "ready")
	}
	t.awaitApplied(tb, t.ver, time.Now(), 2*time.Minute+time.Duration(t.ReporterInstances())*time.Millisecond)
}

// ReporterInstances is how many instances the report generators run.
func (t *Tree) ReporterInstances() int { return total(t.ReporterSizes) }

// awaitApplied waits up to timeout until the hub's view of the live
// reports has every reporter instance live on version v, and returns how
// long that took from t0. It reads the view as `status --wait` does
// (distributor.WatchReports, Live, counted by weight: a summary's report
// stands for its group), every 20 ms (100 ms past 10,000 instances, where
// each look copies every instance's report).
func (t *Tree) awaitApplied(tb testing.TB, v uint64, t0 time.Time, timeout time.Duration) time.Duration {
	tb.Helper()
	if t.reports == nil {
		var err error
		if t.reports, err = t.d.WatchReports(context.Background(), Config); err != nil {
			tb.Fatalf("watch reports: %v", err)
		}
		tb.Cleanup(t.reports.Stop)
	}
	want := t.ReporterInstances()
	every := 20 * time.Millisecond
	if want > 10_000 {
		every = 100 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	slow := time.Now().Add(5 * time.Second) // then the view is logged, once a second
	for {
		live := t.reports.Live()
		on := 0
		for _, r := range live {
			if r.Version == v && !distributor.Unheard(r) {
				on += r.Weight()
			}
		}
		if n := distributor.Weigh(live); n == want && on == want {
			return time.Since(t0)
		} else if time.Now().After(deadline) {
			tb.Fatalf("after %s: %d instances live at the hub, %d on v%d; want %d on it", timeout, n, on, v, want)
		} else if time.Now().After(slow) {
			tb.Logf("%s after the change: %d instances live at the hub, %d on v%d; want %d on it", time.Since(t0).Round(time.Millisecond), n, on, v, want)
			slow = time.Now().Add(time.Second)
		}
		time.Sleep(every)
	}
}

// reporters is a report generator's state: its instances' names, buckets,
// and what each has applied.
type reporters struct {
	// publish sends a report: the generator's connection's Publish.
	publish func(subject string, data []byte) error
	hb      time.Duration
	names   []string
	buckets []int

	mu       sync.Mutex
	versions []uint64 // 0: nothing applied yet
	sums     []string
	applied  []time.Time
}

// reportersMain runs a report generator until its stdin ends: instance 0
// a real client watching Config on the region's mirror, instances 1…n-1
// sending the reports a client would, each when instance 0 has applied a
// version (client.Watcher's delay after it) and once a heartbeat. It says
// "ready" once instance 0 has applied a version.
func reportersMain(in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "scalesim reporters:", err)
		return 1
	}
	n, err := strconv.Atoi(os.Getenv(countEnv))
	if err != nil || n <= 0 {
		return fail(fmt.Errorf("%s=%q: want a positive count", countEnv, os.Getenv(countEnv)))
	}
	hb, err := time.ParseDuration(os.Getenv(heartbeatEnv))
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(os.Getenv(urlEnv), slices.Concat(client.ConnectOptions(),
		[]nats.Option{nats.CustomInboxPrefix(natsconf.InboxPrefix(Namespace)), nats.Timeout(30 * time.Second)})...)
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	g := &reporters{publish: nc.Publish, hb: hb, versions: make([]uint64, n), sums: make([]string, n), applied: make([]time.Time, n)}
	for i := range n {
		name := fmt.Sprintf("%s-%06d", os.Getenv(prefixEnv), i)
		g.names = append(g.names, name)
		g.buckets = append(g.buckets, cuecast.Cohort(Namespace, name))
	}
	kick := make(chan struct{}, 1)
	cl, err := client.New(nc, client.WithInstance(g.names[0]), client.WithTrustedKeys(os.Getenv(keyEnv)), client.WithHeartbeat(hb),
		client.WithStream("", natsconf.MirrorStream(Namespace)), client.WithEvents(func(e client.Event) {
			if e.Kind == client.EventApplied {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := cl.Watch(ctx, Config)
	if err != nil {
		return fail(err)
	}
	defer w.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { g.follow(ctx, w, kick) })
	wg.Go(func() { g.beat(ctx) })
	for w.Current().Version == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintln(out, "ready")
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// follow applies, in instances 1…n-1, each version instance 0 applies.
func (g *reporters) follow(ctx context.Context, w *client.Watcher, kick <-chan struct{}) {
	var have uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		if cur := w.Current(); cur.Version > have {
			have = cur.Version
			// On the log, so that a slow change can be told apart: a
			// region whose real instance applied late, or one whose
			// reports reached the hub late.
			fmt.Fprintf(os.Stderr, "scalesim reporters %s: instance 0 applied v%d at %s\n", g.names[0], cur.Version, time.Now().Format("15:04:05.000"))
			g.apply(ctx, cur.Version, cur.Checksum, time.Now())
		}
	}
}

// apply sends each instance's report on v, applied at at, after the delay
// client.Watcher's reportSoon draws: from a half to one and a half of a
// fifteenth of the heartbeat, at most a second.
func (g *reporters) apply(ctx context.Context, v uint64, sum string, at time.Time) {
	spread := min(g.hb/15, time.Second)
	type due struct {
		at time.Time
		i  int
	}
	ds := make([]due, 0, len(g.names)-1)
	for i := 1; i < len(g.names); i++ {
		ds = append(ds, due{at.Add(spread/2 + rand.N(spread+1) + 1), i})
	}
	slices.SortFunc(ds, func(a, b due) int { return a.at.Compare(b.at) })
	for _, d := range ds {
		if wait := time.Until(d.at); wait > 2*time.Millisecond {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		g.set(d.i, v, sum, at)
	}
}

// set moves instance i to v, applied at at, and sends its report.
func (g *reporters) set(i int, v uint64, sum string, at time.Time) {
	g.mu.Lock()
	g.versions[i], g.sums[i], g.applied[i] = v, sum, at
	g.mu.Unlock()
	g.send(i)
}

// beat sends every instance's report once a heartbeat, a tenth of a
// second's share at a time.
func (g *reporters) beat(ctx context.Context) {
	const tick = 100 * time.Millisecond
	per := max(1, int((int64(len(g.names)-1)*int64(tick)+int64(g.hb)-1)/int64(g.hb)))
	next := 1
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range min(per, len(g.names)-1) {
			g.send(next)
			if next++; next == len(g.names) {
				next = 1
			}
		}
	}
}

// send sends instance i's report, if it has applied a version. It holds
// g.mu until the report is published: the heartbeat and apply send the
// same instances at once, a summarizer keeps the last message on an
// instance's subject, and a heartbeat's report on the old version that
// left after apply's on the new one had the instance read as on the old
// version until its next heartbeat. A client sends its reports from one
// goroutine (client.Watcher), so they leave in order too.
func (g *reporters) send(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, sum, applied := g.versions[i], g.sums[i], g.applied[i]
	if v == 0 {
		return
	}
	b, err := json.Marshal(cuecast.Report{Instance: g.names[i], Cohort: g.buckets[i], Config: Config, Version: v, Checksum: sum,
		Healthy: true, AppliedAt: applied.UTC(), At: time.Now().UTC()})
	if err == nil {
		err = g.publish(cuecast.ReportSubject(Config, g.names[i]), b)
	}
	if err != nil && err != nats.ErrConnectionClosed {
		fmt.Fprintln(os.Stderr, "scalesim reporters: report:", err)
	}
}

// HubCost is what the hub took in and spent over a window (a hub cluster
// counts as one: its servers' sums), with the regions' servers' and
// summarizers' CPU beside it.
type HubCost struct {
	Window time.Duration
	// InMsgs and InBytes are counts, fractional when scaled (Rest).
	InMsgs, InBytes float64
	// CPU is the hub's (its own getrusage), RSS its resident set at the
	// end (/proc/<pid>/status).
	CPU time.Duration
	RSS int64
	// GCs is how many collections the hub ran in the window (fractional
	// when scaled), GCCPU what the runtime estimates they cost, part of CPU.
	GCs   float64
	GCCPU time.Duration
	// RegionCPU and SummarizerCPU are summed over the regions (the
	// summarizers' from /proc/<pid>/stat, in 10 ms ticks).
	RegionCPU, SummarizerCPU time.Duration
}

type hubSnap struct {
	at             time.Time
	c              Counters
	rss            int64
	region, summar time.Duration
	// links counts the hubs' and regions' leafnode link ends by
	// compression (Counters.Compression).
	links map[string]int
}

func (t *Tree) hubSnap(tb testing.TB) hubSnap {
	tb.Helper()
	s := hubSnap{at: time.Now(), links: map[string]int{}}
	count := func(c Counters) {
		for level, n := range c.Compression {
			s.links[level] += n
		}
	}
	for _, h := range t.Hubs {
		c := h.Counters(tb)
		count(c)
		u, err := ProcUsage(h.Pid())
		if err != nil {
			tb.Fatal(err)
		}
		s.c.InMsgs, s.c.InBytes, s.c.CPU, s.rss = s.c.InMsgs+c.InMsgs, s.c.InBytes+c.InBytes, s.c.CPU+c.CPU, s.rss+u.RSS
		s.c.GCs, s.c.GCCPU = s.c.GCs+c.GCs, s.c.GCCPU+c.GCCPU
	}
	for _, r := range t.Regions {
		c := r.Counters(tb)
		count(c)
		s.region += c.CPU
	}
	for _, p := range t.Summarizers {
		u, err := ProcUsage(p.Pid())
		if err != nil {
			tb.Fatal(err)
		}
		s.summar += u.CPU
	}
	return s
}

func (a hubSnap) to(b hubSnap) HubCost {
	return HubCost{Window: b.at.Sub(a.at), InMsgs: float64(b.c.InMsgs - a.c.InMsgs), InBytes: float64(b.c.InBytes - a.c.InBytes), CPU: b.c.CPU - a.c.CPU,
		RSS: b.rss, RegionCPU: b.region - a.region, SummarizerCPU: b.summar - a.summar,
		GCs: float64(b.c.GCs - a.c.GCs), GCCPU: b.c.GCCPU - a.c.GCCPU}
}

// scale is c over a window of d at c's rate.
func (c HubCost) scale(d time.Duration) HubCost {
	at := func(x float64) float64 { return x * float64(d) / float64(c.Window) }
	dur := func(x time.Duration) time.Duration { return time.Duration(at(float64(x))) }
	return HubCost{Window: d, InMsgs: at(c.InMsgs), InBytes: at(c.InBytes), CPU: dur(c.CPU), RSS: c.RSS,
		RegionCPU: dur(c.RegionCPU), SummarizerCPU: dur(c.SummarizerCPU), GCs: at(c.GCs), GCCPU: dur(c.GCCPU)}
}

// MeanCost is windows measured as one window over their sum, scaled back
// to the first's length (RSS is the last window's, a level, not a count):
// one rest figure from several windows, since the hub's CPU at rest
// drifts by a tenth between windows of four heartbeats.
func MeanCost(windows []HubCost) HubCost {
	if len(windows) == 0 {
		return HubCost{}
	}
	var sum HubCost
	for _, c := range windows {
		sum = HubCost{Window: sum.Window + c.Window, InMsgs: sum.InMsgs + c.InMsgs, InBytes: sum.InBytes + c.InBytes,
			CPU: sum.CPU + c.CPU, RSS: c.RSS, RegionCPU: sum.RegionCPU + c.RegionCPU, SummarizerCPU: sum.SummarizerCPU + c.SummarizerCPU,
			GCs: sum.GCs + c.GCs, GCCPU: sum.GCCPU + c.GCCPU}
	}
	return sum.scale(windows[0].Window)
}

// HubHeap is the hub servers' live heap summed, each after a collection
// (Server.Heap).
func (t *Tree) HubHeap(tb testing.TB) int64 {
	tb.Helper()
	var n int64
	for _, h := range t.Hubs {
		n += h.Heap(tb)
	}
	return n
}

// Rest measures the hub at rest over d: the fleet's heartbeats (or its
// regions' summaries), scaled to one heartbeat interval.
func (t *Tree) Rest(tb testing.TB, d time.Duration) HubCost {
	tb.Helper()
	s0 := t.hubSnap(tb)
	time.Sleep(d) // a measurement window, not a wait for an event
	return s0.to(t.hubSnap(tb)).scale(t.heartbeat())
}

// ModeChange is one change measured in either report mode.
type ModeChange struct {
	Instances int
	// Applied is from the start of Publish to the hub's view having every
	// instance on the version (awaitApplied).
	Applied time.Duration
	// Cost is the hub's over the change's window: from just before the
	// Publish to window later, or a quarter of it after Applied if later.
	Cost HubCost
	Load string
	// Compression counts the hubs' and regions' leafnode link ends by the
	// compression they ran at the end of the change (Counters.Compression).
	Compression map[string]int
}

// ModeChange makes one change after settle, a change every instance
// applies, and measures it.
func (t *Tree) ModeChange(tb testing.TB, settle, window time.Duration) ModeChange {
	tb.Helper()
	time.Sleep(settle) // the previous change's reports in: the change starts at rest
	s0 := t.hubSnap(tb)
	t0 := time.Now()
	t.Ship(tb)
	tb.Logf("v%d shipped at %s (from %s)", t.ver, time.Now().Format("15:04:05.000"), t0.Format("15:04:05.000"))
	c := ModeChange{Instances: t.ReporterInstances()}
	c.Applied = t.awaitApplied(tb, t.ver, t0, time.Minute+time.Duration(c.Instances)*time.Millisecond)
	end := t0.Add(max(window, c.Applied+window/4))
	time.Sleep(time.Until(end)) // the rest of the measurement window
	s1 := t.hubSnap(tb)
	c.Cost = s0.to(s1)
	c.Load = LoadAverage()
	c.Compression = s1.links
	tb.Logf("v%d applied at the hub in %s; leaf link ends by compression %v (load %s)", t.ver, c.Applied.Round(time.Millisecond), c.Compression, c.Load)
	return c
}

// ModeRow is one report mode at one fleet size: the hub at rest, per
// heartbeat, and each change.
type ModeRow struct {
	Mode      string
	Instances int
	Regions   int
	Heartbeat time.Duration
	Rest      HubCost
	// RestWindows are the windows Rest is the mean of, each scaled to a
	// heartbeat (RestTrend fits a line through them).
	RestWindows []HubCost
	Changes     []ModeChange
	// HubHeap is the hub's live heap after its changes, after a
	// collection (Tree.HubHeap): its memory net of the collector's pacing.
	HubHeap int64
}

// PerChange is the median change's hub cost net of the rest rate over its
// window: what the change itself brought in and cost.
func (r ModeRow) PerChange() HubCost {
	var net []HubCost
	for _, c := range r.Changes {
		idle := r.Rest.scale(c.Cost.Window)
		net = append(net, HubCost{Window: c.Cost.Window, InMsgs: c.Cost.InMsgs - idle.InMsgs, InBytes: c.Cost.InBytes - idle.InBytes,
			CPU: c.Cost.CPU - idle.CPU, RSS: c.Cost.RSS, RegionCPU: c.Cost.RegionCPU - idle.RegionCPU, SummarizerCPU: c.Cost.SummarizerCPU - idle.SummarizerCPU})
	}
	slices.SortFunc(net, func(a, b HubCost) int { return cmp.Compare(a.InMsgs, b.InMsgs) })
	return net[len(net)/2]
}

// AppliedP50 is the median of the changes' Applied.
func (r ModeRow) AppliedP50() time.Duration {
	var v []time.Duration
	for _, c := range r.Changes {
		v = append(v, c.Applied)
	}
	return simfleet.Percentile(v, 0.5)
}

// Trend is a least-squares line through a mode's rest windows: the hub's
// CPU at rest per heartbeat against the instances behind it, read at the
// smallest and the largest size the mode ran.
type Trend struct {
	Windows     int
	Low, High   int           // instances
	AtLow       time.Duration // the line's value at Low
	AtHigh      time.Duration // and at High
	ChangeError time.Duration // the standard error of AtHigh - AtLow
}

// RestTrend fits the hub's CPU at rest against fleet size over every rest
// window of mode's rows, so that "flat" is read against the windows' own
// scatter rather than from one mean a size: on a 2-core box one size's
// windows spread by a tenth or more, and sizes by as much. ok is false
// with fewer than three windows or a single size.
func RestTrend(rows []ModeRow, mode string) (tr Trend, ok bool) {
	var xs, ys []float64
	for _, r := range rows {
		if r.Mode != mode {
			continue
		}
		for _, w := range r.RestWindows {
			xs, ys = append(xs, float64(r.Instances)), append(ys, float64(w.CPU))
		}
	}
	if len(xs) < 3 {
		return Trend{}, false
	}
	lo, hi := slices.Min(xs), slices.Max(xs)
	if lo == hi {
		return Trend{}, false
	}
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	slope := sxy / sxx
	var rss float64
	for i := range xs {
		d := ys[i] - (my + slope*(xs[i]-mx))
		rss += d * d
	}
	return Trend{
		Windows: len(xs), Low: int(lo), High: int(hi),
		AtLow:       time.Duration(my + slope*(lo-mx)),
		AtHigh:      time.Duration(my + slope*(hi-mx)),
		ChangeError: time.Duration(math.Sqrt(rss/(n-2)/sxx) * (hi - lo)),
	}, true
}

// ModesTable is rows as a Markdown table: per mode and fleet size, the
// hub's intake, CPU and memory per heartbeat at rest and per change (net
// of rest), and commit to all-applied at the hub.
func ModesTable(rows []ModeRow) string {
	var b strings.Builder
	b.WriteString("| mode | instances | rest: msgs in/hb | KB in/hb | hub cpu ms/hb | hub RSS MiB | hub heap MiB | change: msgs in | KB in | hub cpu ms | region cpu ms | summarizer cpu ms | commit → all applied p50 (each) | load |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rows {
		pc := r.PerChange()
		var each []string
		for _, c := range r.Changes {
			each = append(each, ms(c.Applied))
		}
		load := ""
		if len(r.Changes) > 0 {
			load = r.Changes[len(r.Changes)-1].Load
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.1f | %s | %s | %s | %.0f | %.1f | %s | %s | %s | %s ms (%s) | %s |\n", r.Mode, r.Instances,
			r.Rest.InMsgs, float64(r.Rest.InBytes)/1000, ms(r.Rest.CPU), mib(r.Rest.RSS), fmt.Sprintf("%.1f", float64(r.HubHeap)/(1<<20)),
			pc.InMsgs, float64(pc.InBytes)/1000, ms(pc.CPU), ms(pc.RegionCPU), ms(pc.SummarizerCPU),
			ms(r.AppliedP50()), strings.Join(each, " "), load)
	}
	return b.String()
}
