package scalesim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/internal/simfleet"
)

// Cost is what a server spent over a window: CPU time and messages, as
// differences of /proc and of its Counters.
type Cost struct {
	CPU                     time.Duration
	InMsgs, OutMsgs         int64
	LeafInMsgs, LeafOutMsgs int64
	FleetCPU                time.Duration // its instances' children's, for a node
}

// ServerCost is one server's side of a change.
type ServerCost struct {
	Name string
	// Instances connected to it (0 for the hub).
	Instances int
	// Delivery is the window from the change's first write at the top to
	// the last instance's apply; Total runs on until the apply reports
	// have come in (Options of Change).
	Delivery, Total Cost
	// RSS and HWM of the server process at the end of the change.
	RSS, HWM int64
	// FleetRSS is its instances' children's resident set.
	FleetRSS int64
	// FloorAll and ApplyAll, for a node, are when its last instance had
	// the floor's message and had applied the version.
	FloorAll, ApplyAll time.Duration
}

// Change is one measured change: the floor round, then the apply round.
type Change struct {
	Instances int
	// Floor and Apply are every instance's latency, shortest first.
	Floor, Apply []time.Duration
	// Ship is how long Publish and Deploy took at the top.
	Ship    time.Duration
	Hub     ServerCost
	Regions []ServerCost
	Nodes   []ServerCost
	// Load is /proc/loadavg's three averages at the end of the change.
	Load string
	// DeliveryWindow and TotalWindow are how long the servers' Delivery
	// and Total costs were counted over.
	DeliveryWindow, TotalWindow time.Duration
}

// FloorAll and ApplyAll are when the last instance had the change.
func (c Change) FloorAll() time.Duration { return c.Floor[len(c.Floor)-1] }

// ApplyAll is when the last instance had applied the version.
func (c Change) ApplyAll() time.Duration { return c.Apply[len(c.Apply)-1] }

type snapshot struct {
	at     time.Time
	hub    Usage
	hubC   Counters
	nodes  []Usage
	nodeC  []Counters
	reg    []Usage
	regC   []Counters
	fleets []Usage // per node, summed over its children
}

func (t *Tree) snap(tb testing.TB) snapshot {
	tb.Helper()
	use := func(pid int) Usage {
		u, err := ProcUsage(pid)
		if err != nil {
			tb.Fatal(err)
		}
		return u
	}
	// A hub cluster counts as one: its servers' sums.
	s := snapshot{at: time.Now()}
	for _, h := range t.Hubs {
		u, c := use(h.Pid()), h.Counters(tb)
		s.hub.CPU, s.hub.RSS, s.hub.HWM = s.hub.CPU+u.CPU, s.hub.RSS+u.RSS, s.hub.HWM+u.HWM
		s.hubC.InMsgs += c.InMsgs
		s.hubC.OutMsgs += c.OutMsgs
		s.hubC.InBytes += c.InBytes
		s.hubC.OutBytes += c.OutBytes
		s.hubC.LeafInMsgs += c.LeafInMsgs
		s.hubC.LeafOutMsgs += c.LeafOutMsgs
		s.hubC.Connections += c.Connections
		s.hubC.CPU += c.CPU
	}
	for _, r := range t.Regions {
		s.reg = append(s.reg, use(r.Pid()))
		s.regC = append(s.regC, r.Counters(tb))
	}
	for i, n := range t.Nodes {
		s.nodes = append(s.nodes, use(n.Pid()))
		s.nodeC = append(s.nodeC, n.Counters(tb))
		var f Usage
		for _, c := range t.Fleets[i] {
			u := use(c.Pid())
			f.CPU += u.CPU
			f.RSS += u.RSS
			f.HWM += u.HWM
		}
		s.fleets = append(s.fleets, f)
	}
	return s
}

