package natstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// Tree is a fan-out tree for tests: a hub and leaf servers, each started
// from the configuration `cuecast nats-config` generates, each leaf linked to
// the hub through a Link the test can cut and heal (raft's Disconnect and
// Reconnect). Everything listens on 127.0.0.1 with random ports and stores in
// t.TempDir(); t.Cleanup stops it all.
type Tree struct {
	Hub    *TreeServer
	Leaves []*TreeServer
	// Passwords of every user, shared by all servers of the tree.
	Passwords  map[string]string
	Namespaces []string
	// Keys are set in operator (JWT) mode: users connect with .creds files.
	Keys *natsconf.Keys
	// TLS is set when every server requires TLS.
	TLS *natsconf.TLS
	// MirrorRetain is Mirrors' natsconf.MirrorSpec.Retain (0: its default).
	MirrorRetain int

	credsDir string
	creds    map[string]string // user ▶ .creds path
	regions  bool              // the hub's leaves are summarising regions
	mu       sync.Mutex
}

// TreeServer is one server of a Tree.
type TreeServer struct {
	*server.Server
	Spec natsconf.Spec
	// ConfPath is the generated configuration the server runs.
	ConfPath string
	// LeafAddr is where lower levels connect (hub and leaf levels).
	LeafAddr string
	// Link carries the server's leafnode connection upstream (leaf levels)
	// to Parent.
	Link   *Link
	Parent *TreeServer
	tree   *Tree
}

// TreeOptions shapes a Tree.
type TreeOptions struct {
	// Leaves is the number of node-local leaf servers under the hub; their
	// names (and JetStream domains) are leaf-1, leaf-2…
	Leaves int
	// Namespaces get a service user and a mirror on every server.
	Namespaces []string
	// Level of the leaves: natsconf.Node (default) or natsconf.Leaf.
	Level natsconf.Level
	// JWT runs every server in operator mode; users log in with .creds.
	JWT bool
	// TLS secures every listener and link with a fresh CA (TLSFiles);
	// connections verify the servers with it.
	TLS bool
	// Regions makes every leaf a summarising region (natsconf.Spec.Region,
	// named as the leaf), which the hub lists: its link carries the
	// summaries of a distributor.Summarizer on it instead of reports.
	Regions bool
}

// StartTree starts the hub and the leaves and waits until every leaf is
// linked to the hub. It creates no streams: the test's distributor creates
// CUECAST, then Mirrors creates the mirrors.
func StartTree(t testing.TB, o TreeOptions) *Tree {
	t.Helper()
	if o.Level == "" {
		o.Level = natsconf.Node
	}
	tr := newTree(t, o)
	hubSpec := natsconf.Spec{Level: natsconf.Hub, Name: "hub", Listen: "127.0.0.1:-1", LeafListen: FreeAddr(t), Namespaces: o.Namespaces}
	if o.Regions {
		for i := range o.Leaves {
			hubSpec.Regions = append(hubSpec.Regions, fmt.Sprintf("leaf-%d", i+1))
		}
		tr.regions = true
	}
	for _, u := range hubSpec.Users() {
		tr.Passwords[u] = randomSecret(t)
	}
	tr.Hub = tr.StartServer(t, hubSpec)
	for i := range o.Leaves {
		tr.AddLeaf(t, tr.Hub, o.Level, fmt.Sprintf("leaf-%d", i+1))
	}
	for _, l := range tr.Leaves {
		l.WaitLinked(t)
	}
	return tr
}

// newTree is a Tree with no server yet, in o's modes (JWT, TLS).
func newTree(t testing.TB, o TreeOptions) *Tree {
	t.Helper()
	tr := &Tree{Passwords: map[string]string{}, Namespaces: o.Namespaces, credsDir: t.TempDir(), creds: map[string]string{}}
	if o.TLS {
		tr.TLS = TLSFiles(t)
	}
	if o.JWT {
		keys, err := natsconf.NewKeys()
		if err != nil {
			t.Fatal(err)
		}
		tr.Keys = keys
	}
	return tr
}

