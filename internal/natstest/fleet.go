package natstest

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
)

// The two ways instances' reports reach the hub (docs/SCALING.md), each
// the name of a BothModes subtest.
const (
	// SingleMode: one server, to which every instance reports.
	SingleMode = "single"
	// TreeMode: a hub and one summarising region (leaf-1), to whose server
	// the instances report; its summarizer sends the hub summaries.
	TreeMode = "tree"
)

// BothModes runs scenario as the subtests SingleMode and TreeMode: the
// same test, the same oracle, on a single server and on a tree whose
// region summarises its instances' reports. StartFleet, and InTree, tell
// the modes apart by the subtest's name. A scenario that starts its own
// servers may call t.Parallel.
func BothModes(t *testing.T, scenario func(t *testing.T)) {
	t.Helper()
	for _, mode := range []string{SingleMode, TreeMode} {
		t.Run(mode, scenario)
	}
}

// InTree reports whether t is (under) BothModes' TreeMode subtest.
func InTree(t testing.TB) bool {
	return strings.Contains(t.Name()+"/", "/"+TreeMode+"/")
}

// defaultHeartbeat is FleetOptions.Heartbeat's default.
const defaultHeartbeat = 500 * time.Millisecond

// FleetOptions shapes a Fleet.
type FleetOptions struct {
	// Namespaces the instances' configs are in (tree mode: each gets a
	// service user and a mirror).
	Namespaces []string
	// Heartbeat is the instances' report interval: the summarizer's, and
	// how often Report sends again what it reported (tree mode). Default
	// 500ms: a summary at rest goes out every heartbeat, checked every
	// fifth of one, and the hub calls it lost after two, so a loaded
	// machine's stall must stay under 0.8 heartbeats.
	Heartbeat time.Duration
	// Logger receives the summarizer's logs; default none.
	Logger *slog.Logger
}

// Fleet is where a test's instances report and its readers (status, the
// dashboard, the controller) read, in the mode of the test (BothModes):
// one server, or a tree's hub with one summarising region, leaf-1.
type Fleet struct {
	// Server is the single server (SingleMode), else nil.
	Server *Server
	// Tree is the hub and its region (TreeMode), else nil.
	Tree *Tree
	o    FleetOptions

	mu    sync.Mutex
	conns map[string]*nats.Conn // namespace ▶ an instance connection
	// last is each instance's last report, sent again every heartbeat
	// (tree mode), as a client does; the summarizer forgets an instance
	// whose reports stop.
	last    map[string][]byte // report subject ▶ body
	resends bool
}

// StartFleet starts the servers of t's mode (InTree). In tree mode the
// hub's distributor must create its streams before Summarize.
func StartFleet(t testing.TB, o FleetOptions) *Fleet {
	t.Helper()
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	f := &Fleet{o: o, conns: map[string]*nats.Conn{}, last: map[string][]byte{}}
	if InTree(t) {
		f.Tree = StartTree(t, TreeOptions{Leaves: 1, Namespaces: o.Namespaces, Regions: true})
	} else {
		f.Server = Start(t)
	}
	return f
}

// FleetOf is the single-mode fleet of a server the test started some
// other way (serve's embedded server); t.Cleanup does not stop it.
func FleetOf(srv *server.Server, o FleetOptions) *Fleet {
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	return &Fleet{Server: &Server{Server: srv}, o: o, conns: map[string]*nats.Conn{}, last: map[string][]byte{}}
}

// Heartbeat is the fleet's report interval (FleetOptions.Heartbeat).
func (f *Fleet) Heartbeat() time.Duration { return f.o.Heartbeat }

// Region is the tree's summarising region; nil in single mode.
func (f *Fleet) Region() *TreeServer {
	if f.Tree == nil {
		return nil
	}
	return f.Tree.Leaves[0]
}

// Hub connects as the distributor (serve) to where reports are read: the
// server, or the tree's hub.
func (f *Fleet) Hub(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if f.Tree != nil {
		return f.Tree.Hub.Connect(t, natsconf.DistributorUser, opts...)
	}
	return f.Server.Connect(t, opts...)
}

// HubURL is the client URL of the server, or of the tree's hub.
func (f *Fleet) HubURL() string {
	if f.Tree != nil {
		return f.Tree.Hub.ClientURL()
	}
	return f.Server.ClientURL()
}

// Login is user's login at the hub as cuecast's flags take it (--user,
// --password): none on the single server, which has no users.
func (f *Fleet) Login(user string) []string {
	if f.Tree == nil {
		return nil
	}
	return []string{"--user", user, "--password", f.Tree.Passwords[user]}
}