// cost is a server's: CPU from its own getrusage (Counters.CPU; /proc's
// ticks are too coarse for it), memory from /proc.
func cost(u0, u1 Usage, c0, c1 Counters) Cost {
	return Cost{
		CPU:    c1.CPU - c0.CPU,
		InMsgs: c1.InMsgs - c0.InMsgs, OutMsgs: c1.OutMsgs - c0.OutMsgs,
		LeafInMsgs: c1.LeafInMsgs - c0.LeafInMsgs, LeafOutMsgs: c1.LeafOutMsgs - c0.LeafOutMsgs,
	}
}

// Change makes one change after settle (so that it reaches a fleet at
// rest: the previous change's apply reports are in): first the floor, one
// core-NATS message of the config's size published at the hub to every
// instance, then, settle later, one Publish and Deploy at the top. Each
// server's Total cost runs on reports after the last apply, for the apply
// reports the instances send 0.5–1.5 s after applying.
func (t *Tree) Change(tb testing.TB, settle, reports time.Duration) Change {
	tb.Helper()
	c := Change{Instances: t.Instances()}
	time.Sleep(settle)
	t.round++
	var floorNodes, applyNodes []time.Duration
	c.Floor, floorNodes = t.round2(tb, simfleet.Floor, t.round, func() {
		m := nats.NewMsg(floorSubject)
		m.Data = simfleet.Content(0)
		m.Header.Set("Round", strconv.FormatUint(t.round, 10))
		if err := t.pub.PublishMsg(m); err != nil {
			tb.Fatal(err)
		}
		if err := t.pub.Flush(); err != nil {
			tb.Fatal(err)
		}
	})
	time.Sleep(settle)
	s0 := t.snap(tb)
	c.Apply, applyNodes = t.round2(tb, simfleet.Applied, t.ver+1, func() {
		start := time.Now()
		t.Ship(tb)
		c.Ship = time.Since(start)
	})
	s1 := t.snap(tb)
	time.Sleep(reports)
	s2 := t.snap(tb)
	c.Load = LoadAverage()
	c.DeliveryWindow, c.TotalWindow = s1.at.Sub(s0.at), s2.at.Sub(s0.at)
	c.Hub = ServerCost{Name: fmt.Sprintf("hub×%d", len(t.Hubs)), Delivery: cost(s0.hub, s1.hub, s0.hubC, s1.hubC), Total: cost(s0.hub, s2.hub, s0.hubC, s2.hubC), RSS: s2.hub.RSS, HWM: s2.hub.HWM}
	for i, r := range t.Regions {
		c.Regions = append(c.Regions, ServerCost{Name: r.Name, Delivery: cost(s0.reg[i], s1.reg[i], s0.regC[i], s1.regC[i]), Total: cost(s0.reg[i], s2.reg[i], s0.regC[i], s2.regC[i]),
			RSS: s2.reg[i].RSS, HWM: s2.reg[i].HWM})
	}
	for i, n := range t.Nodes {
		sc := ServerCost{Name: n.Name, Delivery: cost(s0.nodes[i], s1.nodes[i], s0.nodeC[i], s1.nodeC[i]), Total: cost(s0.nodes[i], s2.nodes[i], s0.nodeC[i], s2.nodeC[i]),
			RSS: s2.nodes[i].RSS, HWM: s2.nodes[i].HWM, FleetRSS: s2.fleets[i].RSS}
		sc.FloorAll, sc.ApplyAll = floorNodes[i], applyNodes[i]
		sc.Delivery.FleetCPU = s1.fleets[i].CPU - s0.fleets[i].CPU
		sc.Total.FleetCPU = s2.fleets[i].CPU - s0.fleets[i].CPU
		for _, s := range t.FleetSizes[i] {
			sc.Instances += s
		}
		c.Nodes = append(c.Nodes, sc)
	}
	return c
}

// Idle is what each server spent over a window with no change: the
// fleet's heartbeats and pings, to read Change's costs against.
type Idle struct {
	Window  time.Duration
	Hub     Cost
	Regions []Cost
	Nodes   []Cost
}