// AddLeaf starts a leaf (regional) or node server named name under parent,
// linked through a Link, and appends it to Leaves. It does not wait for the
// link: WaitLinked does.
func (tr *Tree) AddLeaf(t testing.TB, parent *TreeServer, level natsconf.Level, name string) *TreeServer {
	t.Helper()
	if parent.LeafAddr == "" {
		t.Fatalf("%s accepts no leafnodes", parent.Spec.Name)
	}
	link := StartLink(t, parent.LeafAddr)
	spec := natsconf.Spec{
		Level:      level,
		Name:       name,
		Listen:     "127.0.0.1:-1",
		Upstreams:  []string{link.Addr()},
		Namespaces: tr.Namespaces,
	}
	if level == natsconf.Leaf {
		spec.LeafListen = FreeAddr(t)
	}
	if tr.regions && parent == tr.Hub {
		spec.Region = name
	}
	ls := tr.StartServer(t, spec)
	ls.Link, ls.Parent = link, parent
	tr.Leaves = append(tr.Leaves, ls)
	return ls
}

// StartServer generates spec's configuration (StoreDir and Passwords filled
// in), writes it to a temp file, loads it with the nats-server config loader
// and starts the server.
func (tr *Tree) StartServer(t testing.TB, spec natsconf.Spec) *TreeServer {
	t.Helper()
	dir := t.TempDir()
	spec.StoreDir = filepath.Join(dir, "jetstream")
	spec.Passwords = tr.Passwords
	spec.TLS = tr.TLS
	if tr.Keys != nil {
		spec.Keys = tr.Keys
		spec.LeafCreds = tr.Creds(t, natsconf.LeafUser)
		if spec.Region != "" {
			spec.LeafCreds = tr.Creds(t, natsconf.RegionUser(spec.Region))
		}
	}
	conf, err := natsconf.Generate(spec)
	if err != nil {
		t.Fatalf("generate %s config: %v", spec.Name, err)
	}
	path := filepath.Join(dir, spec.Name+".conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatalf("write %s config: %v", spec.Name, err)
	}
	s, err := StartConf(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, conf)
	}
	ts := &TreeServer{Server: s, Spec: spec, ConfPath: path, LeafAddr: spec.LeafListen, tree: tr}
	t.Cleanup(ts.Stop)
	return ts
}

// StartConf runs a server from a configuration file and waits until it
// accepts clients. The caller stops it.
func StartConf(path string) (*server.Server, error) {
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("load nats config %s: %w", path, err)
	}
	opts.NoLog, opts.NoSigs = true, true
	// Leaf links run uncompressed in tests. A generated config leaves
	// compression to nats-server's default, s2_auto, which picks a level
	// from the link's measured RTT and moves to s2_best above 100 ms. Under
	// -race on a loaded 2-core box the setup and the pings pass that, and
	// s2_best's pooled tables (megabytes, range-checked by the race
	// detector on every flush) were a third of a tree test's CPU, and more
	// of its kernel time: load that raised the RTT that chose them. Under
	// -race even s2_fast is 45 times an uncompressed flush
	// (natsconf's BenchmarkLeafFlushCompression). No test here is about
	// compression.
	opts.LeafNode.Compression.Mode = server.CompressionOff
	for _, r := range opts.LeafNode.Remotes {
		r.Compression.Mode = server.CompressionOff
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start nats from %s: %w", path, err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("start nats from %s: not ready after 10s", path)
	}
	return s, nil
}

// StartConfFile writes conf to dir/name and starts a server from that file
// (StartConf), stopped when the test ends: for a test that needs a
// configuration of its own (users, permissions, leaf remotes).
func StartConfFile(t testing.TB, dir, name, conf string) *Server {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatalf("write nats config: %v", err)
	}
	s, err := StartConf(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Server: s, Dir: dir, t: t}
	t.Cleanup(srv.Stop)
	return srv
}

