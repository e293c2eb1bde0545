package natsconf_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

const checkout = cuecast.ConfigPath("payments/checkout")

// publish stores and deploys version n of cfg with content body.
func publish(t testing.TB, d *distributor.Distributor, cfg cuecast.ConfigPath, n uint64, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := cuecast.Version{Config: cfg, Version: n, Commit: fmt.Sprintf("%040d", n)}
	if err := d.Publish(ctx, v, []byte(body)); err != nil {
		t.Fatalf("publish %s@%d: %v", cfg, n, err)
	}
	if err := d.Deploy(ctx, v); err != nil {
		t.Fatalf("deploy %s@%d: %v", cfg, n, err)
	}
}

// instances starts n watchers of cfg on server s, as the namespace's service
// user, reading from the namespace mirror of s's own domain.
func instances(t *testing.T, s *natstest.TreeServer, cfg cuecast.ConfigPath, n int) []*client.Watcher {
	t.Helper()
	nc := s.Connect(t, natsconf.ServiceUser(cfg.Namespace()), client.ConnectOptions()...)
	var ws []*client.Watcher
	for i := range n {
		ws = append(ws, natstest.Watch(t, nc, cfg, []client.Option{
			client.WithInstance(fmt.Sprintf("%s-i%d", s.Spec.Name, i)),
			client.WithTrustedKeys(treePub),
			client.WithStream("", natsconf.MirrorStream(cfg.Namespace())),
			client.WithReconcile(500 * time.Millisecond),
		}))
	}
	return ws
}

func waitVersion(t *testing.T, what string, ws []*client.Watcher, want uint64) {
	t.Helper()
	poll.Until(t, what, poll.Patience, func() (bool, string) {
		for i, w := range ws {
			if got := w.Current().Version; got != want {
				return false, fmt.Sprintf("instance %d on version %d, want %d", i, got, want)
			}
		}
		return true, ""
	})
}

func TestTreeMirrorsServeLeavesAndCatchUp(t *testing.T) {
	for _, auth := range []string{"password", "creds", "creds-tls"} {
		t.Run(auth, func(t *testing.T) {
			tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: 2, Namespaces: []string{"payments", "search"},
				JWT: auth != "password", TLS: auth == "creds-tls"})
			testTree(t, tr)
		})
	}
}

func testTree(t *testing.T, tr *natstest.Tree) {
	nc := tr.Hub.Connect(t, natsconf.DistributorUser)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := distributor.New(ctx, nc, distributor.Options{SigningKey: treeKey})
	if err != nil {
		t.Fatalf("new distributor: %v", err)
	}
	tr.Mirrors(t)
	publish(t, d, checkout, 1, `{"v":1}`)

	leaf1 := instances(t, tr.Leaves[0], checkout, 3)
	leaf2 := instances(t, tr.Leaves[1], checkout, 3)
	waitVersion(t, "instances on both leaves", append(leaf1, leaf2...), 1)

	publish(t, d, checkout, 2, `{"v":2}`)
	waitVersion(t, "a commit reaching both leaves", append(leaf1, leaf2...), 2)

	tr.Leaves[0].Link.Cut()
	poll.Until(t, "leaf-1 cut off", poll.Patience, func() (bool, string) {
		n := tr.Leaves[0].NumLeafNodes()
		return n == 0, fmt.Sprintf("%d leafnode connections", n)
	})
	publish(t, d, checkout, 3, `{"v":3}`)
	waitVersion(t, "leaf-2 while leaf-1 is cut off", leaf2, 3)
	// Cut off, leaf-1 keeps serving from its mirror: a new instance starts
	// on the last version the mirror holds.
	late := instances(t, tr.Leaves[0], checkout, 1)
	waitVersion(t, "a new instance on the cut-off leaf", late, 2)
	waitVersion(t, "the cut-off leaf's instances", leaf1, 2)

	tr.Leaves[0].Link.Heal()
	tr.Leaves[0].WaitLinked(t)
	waitVersion(t, "leaf-1 catching up after the link returns", append(leaf1, late...), 3)
	for _, w := range append(leaf1, late...) {
		if s := w.Current(); string(s.Content) != `{"v":3}` {
			t.Errorf("content %s, want {\"v\":3}", s.Content)
		}
	}
}

