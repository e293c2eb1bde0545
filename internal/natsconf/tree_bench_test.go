package natsconf_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
)

// fleet counts the instances that applied the version being measured.
type fleet struct {
	mu     sync.Mutex
	target uint64
	n      int
	size   int
	all    chan struct{}
}

func (f *fleet) expect(v uint64) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target, f.n, f.all = v, 0, make(chan struct{})
	return f.all
}

func (f *fleet) applied(v uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v == f.target {
		if f.n++; f.n == f.size {
			close(f.all)
		}
	}
}

// watchAll starts perServer instances on each connection group, conns
// connections per server, reading stream (CUECAST or the namespace mirror).
func watchAll(b *testing.B, f *fleet, connect func() *nats.Conn, servers, conns, perConn int, stream string) {
	for s := range servers {
		for c := range conns {
			nc := connect()
			for i := range perConn {
				opts := []client.Option{client.WithInstance(fmt.Sprintf("s%d-c%d-i%d", s, c, i)), client.WithTrustedKeys(treePub), client.WithHeartbeat(time.Minute)}
				if stream != "" {
					opts = append(opts, client.WithStream("", stream))
				}
				w := natstest.Watch(b, nc, checkout, opts)
				f.size++
				go func() {
					for snap := range w.Updates() {
						f.applied(snap.Version)
					}
				}()
			}
		}
	}
}

// measure publishes and deploys one version per iteration and reports the
// time until the last instance applied it.
func measure(b *testing.B, d *distributor.Distributor, f *fleet) {
	// Version 1 brings every instance up.
	all := f.expect(1)
	publish(b, d, checkout, 1, `{"v":1}`)
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		b.Fatalf("fleet of %d never reached v1", f.size)
	}
	var lat, write []time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := uint64(i + 2)
		all := f.expect(v)
		start := time.Now()
		publish(b, d, checkout, v, fmt.Sprintf(`{"v":%d}`, v))
		write = append(write, time.Since(start))
		select {
		case <-all:
		case <-time.After(60 * time.Second):
			b.Fatalf("v%d: fleet not converged", v)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(write)
	// ms-write: Publish and Deploy returned (every pointer stored at the
	// hub); the rest of ms-p50 is delivery down the tree.
	b.ReportMetric(float64(write[len(write)/2].Microseconds())/1000, "ms-write")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
}

// BenchmarkFanout: version published at the top ▶ every instance applied
// it, on the single embedded server and through one and two levels of leaf
// servers (4 node-local servers, the instances spread evenly over them).
// With 4 instances it measures the hops; with 1,000, the fan-out.
func BenchmarkFanout(b *testing.B) {
	for _, size := range []int{4, 1000} {
		conns := min(size/4, 5) // per node; 4× as many on the embedded server
		b.Run(fmt.Sprintf("embedded/%d", size), func(b *testing.B) {
			srv := natstest.Start(b)
			d, err := distributor.New(context.Background(), srv.Connect(b), distributor.Options{SigningKey: treeKey})
			if err != nil {
				b.Fatal(err)
			}
			f := &fleet{}
			watchAll(b, f, func() *nats.Conn { return srv.Connect(b, client.ConnectOptions()...) }, 1, 4*conns, size/4/conns, "")
			measure(b, d, f)
		})
		for _, levels := range []int{1, 2} {
			b.Run(fmt.Sprintf("tree-%d-level/%d", levels, size), func(b *testing.B) {
				tr := natstest.StartTree(b, natstest.TreeOptions{Namespaces: []string{"payments"}})
				var nodes []*natstest.TreeServer
				if levels == 1 {
					for i := range 4 {
						nodes = append(nodes, tr.AddLeaf(b, tr.Hub, natsconf.Node, fmt.Sprintf("node-%d", i+1)))
					}
				} else {
					for r := range 2 {
						region := tr.AddLeaf(b, tr.Hub, natsconf.Leaf, fmt.Sprintf("region-%d", r+1))
						region.WaitLinked(b)
						for i := range 2 {
							nodes = append(nodes, tr.AddLeaf(b, region, natsconf.Node, fmt.Sprintf("node-%d-%d", r+1, i+1)))
						}
					}
				}
				for _, l := range tr.Leaves {
					l.WaitLinked(b)
				}
				d, err := distributor.New(context.Background(), tr.Hub.Connect(b, natsconf.DistributorUser), distributor.Options{SigningKey: treeKey})
				if err != nil {
					b.Fatal(err)
				}
				tr.Mirrors(b)
				f := &fleet{}
				for _, n := range nodes {
					watchAll(b, f, func() *nats.Conn {
						return n.Connect(b, natsconf.ServiceUser("payments"), client.ConnectOptions()...)
					}, 1, conns, size/len(nodes)/conns, natsconf.MirrorStream("payments"))
				}
				measure(b, d, f)
			})
		}
	}
}