// Stop shuts the server down and waits; safe twice.
func (s *TreeServer) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// Domain is the server's JetStream domain.
func (s *TreeServer) Domain() string {
	if s.Spec.Domain != "" {
		return s.Spec.Domain
	}
	if s.Spec.Level == natsconf.Hub {
		return natsconf.HubDomain
	}
	return s.Spec.Name
}

// Connect opens a connection as user (a service user also gets its inbox
// prefix), asking again while a login ends unjudged (Dial); t.Cleanup
// closes it.
func (s *TreeServer) Connect(t testing.TB, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Patience)
	defer cancel()
	nc, err := Dial(ctx, s.ClientURL(), append(s.options(t, user), opts...)...)
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", s.Spec.Name, user, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// options are the connection options of user at s.
func (s *TreeServer) options(t testing.TB, user string) []nats.Option {
	t.Helper()
	base := []nats.Option{nats.Timeout(5 * time.Second), nats.UserInfo(user, s.tree.Passwords[user])}
	if s.tree.Keys != nil {
		creds := s.tree.Creds(t, user)
		if user == natsconf.DistributorUser && s.Spec.Level != natsconf.Hub && s.Spec.Level != natsconf.Standalone {
			// Below the hub, the distributor's account holds nothing:
			// the mirrors are in the links' account (natsconf.Keys.
			// FanoutAccountKey), whose administrator this stands for.
			creds = s.tree.Creds(t, localAdmin)
		}
		base = []nats.Option{nats.Timeout(5 * time.Second), nats.UserCredentials(creds)}
	}
	if t := s.tree.TLS; t != nil {
		base = append(base, nats.RootCAs(t.CA), nats.ClientCert(t.Cert, t.Key))
	}
	for _, ns := range s.tree.Namespaces {
		if user == natsconf.ServiceUser(ns) {
			base = append(base, nats.CustomInboxPrefix(natsconf.InboxPrefix(ns)))
		}
	}
	return base
}

// Creds returns the path of user's .creds file (operator mode), creating it
// on first use.
func (tr *Tree) Creds(t testing.TB, user string) string {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if p, ok := tr.creds[user]; ok {
		return p
	}
	b, err := tr.Keys.UserCreds(user)
	if user == localAdmin {
		b, err = tr.Keys.LocalAdminCreds()
	}
	if err != nil {
		t.Fatalf("creds of %s: %v", user, err)
	}
	p := filepath.Join(tr.credsDir, user+".creds")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tr.creds[user] = p
	return p
}

// localAdmin names the .creds of natsconf.Keys.LocalAdminCreds.
const localAdmin = "local-admin"

// WaitLinked polls until the server's link upstream is up at both ends
// (LinkedUp) and its JetStream answers through it (WaitAnswering): one
// end's count of leafnode connections says nothing of the other's, nor of
// the interest in the domain's API having crossed (on a loaded machine a
// test went on with either missing).
func (s *TreeServer) WaitLinked(t testing.TB) {
	t.Helper()
	poll.Until(t, s.Spec.Name+" linked to its upstream at both ends", poll.Patience, func() (bool, string) {
		return s.LinkedUp(), fmt.Sprintf("%d leafnode connections", s.NumLeafNodes())
	})
	s.WaitAnswering(t)
}

// LinkedUp reports whether the server's leafnode connection upstream is
// up at both ends: it lists its parent's, and its parent lists its own
// (Leafz). A server with no Parent (not added by AddLeaf) only needs a
// leafnode connection.
func (s *TreeServer) LinkedUp() bool {
	if s.Parent == nil {
		return s.NumLeafNodes() > 0
	}
	return lists(s.Server, s.Parent.Spec.Name) && lists(s.Parent.Server, s.Spec.Name)
}

// lists reports whether srv has a leafnode connection with the server
// named name.
func lists(srv *server.Server, name string) bool {
	lz, err := srv.Leafz(nil)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(lz.Leafs, func(l *server.LeafInfo) bool { return l.Name == name })
}