// TestThreeLevelTree: hub ▶ regional leaf ▶ node. The node's mirror follows
// the region's; a region cut off from the hub keeps serving the node below
// it, and both catch up when the link returns. Retention purges and pointer
// rollups reach the mirrors: they hold what the hub holds.
func TestThreeLevelTree(t *testing.T) {
	tr := natstest.StartTree(t, natstest.TreeOptions{Namespaces: []string{"payments"}})
	region := tr.AddLeaf(t, tr.Hub, natsconf.Leaf, "eu-west")
	region.WaitLinked(t)
	node := tr.AddLeaf(t, region, natsconf.Node, "host-1")
	node.WaitLinked(t)
	nc := tr.Hub.Connect(t, natsconf.DistributorUser)
	d, err := distributor.New(context.Background(), nc, distributor.Options{Retain: 3, SigningKey: treeKey})
	if err != nil {
		t.Fatalf("new distributor: %v", err)
	}
	tr.MirrorRetain = 3
	tr.Mirrors(t)
	publish(t, d, checkout, 1, `{"v":1}`)
	onNode := instances(t, node, checkout, 2)
	onRegion := instances(t, region, checkout, 1)
	waitVersion(t, "instances on the region and the node", append(onNode, onRegion...), 1)

	region.Link.Cut()
	poll.Until(t, "region cut off", poll.Patience, func() (bool, string) {
		return !region.LinkedUp(), "still linked"
	})
	publish(t, d, checkout, 2, `{"v":2}`)
	late := instances(t, node, checkout, 1)
	waitVersion(t, "a new instance on the node below the cut", late, 1)

	region.Link.Heal()
	region.WaitLinked(t)
	for v := uint64(3); v <= 6; v++ {
		publish(t, d, checkout, v, fmt.Sprintf(`{"v":%d}`, v))
	}
	waitVersion(t, "the node catching up through the region", append(append(onNode, onRegion...), late...), 6)

	// The mirrors hold what the hub holds: 3 versions, 100 pointers.
	hub := streamState(t, nc, "hub", natsconf.Stream)
	for _, dom := range []string{"eu-west", "host-1"} {
		poll.Until(t, dom+" mirror holding what the hub holds", poll.Patience, func() (bool, string) {
			got := streamState(t, nc, dom, natsconf.MirrorStream("payments"))
			return got.Msgs == hub.Msgs && got.Last == hub.Last, fmt.Sprintf("%+v, hub %+v", got, hub)
		})
	}
}

type streamSummary struct{ Msgs, First, Last uint64 }

// streamState reads a stream of domain; the domain "fanout" is the hub's
// fan-out account (cuecast.FanoutAdminPrefix).
func streamState(t *testing.T, nc *nats.Conn, domain, name string) streamSummary {
	t.Helper()
	js, err := jetstream.NewWithDomain(nc, domain)
	if domain == "fanout" {
		js, err = jetstream.NewWithAPIPrefix(nc, cuecast.FanoutAdminPrefix)
	}
	if err != nil {
		t.Fatal(err)
	}
	st := ask(t, fmt.Sprintf("stream %s in %s", name, domain), func(ctx context.Context) (jetstream.Stream, error) {
		return js.Stream(ctx, name)
	})
	i := st.CachedInfo().State
	return streamSummary{i.Msgs, i.FirstSeq, i.LastSeq}
}

// ask is natstest.AskAgain for the test, for at most poll.Patience: a
// request that finds no responder or no answer in time while JetStream
// settles is asked again; any other failure fails t with what.
func ask[T any](t testing.TB, what string, f func(ctx context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	v, err := natstest.AskAgain(ctx, f)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// request is a request answered in time (ask): on a loaded machine the
// first may find no responder yet, or no answer in time.
func request(t testing.TB, nc *nats.Conn, subject string, data []byte) *nats.Msg {
	t.Helper()
	return ask(t, "request on "+subject, func(ctx context.Context) (*nats.Msg, error) {
		return nc.RequestWithContext(ctx, subject, data)
	})
}

// TestLeafRedialsOnlyItsUpstreams: a leaf that lost its link redials the
// addresses its config names, never one the level above advertised. The
// hub's INFO names its own leafnode listener; a leaf that took it up went
// around whatever stood between (a proxy, a NAT, here the test's Link), so
// that cutting the link no longer cut the leaf off (the flaky
// TestTreeMirrorsServeLeavesAndCatchUp and TestAskAgainWhileSettling: each
// reset the link once while the tree started).
func TestLeafRedialsOnlyItsUpstreams(t *testing.T) {
	for _, auth := range []string{"password", "creds"} {
		t.Run(auth, func(t *testing.T) {
			tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: 1, Namespaces: []string{"payments"}, JWT: auth == "creds"})
			leaf := tr.Leaves[0]
			for range 2 {
				carried := leaf.Link.Carried()
				if n := leaf.Link.Reset(); n == 0 {
					t.Fatal("the link carried no connection to reset")
				}
				poll.Until(t, "the leaf redialling through the link", poll.Patience, func() (bool, string) {
					return leaf.Link.Carried() > carried && leaf.LinkedUp(),
						fmt.Sprintf("%d connections through the link, %d leafnode connections", leaf.Link.Carried(), leaf.NumLeafNodes())
				})
			}
			leaf.Link.Cut()
			poll.Until(t, "the leaf cut off", poll.Patience, func() (bool, string) {
				n := leaf.NumLeafNodes()
				return n == 0, fmt.Sprintf("%d leafnode connections", n)
			})
		})
	}
}