// Idle measures what each server spends over d with no change.
func (t *Tree) Idle(tb testing.TB, d time.Duration) Idle {
	tb.Helper()
	s0 := t.snap(tb)
	time.Sleep(d)
	s1 := t.snap(tb)
	id := Idle{Window: s1.at.Sub(s0.at), Hub: cost(s0.hub, s1.hub, s0.hubC, s1.hubC)}
	for i := range t.Regions {
		id.Regions = append(id.Regions, cost(s0.reg[i], s1.reg[i], s0.regC[i], s1.regC[i]))
	}
	for i := range t.Nodes {
		c := cost(s0.nodes[i], s1.nodes[i], s0.nodeC[i], s1.nodeC[i])
		c.FleetCPU = s1.fleets[i].CPU - s0.fleets[i].CPU
		id.Nodes = append(id.Nodes, c)
	}
	return id
}

// net is c, counted over window, less what the idle rate would have
// spent over it.
func (id Idle) net(c, idle Cost, window time.Duration) Cost {
	if id.Window <= 0 {
		return c
	}
	f := float64(window) / float64(id.Window)
	sub := func(a, b int64) int64 { return a - int64(float64(b)*f) }
	return Cost{
		CPU:    c.CPU - time.Duration(float64(idle.CPU)*f),
		InMsgs: sub(c.InMsgs, idle.InMsgs), OutMsgs: sub(c.OutMsgs, idle.OutMsgs),
		LeafInMsgs: sub(c.LeafInMsgs, idle.LeafInMsgs), LeafOutMsgs: sub(c.LeafOutMsgs, idle.LeafOutMsgs),
		FleetCPU: c.FleetCPU - time.Duration(float64(idle.FleetCPU)*f),
	}
}

// round2 arms every child for a round, runs act, and returns every
// instance's latency from just before act, shortest first.
// perNode[i] is the latest of node i's instances.
func (t *Tree) round2(tb testing.TB, kind string, want uint64, act func()) (all, perNode []time.Duration) {
	tb.Helper()
	for _, fs := range t.Fleets {
		for _, f := range fs {
			f.Arm(tb, kind, want)
		}
	}
	t0 := time.Now()
	act()
	for _, fs := range t.Fleets {
		var last time.Duration
		for _, f := range fs {
			lat := f.Done(tb, t0)
			all = append(all, lat...)
			last = max(last, lat[len(lat)-1])
		}
		perNode = append(perNode, last)
	}
	slices.Sort(all)
	return all, perNode
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

func mib(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 0, 64) }