// WaitAnswering polls until the server's JetStream domain answers the
// distributor at the hub, through the links (a leaf or node), or locally
// (the hub).
func (s *TreeServer) WaitAnswering(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), poll.Patience)
	defer cancel()
	nc, err := Dial(ctx, s.tree.Hub.ClientURL(), s.tree.Hub.options(t, natsconf.DistributorUser)...)
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", s.tree.Hub.Spec.Name, natsconf.DistributorUser, err)
	}
	defer nc.Close()
	js, err := jetstream.NewWithDomain(nc, s.Domain())
	if err != nil {
		t.Fatalf("jetstream %s: %v", s.Domain(), err)
	}
	// Each request with a timeout of its own: one lost (sent while the
	// interest in its reply was still crossing) must not hold the wait.
	poll.Until(t, s.Spec.Name+"'s JetStream answering through the hub", poll.Patience, func() (bool, string) {
		before, lacks := s.lacksAPIInterest()
		try, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := js.AccountInfo(try)
		if err == nil && !lacks {
			return true, ""
		}
		if err == nil {
			err = fmt.Errorf("answered, but %s lacks some of the interest in the API from the link", s.Parent.Spec.Name)
		}
		// nats-server (go.mod's version, operator mode, a loaded
		// machine) may bring a link up without some of the interest in
		// the leaf's domain API that the leaf adds as it connects
		// (server/leafnode.go, the JetStream domain mappings), and never
		// send it: the parent forwards no request there for as long as
		// the connection lasts. Only a new connection sends it again.
		if after, still := s.lacksAPIInterest(); lacks && still && after == before {
			t.Logf("%s's link up without the interest in %s's JetStream API at %s (connection %d): reset", s.Spec.Name, s.Domain(), s.Parent.Spec.Name, after)
			s.Link.Reset()
		}
		return false, fmt.Sprint(err)
	})
}

// WaitParentInterest polls until the server's parent holds, from the
// server's link, the interest in subject (a subscription's subject, as
// Leafz lists it). A subscription made on a leaf reaches its parent a
// moment after the leaf has it (its Flush says only that the leaf has
// it): a message published at the parent meanwhile is not sent down.
func (s *TreeServer) WaitParentInterest(t testing.TB, subject string) {
	t.Helper()
	poll.Until(t, s.Parent.Spec.Name+" hears "+subject+" from "+s.Spec.Name, poll.Patience, func() (bool, string) {
		l := s.parentLink()
		if l == nil {
			return false, "no link"
		}
		return slices.Contains(l.Subs, subject), fmt.Sprintf("%d subscriptions from the link", len(l.Subs))
	})
}

// parentLink is the parent's view of the server's leafnode connection,
// with the subscriptions it carries up (Leafz); nil when the parent lists
// none.
func (s *TreeServer) parentLink() *server.LeafInfo {
	lz, err := s.Parent.Leafz(&server.LeafzOptions{Subscriptions: true})
	if err != nil {
		return nil
	}
	for _, l := range lz.Leafs {
		if l.Name == s.Spec.Name {
			return l
		}
	}
	return nil
}

// domainAPI is the interest a leaf with a JetStream domain adds for its
// domain's API as it connects (nats-server's generateJSMappingTable), with
// the prefix $JS.<domain>.API. left out.
var domainAPI = []string{"INFO", "STREAM.>", "CONSUMER.>", "DIRECT.>", "META.>", "SERVER.>", "ACCOUNT.>", "$KV.>", "$OBJ.>"}

// lacksAPIInterest reports whether the parent lacks, from the server's
// leafnode connection (whose id it returns), some of the interest in its
// JetStream domain's API ($JS.<domain>.API.…, domainAPI).
func (s *TreeServer) lacksAPIInterest() (uint64, bool) {
	if s.Parent == nil || s.Link == nil {
		return 0, false
	}
	l := s.parentLink()
	if l == nil {
		return 0, false
	}
	for _, api := range domainAPI {
		if !slices.Contains(l.Subs, "$JS."+s.Domain()+".API."+api) {
			return l.ID, true
		}
	}
	return l.ID, false
}