// LoginOptions is Login as connection options.
func (f *Fleet) LoginOptions(user string) []nats.Option {
	if f.Tree == nil {
		return nil
	}
	return []nats.Option{nats.UserInfo(user, f.Tree.Passwords[user])}
}

// Instance connects as a service of namespace ns: to the server, or to
// the region's server as the namespace's services.
func (f *Fleet) Instance(t testing.TB, ns string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if f.Tree != nil {
		return f.Region().Connect(t, natsconf.ServiceUser(ns), opts...)
	}
	return f.Server.Connect(t, opts...)
}

// ClientOptions are the client options an instance of namespace ns needs
// in the fleet's mode: in a tree, the namespace's mirror, and the fleet's
// heartbeat, the summarizer's.
func (f *Fleet) ClientOptions(ns string) []client.Option {
	if f.Tree != nil {
		return []client.Option{client.WithStream("", natsconf.MirrorStream(ns)), client.WithHeartbeat(f.o.Heartbeat)}
	}
	return nil
}

// Distributor starts the hub's distributor with o (serve's, which creates
// the streams) and then the region's summarizer (Summarize).
func (f *Fleet) Distributor(t testing.TB, o distributor.Options) *distributor.Distributor {
	t.Helper()
	d, err := distributor.New(t.Context(), f.Hub(t), o)
	if err != nil {
		t.Fatalf("new distributor: %v", err)
	}
	f.Summarize(t)
	return d
}

// Summarize, in tree mode, creates the region's mirrors and runs its
// summarizer, with the fleet's heartbeat and an interval of a fifth of it,
// for the rest of the test; in single mode it does nothing (the server's
// "region" is itself). Call it once the hub's distributor exists.
func (f *Fleet) Summarize(t testing.TB) {
	t.Helper()
	if f.Tree == nil {
		return
	}
	f.Tree.Mirrors(t)
	region := f.Region()
	s, err := distributor.NewSummarizer(region.Connect(t, natsconf.SummarizerUser(region.Spec.Name)),
		distributor.SummarizerOptions{Region: region.Spec.Name, Heartbeat: f.o.Heartbeat, Interval: f.o.Heartbeat / 5, Logger: f.o.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("summarizer: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// Report sends r, as instance r.Instance reports on r.Config: on the
// single server, stored in the report stream when it returns; in a tree,
// to the region's server, and again every heartbeat until the next Report
// of that instance and config, as the client library does, so that the
// summarizer keeps it live.
func (f *Fleet) Report(t testing.TB, r cuecast.Report) {
	t.Helper()
	if r.At.IsZero() {
		r.At = time.Now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	subject := cuecast.ReportSubject(r.Config, r.Instance)
	nc := f.conn(t, r.Config.Namespace())
	if f.Tree == nil {
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(t.Context(), subject, b); err != nil {
			t.Fatalf("report %s on %s v%d: %v", r.Instance, r.Config, r.Version, err)
		}
		return
	}
	f.mu.Lock()
	f.last[subject] = b
	start := !f.resends
	f.resends = true
	f.mu.Unlock()
	if err := nc.Publish(subject, b); err != nil {
		t.Fatalf("report %s on %s v%d: %v", r.Instance, r.Config, r.Version, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("report %s on %s v%d: %v", r.Instance, r.Config, r.Version, err)
	}
	if start {
		f.resend(t)
	}
}

// Forget stops sending again inst's last report on cfg (tree mode): the
// instance falls silent.
func (f *Fleet) Forget(cfg cuecast.ConfigPath, inst string) {
	f.mu.Lock()
	delete(f.last, cuecast.ReportSubject(cfg, inst))
	f.mu.Unlock()
}

// resend sends every instance's last report again each heartbeat until
// the test ends.
func (f *Fleet) resend(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(f.o.Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			f.mu.Lock()
			for subject, b := range f.last {
				cfg, _, _ := cuecast.ParseReportSubject(subject)
				// A failed send is the next heartbeat's to make up, as
				// for a client.
				_ = f.conns[cfg.Namespace()].Publish(subject, b)
			}
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// conn is the fleet's shared instance connection of namespace ns.
func (f *Fleet) conn(t testing.TB, ns string) *nats.Conn {
	t.Helper()
	f.mu.Lock()
	nc := f.conns[ns]
	f.mu.Unlock()
	if nc != nil {
		return nc
	}
	nc = f.Instance(t, ns)
	f.mu.Lock()
	defer f.mu.Unlock()
	if have := f.conns[ns]; have != nil {
		return have
	}
	f.conns[ns] = nc
	return nc
}
