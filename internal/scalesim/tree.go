package scalesim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/simfleet"
)

// Namespace is the one namespace of the simulated tree, and Config the
// config every instance watches.
const (
	Namespace = "payments"
	Config    = cuecast.ConfigPath("payments/checkout")
)

// floorSubject is what the floor's message is published on at the hub (in
// the CUECAST account) and what every instance's connection subscribes to
// (in SVC_payments): a subject the service user may subscribe to that
// crosses the leafnode links (ccr.> does not).
var floorSubject = natsconf.InboxPrefix(Namespace) + ".floor"

// Options shape a Tree.
type Options struct {
	// Nodes is the number of node servers under the hub.
	Nodes int
	// HubServers is the number of servers in the hub's cluster: 1 (the
	// default) or 3, which makes the streams R3 (distributor.Options.
	// Replicas) and gives every node one leafnode URL per hub server.
	HubServers int
	// Regions, when set, puts that many regional leaf servers between the
	// hub and the nodes (the three-level tree of docs/SCALING.md), the
	// nodes spread over them round-robin; HopRTT applies to both hops.
	Regions int
	// Mode is how the instances check signatures: "signed-shared" (the
	// default: each child process's instances share one client.Keyring),
	// "signed" (each verifies every signature itself) or "unsigned"
	// (client.WithInsecureSkipVerify).
	Mode string
	// HopRTT, when set, is the round trip added on every node's leafnode
	// link to the hub: each link runs through a proxy in this process
	// (natstest.Link) that holds each direction's bytes for HopRTT/2, a
	// network between hosts where tc netem is not available.
	HopRTT time.Duration
	// Heartbeat, Reconcile and Ping, when set, replace the instances'
	// defaults (client.WithHeartbeat, 15 s, also the distributor's
	// Heartbeat; client.WithReconcile, 60 s; the ping interval of
	// client.ConnectOptions, 15 s): the fleet's cost at rest is one report
	// per heartbeat, three reads per reconcile and one ping per interval
	// per instance (docs/SCALING.md, "Capacity model").
	Heartbeat, Reconcile, Ping time.Duration
	// RoundTimeout is how long a change may take to reach every instance
	// (simfleet.Spec.RoundTimeout); default a minute.
	RoundTimeout time.Duration
	// LogDir, when set, keeps every server's log (nats-server's notices,
	// warnings and errors: slow consumers, stale connections) in
	// LogDir/<server>.log.
	LogDir string
	// Summaries makes every region (Options.Regions) a summarising one
	// (`nats-config leaf --region`, the hub's --region for each) with a
	// summarizer in its own process beside it (StartSummarizers): the
	// regions send the hub summaries instead of their instances' reports.
	Summaries bool
	// ProfPort, when set, makes every server serve Go's pprof over HTTP
	// (nats-server's prof_port) on 127.0.0.1: the hub's first server on
	// ProfPort and each next server started (hub servers, regions, nodes,
	// in that order) on the next port, for `go tool pprof`.
	ProfPort int
}

// Tree is the hub, its nodes, the distributor at the top, and the
// instances' child processes.
type Tree struct {
	// Hub is the hub's first server, the distributor's; Hubs all of them.
	Hub  *Server
	Hubs []*Server
	// Regions are the regional leaf servers (Options.Regions), Nodes[i]'s
	// under Regions[i%len(Regions)].
	Regions []*Server
	// Summarizers[i] summarises Regions[i] (Options.Summaries), and
	// Reporters[i] are the report generators connected to it
	// (GrowReporters).
	Summarizers []*Server
	Reporters   [][]*Server
	// ReporterSizes[i][j] is how many instances Reporters[i][j] runs.
	ReporterSizes [][]int
	Nodes         []*Server
	// Fleets[i] are the instances' children connected to Nodes[i].
	Fleets [][]*simfleet.Child
	// FleetSizes[i][j] is how many instances Fleets[i][j] runs.
	FleetSizes [][]int

	opts      Options
	reports   *distributor.ReportWatcher // status --wait's view (modes.go)
	passwords map[string]string
	pubKey    string
	d         *distributor.Distributor
	pub       *nats.Conn // the distributor's connection to the hub
	ver       uint64
	round     uint64
	servers   int // started so far, for ProfPort
}