// Mirrors creates the namespace mirrors of every leaf, each from its
// parent's domain, as the distributor
// user connected to the hub (leaf domains are reached by their JetStream
// domain through the leafnode connections).
func (tr *Tree) Mirrors(t testing.TB) {
	t.Helper()
	nc := tr.Hub.Connect(t, natsconf.DistributorUser)
	ctx, cancel := context.WithTimeout(context.Background(), poll.Patience)
	defer cancel()
	for _, l := range tr.Leaves { // parents were added before their children
		js, err := jetstream.NewWithDomain(nc, l.Domain())
		if err != nil {
			t.Fatalf("jetstream %s: %v", l.Domain(), err)
		}
		// A link cut and healed since WaitLinked: its JetStream may not
		// answer yet.
		l.WaitAnswering(t)
		spec := natsconf.MirrorSpec{Upstream: l.Parent.Domain(), FromHub: l.Parent == tr.Hub, Namespaces: tr.Namespaces, Retain: tr.MirrorRetain}
		// Creating a mirror is idempotent: a request lost or unanswered
		// in time is made again.
		if _, err := AskAgain(ctx, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, natsconf.Mirrors(ctx, js, spec)
		}); err != nil {
			t.Fatalf("%s mirrors: %v", l.Spec.Name, err)
		}
	}
}

// Link is a TCP proxy standing for the network between two servers (or a
// client and its server). Cut drops its connections and refuses new ones
// until Heal; Reset drops the connections open now with a TCP reset and
// keeps accepting, ResetAfter does so once some bytes more have passed;
// Delay adds latency and jitter per direction; Stall holds one direction's
// bytes (a one-way partition) until Unstall.
type Link struct {
	ln     net.Listener
	target string

	mu  sync.Mutex
	cut bool
	// stalled[0] holds the data sent up (to target), stalled[1] the data
	// sent back; unstall is closed and replaced when a stall ends.
	stalled [2]bool
	unstall chan struct{}
	// blocked: nothing sent up is read (Block).
	blocked bool
	conns   map[net.Conn]struct{}
	// delays of the data sent up (to target) and down (back).
	up, down delay
	// budget is how many more bytes pass before every connection is reset;
	// negative: no reset is armed.
	budget int
	// stallOn, when set, stalls the way back once a chunk sent up
	// contains it (StallBackOn).
	stallOn []byte
	// acceptErrs counts the failed accepts the link waited out.
	acceptErrs atomic.Int64
	carried    atomic.Int64
	wg         sync.WaitGroup
}

// delay is a one-way latency: base plus a uniform random extra below jitter.
type delay struct{ base, jitter time.Duration }

func (d delay) draw() time.Duration {
	if d.jitter <= 0 {
		return d.base
	}
	return d.base + mrand.N(d.jitter)
}

// StartLink proxies a random local port to target; t.Cleanup closes it.
func StartLink(t testing.TB, target string) *Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	l := &Link{ln: ln, target: target, conns: map[net.Conn]struct{}{}, budget: -1, unstall: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.Close)
	return l
}

// Addr is the proxy's address, which the lower server dials.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Cut closes every proxied connection and refuses new ones.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = true
	for c := range l.conns {
		c.Close()
	}
}

// Heal accepts connections again; the leafnode remote redials on its own.
func (l *Link) Heal() {
	l.mu.Lock()
	l.cut = false
	l.mu.Unlock()
}

// Reset aborts every connection open now, both ends, with a TCP reset
// (RST, no FIN: what a middlebox or a peer's crash does mid-stream), and
// keeps accepting new connections. It returns how many proxied connections
// it reset.
func (l *Link) Reset() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // Close sends RST
		}
		c.Close()
	}
	return len(l.conns) / 2
}