// Summary is the changes of one fleet size in a few lines: the medians
// over the changes of apply-all, floor-all, p50 and p99, and each server's
// median cost per change; with an Idle of the same fleet, also the cost
// with reports less the idle rate over the same window ("net").
func Summary(cs []Change, idle Idle) string {
	if len(cs) == 0 {
		return ""
	}
	med := func(f func(Change) time.Duration) time.Duration {
		var v []time.Duration
		for _, c := range cs {
			v = append(v, f(c))
		}
		return simfleet.Percentile(v, 0.5)
	}
	med64 := func(f func(Change) int64) int64 {
		var v []int64
		for _, c := range cs {
			v = append(v, f(c))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	var b strings.Builder
	last := cs[len(cs)-1]
	applyAll, floorAll := med(Change.ApplyAll), med(Change.FloorAll)
	fmt.Fprintf(&b, "instances=%d nodes=%d changes=%d load=%s\n", last.Instances, len(last.Nodes), len(cs), last.Load)
	fmt.Fprintf(&b, "  apply-all p50 %s ms (each: %s), floor-all p50 %s ms (each: %s), ratio %.2f\n",
		ms(applyAll), each(cs, Change.ApplyAll), ms(floorAll), each(cs, Change.FloorAll), float64(applyAll)/float64(floorAll))
	fmt.Fprintf(&b, "  apply p50 %s ms p99 %s ms; floor p50 %s ms p99 %s ms; publish+deploy p50 %s ms\n",
		ms(med(func(c Change) time.Duration { return simfleet.Percentile(c.Apply, 0.5) })),
		ms(med(func(c Change) time.Duration { return simfleet.Percentile(c.Apply, 0.99) })),
		ms(med(func(c Change) time.Duration { return simfleet.Percentile(c.Floor, 0.5) })),
		ms(med(func(c Change) time.Duration { return simfleet.Percentile(c.Floor, 0.99) })),
		ms(med(func(c Change) time.Duration { return c.Ship })))
	row := func(name string, inst int, sc func(Change) ServerCost, idleOf func(Idle) Cost) {
		netOf := func(c Change) Cost {
			if idle.Window <= 0 {
				return sc(c).Total
			}
			return idle.net(sc(c).Total, idleOf(idle), c.TotalWindow)
		}
		fmt.Fprintf(&b, "  %-8s inst=%-6d apply-all %s floor-all %s ms; delivery: cpu %s ms in %d out %d leaf-in %d leaf-out %d fleet-cpu %s ms | with reports: cpu %s ms in %d out %d leaf-in %d leaf-out %d fleet-cpu %s ms | net of idle: cpu %s ms in %d out %d fleet-cpu %s ms | rss %s MiB hwm %s MiB fleet-rss %s MiB\n",
			name, inst,
			ms(med(func(c Change) time.Duration { return sc(c).ApplyAll })), ms(med(func(c Change) time.Duration { return sc(c).FloorAll })),
			ms(med(func(c Change) time.Duration { return sc(c).Delivery.CPU })),
			med64(func(c Change) int64 { return sc(c).Delivery.InMsgs }), med64(func(c Change) int64 { return sc(c).Delivery.OutMsgs }),
			med64(func(c Change) int64 { return sc(c).Delivery.LeafInMsgs }), med64(func(c Change) int64 { return sc(c).Delivery.LeafOutMsgs }),
			ms(med(func(c Change) time.Duration { return sc(c).Delivery.FleetCPU })),
			ms(med(func(c Change) time.Duration { return sc(c).Total.CPU })),
			med64(func(c Change) int64 { return sc(c).Total.InMsgs }), med64(func(c Change) int64 { return sc(c).Total.OutMsgs }),
			med64(func(c Change) int64 { return sc(c).Total.LeafInMsgs }), med64(func(c Change) int64 { return sc(c).Total.LeafOutMsgs }),
			ms(med(func(c Change) time.Duration { return sc(c).Total.FleetCPU })),
			ms(med(func(c Change) time.Duration { return netOf(c).CPU })),
			med64(func(c Change) int64 { return netOf(c).InMsgs }), med64(func(c Change) int64 { return netOf(c).OutMsgs }),
			ms(med(func(c Change) time.Duration { return netOf(c).FleetCPU })),
			mib(sc(last).RSS), mib(sc(last).HWM), mib(sc(last).FleetRSS))
	}
	row("hub", 0, func(c Change) ServerCost { return c.Hub }, func(id Idle) Cost { return id.Hub })
	for i, r := range last.Regions {
		row(r.Name, 0, func(c Change) ServerCost { return c.Regions[i] }, func(id Idle) Cost {
			if i < len(id.Regions) {
				return id.Regions[i]
			}
			return Cost{}
		})
	}
	for i, n := range last.Nodes {
		row(n.Name, n.Instances, func(c Change) ServerCost { return c.Nodes[i] }, func(id Idle) Cost {
			if i < len(id.Nodes) {
				return id.Nodes[i]
			}
			return Cost{}
		})
	}
	return b.String()
}

func each(cs []Change, f func(Change) time.Duration) string {
	var s []string
	for _, c := range cs {
		s = append(s, ms(f(c)))
	}
	return strings.Join(s, " ")
}