// Start generates the configurations as `cuecast nats-config hub`, `leaf`
// and `node` would (with the floor's one addition, floorConf), starts the
// hub's servers, the regions and the nodes, each in its own process, the
// distributor at the hub, the namespace's mirror on every region and node,
// and publishes and deploys version 1.
// It starts no instances: Grow does. tb.Cleanup stops everything.
func Start(tb testing.TB, o Options) *Tree {
	tb.Helper()
	if o.Mode == "" {
		o.Mode = "signed-shared"
	}
	dir := tb.TempDir()
	if o.HubServers == 0 {
		o.HubServers = 1
	}
	t := &Tree{opts: o, passwords: map[string]string{}}
	var hubSpecs []natsconf.Spec
	routes := make([]string, o.HubServers)
	for i := range routes {
		routes[i] = natstest.FreeAddr(tb)
	}
	routePassword := secret(tb)
	var regionNames []string
	for i := range o.Regions {
		regionNames = append(regionNames, regionName(i))
	}
	for i := range o.HubServers {
		spec := natsconf.Spec{Level: natsconf.Hub, Name: "hub", Listen: "127.0.0.1:-1", LeafListen: natstest.FreeAddr(tb), Namespaces: []string{Namespace}}
		if o.Summaries {
			spec.Regions = regionNames
		}
		if o.HubServers > 1 {
			spec.Name = fmt.Sprintf("hub-%d", i+1)
			spec.Cluster = &natsconf.Cluster{Name: "hub", Listen: routes[i], Routes: slices.Delete(slices.Clone(routes), i, i+1), Password: routePassword}
		}
		hubSpecs = append(hubSpecs, spec)
	}
	for _, u := range hubSpecs[0].Users() {
		t.passwords[u] = secret(tb)
	}
	for _, spec := range hubSpecs {
		t.Hubs = append(t.Hubs, t.startServer(tb, dir, spec))
	}
	t.Hub = t.Hubs[0]
	link := func(addr string) string {
		if o.HopRTT <= 0 {
			return addr
		}
		l := natstest.StartLink(tb, addr)
		l.Delay(o.HopRTT/2, o.HopRTT/2, 0)
		return l.Addr()
	}
	hubLinks := func() []string {
		var ups []string
		for _, h := range hubSpecs {
			ups = append(ups, link(h.LeafListen))
		}
		return ups
	}
	var regionAddrs []string
	for i := range o.Regions {
		spec := natsconf.Spec{Level: natsconf.Leaf, Name: regionNames[i], Listen: "127.0.0.1:-1", LeafListen: natstest.FreeAddr(tb),
			Upstreams: hubLinks(), Namespaces: []string{Namespace}}
		if o.Summaries {
			spec.Region = spec.Name
		}
		t.Regions = append(t.Regions, t.startServer(tb, dir, spec))
		regionAddrs = append(regionAddrs, spec.LeafListen)
	}
	for i := range o.Nodes {
		ups := []string{}
		if len(regionAddrs) > 0 {
			ups = append(ups, link(regionAddrs[i%len(regionAddrs)]))
		} else {
			ups = hubLinks()
		}
		t.Nodes = append(t.Nodes, t.startServer(tb, dir, natsconf.Spec{
			Level: natsconf.Node, Name: fmt.Sprintf("node-%d", i+1), Listen: "127.0.0.1:-1",
			Upstreams: ups, Namespaces: []string{Namespace},
		}))
	}
	t.Fleets, t.FleetSizes = make([][]*simfleet.Child, o.Nodes), make([][]int, o.Nodes)
	tb.Cleanup(func() {
		for _, fs := range t.Fleets {
			for _, f := range fs {
				f.Stop()
			}
		}
	})

	var err error
	t.pub, err = nats.Connect(t.Hub.URL, nats.UserInfo(natsconf.DistributorUser, t.passwords[natsconf.DistributorUser]), nats.Timeout(10*time.Second))
	if err != nil {
		tb.Fatalf("connect to the hub: %v", err)
	}
	tb.Cleanup(t.pub.Close)
	kp, err := nkeys.CreateAccount()
	if err != nil {
		tb.Fatal(err)
	}
	t.pubKey, _ = kp.PublicKey()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A hub cluster places R3 streams once its meta leader has every peer:
	// until then New fails, and is tried again.
	poll.Until(tb, "the distributor's streams at the hub", time.Minute, func() (bool, string) {
		t.d, err = distributor.New(ctx, t.pub, distributor.Options{SigningKey: kp, Replicas: o.HubServers, Heartbeat: o.Heartbeat,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		return err == nil, fmt.Sprint(err)
	})
	// The nodes' leafnode links: a mirror created before its node is
	// linked would be created by nobody (the request crosses the link).
	poll.Until(tb, "every mirror created", 30*time.Second, func() (bool, string) {
		err := t.mirrors(ctx)
		return err == nil, fmt.Sprint(err)
	})
	t.Ship(tb)
	if o.Summaries {
		t.startSummarizers(tb)
	}
	return t
}

// regionName is the name of the ith region (from 0), its server's and, with
// Options.Summaries, its summaries'.
func regionName(i int) string { return fmt.Sprintf("region-%d", i+1) }

// mirrors creates every region's and node's CUECAST_<ns> mirror, of the
// hub's CUECAST or of the region's mirror, through the distributor's
// connection to the hub, as `cuecast nats-config mirrors` does.
func (t *Tree) mirrors(ctx context.Context) error {
	mirror := func(s *Server, spec natsconf.MirrorSpec) error {
		js, err := jetstream.NewWithDomain(t.pub, s.Name)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		spec.Namespaces = []string{Namespace}
		if err := natsconf.Mirrors(ctx, js, spec); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		return nil
	}
	for _, r := range t.Regions {
		if err := mirror(r, natsconf.MirrorSpec{Upstream: natsconf.HubDomain, FromHub: true}); err != nil {
			return err
		}
	}
	for i, n := range t.Nodes {
		spec := natsconf.MirrorSpec{Upstream: natsconf.HubDomain, FromHub: true}
		if len(t.Regions) > 0 {
			spec = natsconf.MirrorSpec{Upstream: t.Regions[i%len(t.Regions)].Name}
		}
		if err := mirror(n, spec); err != nil {
			return err
		}
	}
	return nil
}

func (t *Tree) startServer(tb testing.TB, dir string, spec natsconf.Spec) *Server {
	tb.Helper()
	spec.StoreDir = filepath.Join(dir, spec.Name)
	spec.Passwords = t.passwords
	conf, err := natsconf.Generate(spec)
	if err != nil {
		tb.Fatalf("generate %s: %v", spec.Name, err)
	}
	if conf, err = floorConf(conf); err != nil {
		tb.Fatalf("%s: %v", spec.Name, err)
	}
	if t.opts.ProfPort > 0 {
		conf += fmt.Sprintf("prof_port: %d\n", t.opts.ProfPort+t.servers)
	}
	t.servers++
	path := filepath.Join(dir, spec.Name+".conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	var log string
	if t.opts.LogDir != "" {
		log = filepath.Join(t.opts.LogDir, spec.Name+".log")
	}
	return startServer(tb, spec.Name, path, log)
}

// floorConf adds the floor's subject to a generated configuration: the
// CUECAST account exports it to SVC_<ns> as a stream, which imports it,
// beside ccr.<ns>.>; at the hub it also exports it to the fan-out account,
// which the leafnode links from below are bound to (docs/SECURITY.md), as
// the fan-out mirror's deliveries are. Nothing else changes: the floor's
// message takes the leafnode link the mirrors take and reaches the
// instances through an import, as their updates do.
func floorConf(conf string) (string, error) {
	exp := fmt.Sprintf(`{stream: %q, accounts: [%q]}`, "ccr."+Namespace+".>", natsconf.ServiceAccount(Namespace))
	imp := fmt.Sprintf(`{stream: {account: %q, subject: %q}}`, natsconf.Account, "ccr."+Namespace+".>")
	for _, line := range []string{exp, imp} {
		if strings.Count(conf, line) != 1 {
			return "", fmt.Errorf("add the floor to the configuration: %q is not there once", line)
		}
		conf = strings.Replace(conf, line, line+"\n"+strings.Replace(line, "ccr."+Namespace+".>", floorSubject, 1), 1)
	}
	fanExp := fmt.Sprintf(`{stream: %q, accounts: [%q]}`, cuecast.FanoutDeliverPrefix+".>", natsconf.FanoutAccount)
	fanImp := fmt.Sprintf(`{stream: {account: %q, subject: %q}}`, natsconf.Account, cuecast.FanoutDeliverPrefix+".>")
	switch n := strings.Count(conf, fanExp) + strings.Count(conf, fanImp); n {
	case 0: // no fan-out account: a node, or a hub without links
	case 2:
		for _, line := range []string{fanExp, fanImp} {
			conf = strings.Replace(conf, line, line+"\n"+strings.Replace(line, cuecast.FanoutDeliverPrefix+".>", floorSubject, 1), 1)
		}
	default:
		return "", fmt.Errorf("add the floor to the configuration: the fan-out account's export and import are there %d times, want both once", n)
	}
	return conf, nil
}

// Grow starts one more child process per node, each with perNode
// instances connected to its node, and waits until every one has applied
// the current version.
func (t *Tree) Grow(tb testing.TB, perNode int) {
	tb.Helper()
	var cs []*simfleet.Child
	for _, n := range t.Nodes {
		u, err := url.Parse(n.URL)
		if err != nil {
			tb.Fatal(err)
		}
		u.User = url.UserPassword(natsconf.ServiceUser(Namespace), t.passwords[natsconf.ServiceUser(Namespace)])
		cs = append(cs, simfleet.Launch(tb, simfleet.Spec{Child: fleetChild, URL: u.String(), Instances: perNode, RoundTimeout: t.opts.RoundTimeout,
			Env: []string{keyEnv + "=" + t.pubKey, modeEnv + "=" + t.opts.Mode, intervalsEnv + "=" + t.intervals()}}))
	}
	for i, c := range cs {
		t.Fleets[i] = append(t.Fleets[i], c)
		t.FleetSizes[i] = append(t.FleetSizes[i], perNode)
	}
	for _, c := range cs {
		c.Ready(tb)
	}
}

// Instances is how many instances run.
func (t *Tree) Instances() int { return total(t.FleetSizes) }

// total is the sum of sizes, per node (or region) and child.
func total(sizes [][]int) int {
	n := 0
	for _, s := range sizes {
		for _, c := range s {
			n += c
		}
	}
	return n
}

// Ship publishes the next version of Config (2.2 KB) and deploys it to
// every cohort pointer, at the hub.
func (t *Tree) Ship(tb testing.TB) {
	tb.Helper()
	t.ver++
	v := cuecast.Version{Config: Config, Version: t.ver, Commit: fmt.Sprintf("c%d", t.ver)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := t.d.Publish(ctx, v, simfleet.Content(t.ver)); err != nil {
		tb.Fatalf("publish: %v", err)
	}
	if err := t.d.Deploy(ctx, v); err != nil {
		tb.Fatalf("deploy: %v", err)
	}
}

func secret(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}