// ResetAfter arms a reset mid-stream: once n more bytes have passed the
// link (both directions, all connections), the chunk carrying the n-th is
// cut after it and every connection is reset as Reset does, so that a
// protocol message is torn in the middle. Negative n disarms it.
func (l *Link) ResetAfter(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.budget = n
}

// spend takes n bytes from an armed reset's budget: it returns how many of
// them pass and whether the reset fires after them.
func (l *Link) spend(n int) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.budget < 0 {
		return n, false
	}
	if n < l.budget {
		l.budget -= n
		return n, false
	}
	pass := l.budget
	l.budget = -1
	return pass, true
}

// Delay holds every chunk of data sent upstream (towards the target) for
// up and every chunk sent back for down, each plus a random extra in
// [0, jitter), on the connections open now and later. Chunks keep their
// order, as TCP does, so jitter delays a chunk that overtook none. Zeros
// remove the latency.
func (l *Link) Delay(up, down, jitter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up, l.down = delay{up, jitter}, delay{down, jitter}
}

// Stall makes a one-way partition: the data sent up (towards the target)
// when up is set, back when down is set, is held, on the connections open
// now and later, while the other direction flows. The connections stay
// open: what a dropped path does to TCP, which retransmits until the path
// returns or a side gives up (here: a client's or server's ping timeout,
// which then closes the connection). Unstall delivers what was held, in
// order.
func (l *Link) Stall(up, down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stalled = [2]bool{up, down}
}

// StallBackOn arms a one-way partition for the answers to a given
// request: the first chunk sent up (towards the target) that contains
// marker stalls the way back, as Stall(false, true) does, before the chunk
// is passed on, so nothing sent back after it (its answer included) gets
// through until Unstall; the marker is spent. A test that must lose the
// answer to one request marks the request's subject, then cuts the link.
func (l *Link) StallBackOn(marker []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stallOn = slices.Clone(marker)
}

// sawUp stalls the way back when an armed StallBackOn's marker is in b.
func (l *Link) sawUp(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stallOn != nil && bytes.Contains(b, l.stallOn) {
		l.stallOn = nil
		l.stalled[1] = true
	}
}

// Block stops reading what clients send up (to target), as a server that
// stops reading a connection does. Unlike Stall, nothing is queued: once
// the kernel's buffers are full, a client's writes block. Unstall ends it.
func (l *Link) Block() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.blocked = true
}

// unblocked waits until nothing Blocks the way up.
func (l *Link) unblocked() {
	for {
		l.mu.Lock()
		blocked, unstall := l.blocked, l.unstall
		l.mu.Unlock()
		if !blocked {
			return
		}
		<-unstall
	}
}

// Unstall ends a Stall or a Block.
func (l *Link) Unstall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stalled = [2]bool{}
	l.blocked = false
	close(l.unstall)
	l.unstall = make(chan struct{})
}

// held reports whether the direction is stalled, and the channel closed
// when the stall ends.
func (l *Link) held(upstream bool) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := 1
	if upstream {
		i = 0
	}
	return l.stalled[i], l.unstall
}

func (l *Link) delay(upstream bool) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if upstream {
		return l.up.draw()
	}
	return l.down.draw()
}

// Close stops the proxy and waits for its goroutines.
func (l *Link) Close() {
	l.ln.Close()
	l.Cut()
	l.Unstall()
	l.wg.Wait()
}

func (l *Link) accept() {
	defer l.wg.Done()
	var wait time.Duration
	for {
		c, err := l.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors (EMFILE), or another passing error:
			// the listener is open, so wait and accept again, as net/http's
			// Server does. A link that stopped here never carried another
			// connection, and the fleet behind it never came back.
			l.acceptErrs.Add(1)
			wait = min(max(2*wait, 5*time.Millisecond), time.Second)
			time.Sleep(wait)
			continue
		}
		wait = 0
		l.mu.Lock()
		cut := l.cut
		l.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			c.Close()
			continue
		}
		if !l.track(c, up) {
			continue
		}
		l.carried.Add(1)
		l.wg.Add(2)
		go l.pipe(up, c, true)
		go l.pipe(c, up, false)
	}
}

func (l *Link) track(a, b net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		a.Close()
		b.Close()
		return false
	}
	l.conns[a], l.conns[b] = struct{}{}, struct{}{}
	return true
}

// chunk is data read from one side, due on the other at a time; a reset
// chunk resets the link's connections once the data before it is written.
type chunk struct {
	b     []byte
	due   time.Time
	reset bool
}

// pipe copies src to dst, each chunk held for the direction's delay, and
// while the direction is stalled. It ends when either side closes, or Cut
// or Reset closes both.
func (l *Link) pipe(dst, src net.Conn, upstream bool) {
	defer l.wg.Done()
	in, out := make(chan chunk), make(chan chunk)
	go queue(in, out) // unbounded: a stalled writer never blocks the reader
	done := make(chan struct{})
	closed := make(chan struct{}) // the reader ended: a stall must not outlive the connection
	go func() {                   // the writer
		defer close(done)
		failed := false
		for c := range out {
			if failed {
				continue // drain so that the queue ends
			}
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			for !failed {
				stalled, unstall := l.held(upstream)
				if !stalled {
					break
				}
				select {
				case <-unstall:
				case <-closed:
					failed = true
				}
			}
			if failed {
				continue
			}
			if c.reset {
				l.Reset()
				continue
			}
			if _, err := dst.Write(c.b); err != nil {
				failed = true
				src.Close()
			}
		}
	}()
	var last time.Time
	buf := make([]byte, 32<<10)
	for {
		if upstream {
			l.unblocked()
		}
		n, err := src.Read(buf)
		if n > 0 {
			if upstream {
				l.sawUp(buf[:n])
			}
			due := time.Now().Add(l.delay(upstream))
			if due.Before(last) {
				due = last // TCP keeps the order
			}
			last = due
			pass, reset := l.spend(n)
			if pass > 0 {
				in <- chunk{b: slices.Clone(buf[:pass]), due: due}
			}
			if reset {
				in <- chunk{due: due, reset: true}
			}
		}
		if err != nil {
			break
		}
	}
	close(closed)
	close(in)
	<-done
	dst.Close()
	src.Close()
	l.mu.Lock()
	delete(l.conns, dst)
	delete(l.conns, src)
	l.mu.Unlock()
}

// queue passes what arrives on in to out in order, holding any number of
// chunks; it closes out once in is closed and everything has passed.
func queue(in <-chan chunk, out chan<- chunk) {
	defer close(out)
	var held []chunk
	for in != nil || len(held) > 0 {
		var send chan<- chunk
		var next chunk
		if len(held) > 0 {
			send, next = out, held[0]
		}
		select {
		case c, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			held = append(held, c)
		case send <- next:
			held = held[1:]
		}
	}
}

// FreeAddr returns a 127.0.0.1 address with a port free a moment ago, for
// a process the test starts to listen on. The port is below the kernel's
// ephemeral range where it can be: a port from that range is the kernel's
// to hand again to the next socket that binds port 0 or connects out, and
// under load another test's socket took one before serve listened on it
// (TestRunbookDamagedStream: "bind: address already in use"). Below the
// range, only another FreeAddr can pick the same port, at random.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrOn(t, "127.0.0.1")
}

// FreeAddrOn is FreeAddr on another address of this machine (host).
func FreeAddrOn(t testing.TB, host string) string {
	t.Helper()
	if low := ephemeralLow(); low > freeLow {
		for range 100 {
			addr := net.JoinHostPort(host, fmt.Sprint(freeLow+mrand.IntN(low-freeLow)))
			if ln, err := net.Listen("tcp", addr); err == nil {
				ln.Close()
				return addr
			}
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("find a free port on %s: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// freeLow is the lowest port FreeAddr picks: above the ports services
// are usually configured on.
const freeLow = 10000

// ephemeralLow is the first port of the kernel's ephemeral range; 0 where
// it cannot be read (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0
	}
	return low
}

func randomSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random secret: %v", err)
	}
	return hex.EncodeToString(b)
}

// StartHubCluster starts an n-server hub cluster (one JetStream domain,
// clustered JetStream) from generated configurations and waits until
// JetStream has a meta leader. The servers are tr.Hub and the returned
// slice; Hub is the first.
func StartHubCluster(t testing.TB, n int, namespaces []string) (*Tree, []*TreeServer) {
	t.Helper()
	return StartHubClusterWith(t, n, TreeOptions{Namespaces: namespaces})
}

// StartHubClusterWith is StartHubCluster in o's modes (Namespaces, JWT,
// TLS); o's leaves, level and regions are not used.
func StartHubClusterWith(t testing.TB, n int, o TreeOptions) (*Tree, []*TreeServer) {
	t.Helper()
	tr := newTree(t, o)
	routes := make([]string, n)
	for i := range routes {
		routes[i] = FreeAddr(t)
	}
	routePassword := randomSecret(t)
	var servers []*TreeServer
	for i := range n {
		spec := natsconf.Spec{
			Level: natsconf.Hub, Name: fmt.Sprintf("hub-%d", i+1), Listen: "127.0.0.1:-1", LeafListen: FreeAddr(t),
			Namespaces: o.Namespaces,
			Cluster: &natsconf.Cluster{Name: "hub", Listen: routes[i], Routes: slices.Delete(slices.Clone(routes), i, i+1),
				Password: routePassword},
		}
		if i == 0 {
			for _, u := range spec.Users() {
				tr.Passwords[u] = randomSecret(t)
			}
		}
		servers = append(servers, tr.StartServer(t, spec))
	}
	tr.Hub = servers[0]
	// A meta leader alone is not enough: an R3 stream is placed only on
	// peers the leader has stats from ("no suitable peers for placement"
	// when a test created one a moment too early on a busy machine).
	poll.Until(t, "JetStream meta leader with every peer ready", 30*time.Second, func() (bool, string) {
		for _, s := range servers {
			if !s.JetStreamIsCurrent() {
				return false, s.Name() + " not current"
			}
		}
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				peers := s.JetStreamClusterPeers()
				return len(peers) == len(servers), fmt.Sprintf("leader %s sees peers %v", s.Name(), peers)
			}
		}
		return false, "no leader"
	})
	return tr, servers
}

// LoseAnswer runs call, which must send a request on subject (a literal
// subject, or a prefix ending in ">") through l, and loses that request's
// answer: the way back is held from the request on (StallBackOn), and once
// srv has received it the link is cut, so the connection drops with the
// answer in it, and healed. It returns what call returned after that, and
// fails t when call returns before its request reached srv or is still
// waiting poll.Patience after the answer was lost.
func (l *Link) LoseAnswer(t testing.TB, srv *Server, subject string, call func() error) error {
	t.Helper()
	obs := srv.Connect(t)
	asked := make(chan *nats.Msg, 64)
	if _, err := obs.ChanSubscribe(subject, asked); err != nil {
		t.Fatal(err)
	}
	if err := obs.Flush(); err != nil { // subscribed at srv before the request
		t.Fatal(err)
	}
	l.StallBackOn([]byte("PUB " + strings.TrimSuffix(subject, ">")))
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case <-asked:
	case err := <-done:
		t.Fatalf("returned %v before its request on %s reached the server", err, subject)
	case <-time.After(poll.Patience):
		t.Fatalf("no request on %s reached the server", subject)
	}
	l.Cut()
	l.Unstall()
	l.Heal()
	select {
	case err := <-done:
		return err
	case <-time.After(poll.Patience):
		t.Fatalf("still waiting %s after the answer on %s was lost with the connection", poll.Patience, subject)
		return nil
	}
}

// Carried is how many connections the link has carried through to its
// target so far.
func (l *Link) Carried() int64 { return l.carried.Load() }
