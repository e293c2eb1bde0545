package natsconf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/tailer"
)

// asyncErrs collects the asynchronous errors of a connection.
type asyncErrs chan error

func (a asyncErrs) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case a <- err:
		default:
		}
	})
}

// violation waits for the server's permissions violation naming subject.
func (a asyncErrs) violation(t *testing.T, what, subject string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-a:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return
			}
			t.Logf("%s: other async error: %v", what, err)
		case <-deadline:
			t.Fatalf("%s: no permissions violation for %s", what, subject)
		}
	}
}

func TestPermissionsIsolateNamespaces(t *testing.T) {
	for _, auth := range []string{"password", "creds"} {
		t.Run(auth, func(t *testing.T) {
			tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: 1, Namespaces: []string{"payments", "search"}, JWT: auth == "creds"})
			testPermissions(t, tr)
		})
	}
}

func testPermissions(t *testing.T, tr *natstest.Tree) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := distributor.New(ctx, tr.Hub.Connect(t, natsconf.DistributorUser), distributor.Options{})
	if err != nil {
		t.Fatalf("new distributor: %v", err)
	}
	tr.Mirrors(t)
	publish(t, d, "search/ranking", 1, `{"boost":2}`)
	publish(t, d, checkout, 1, `{"v":1}`)

	for _, srv := range tr.Leaves {
		t.Run(srv.Spec.Name, func(t *testing.T) {
			errs := asyncErrs(make(chan error, 16))
			nc := srv.Connect(t, natsconf.ServiceUser("payments"), errs.option(), nats.PermissionErrOnSubscribe(true))

			// Its own namespace works: the mirror answers a direct get.
			own := "$JS.API.DIRECT.GET.CUECAST_payments.cc.payments.v.checkout"
			poll.Until(t, "direct get of its own version", poll.Patience, func() (bool, string) {
				m, err := nc.RequestWithContext(ctx, own, nil)
				if err != nil {
					return false, err.Error()
				}
				return m.Header.Get("Nats-Subject") == "cc.payments.v.checkout", fmt.Sprintf("status %s", m.Header.Get("Status"))
			})

			for _, tc := range []struct{ name, subject string }{
				{"subscribe to search's updates", "ccr.search.>"},
				{"subscribe to search's pointers", "ccr.search.p.7.ranking"},
				{"subscribe to another namespace's inbox", "_INBOX_search.>"},
			} {
				sub, err := nc.SubscribeSync(tc.subject)
				if err != nil {
					t.Fatalf("%s: subscribe: %v", tc.name, err)
				}
				errs.violation(t, tc.name, tc.subject)
				// The subscription itself reports it too.
				if _, err := sub.NextMsg(time.Second); !errors.Is(err, nats.ErrPermissionViolation) {
					t.Errorf("%s: next message: got %v, want a permissions violation", tc.name, err)
				}
			}
			for _, tc := range []struct{ name, subject string }{
				{"read search's version from the stream", "$JS.API.DIRECT.GET.CUECAST.cc.search.v.ranking"},
				{"read search's version from its mirror", "$JS.API.DIRECT.GET.CUECAST_search.cc.search.v.ranking"},
				{"read by sequence from the whole stream", "$JS.API.DIRECT.GET.CUECAST"},
				{"read search's pointer", "$JS.API.DIRECT.GET.CUECAST.cc.search.p.7.ranking"},
				{"publish a pointer", "cc.payments.p.7.checkout"},
				{"publish a version", "cc.payments.v.checkout"},
				{"publish a report for another namespace", "ccs.search.web-1.ranking"},
				{"write a pointer through the JetStream API", "$JS.API.STREAM.PURGE.CUECAST"},
			} {
				if err := nc.Publish(tc.subject, []byte(`{}`)); err != nil {
					t.Fatalf("%s: publish: %v", tc.name, err)
				}
				errs.violation(t, tc.name, tc.subject)
			}
			// Its own reports go through.
			if err := nc.Publish("ccs.payments.web-1.checkout", []byte(`{}`)); err != nil {
				t.Fatalf("report: %v", err)
			}
			if err := nc.FlushWithContext(ctx); err != nil {
				t.Fatalf("flush: %v", err)
			}
			select {
			case err := <-errs:
				t.Errorf("own report: %v", err)
			default:
			}
		})
	}

	t.Run("operator reads status", func(t *testing.T) {
		errs := asyncErrs(make(chan error, 16))
		nc := tr.Hub.Connect(t, natsconf.OperatorUser, errs.option())
		od, err := distributor.Open(ctx, nc, distributor.Options{})
		if err != nil {
			t.Fatalf("open distributor as operator: %v", err)
		}
		st, err := od.Status(ctx)
		if err != nil {
			select {
			case aerr := <-errs:
				t.Fatalf("status: %v (async: %v)", err, aerr)
			default:
				t.Fatalf("status: %v", err)
			}
		}
		if len(st) != 2 {
			t.Errorf("status of %d configs, want 2", len(st))
		}
		// status --wait follows the reports live: a service's report sent
		// on a leaf reaches the operator's subscription on the hub.
		w, err := od.WatchReports(ctx, checkout)
		if err != nil {
			t.Fatalf("watch reports as operator: %v", err)
		}
		defer w.Stop()
		svc := tr.Leaves[0].Connect(t, natsconf.ServiceUser("payments"))
		report, _ := json.Marshal(cuecast.Report{Instance: "web-9", Config: checkout, Version: 1, Healthy: true, At: time.Now()})
		poll.Until(t, "the leaf's report in the operator's live view", poll.Patience, func() (bool, string) {
			if err := svc.Publish(cuecast.ReportSubject(checkout, "web-9"), report); err != nil {
				return false, err.Error()
			}
			rs := w.Live()
			return slices.ContainsFunc(rs, func(r cuecast.Report) bool { return r.Instance == "web-9" }), fmt.Sprintf("%d live reports", len(rs))
		})
		if err := nc.Publish("cc.payments.p.7.checkout", []byte(`{}`)); err != nil {
			t.Fatalf("publish: %v", err)
		}
		errs.violation(t, "operator publishing a pointer", "cc.payments.p.7.checkout")
	})
}

// streamSnap is what the suite compares of one stream before and after an
// attack: its configuration and state.
type streamSnap struct {
	Msgs, First, Last uint64
	Config            string
}

// storeState holds every stream of every domain of the tree.
type storeState map[string]streamSnap

// snapshot reads every stream of the tree's domains as the distributor.
func snapshot(t *testing.T, nc *nats.Conn, domains []string) storeState {
	t.Helper()
	out := storeState{}
	for _, dom := range domains {
		js, err := jetstream.NewWithDomain(nc, dom)
		if dom == "fanout" {
			js, err = jetstream.NewWithAPIPrefix(nc, cuecast.FanoutAdminPrefix)
		}
		if err != nil {
			t.Fatalf("jetstream %s: %v", dom, err)
		}
		infos := ask(t, "list streams of "+dom, func(ctx context.Context) ([]*jetstream.StreamInfo, error) {
			l := js.ListStreams(ctx)
			return listAll(l.Info(), l.Err)
		})
		for _, info := range infos {
			cfg, err := json.Marshal(info.Config)
			if err != nil {
				t.Fatal(err)
			}
			st := info.State
			out[dom+"/"+info.Config.Name] = streamSnap{Msgs: st.Msgs, First: st.FirstSeq, Last: st.LastSeq, Config: string(cfg)}
		}
	}
	return out
}

// diff lists the streams whose state differs. Reports expire (max age), so
// of the report stream only the configuration and last sequence count.
func (a storeState) diff(b storeState) []string {
	var d []string
	for k, v := range a {
		w, ok := b[k]
		if strings.HasSuffix(k, "/"+cuecast.ReportStream) {
			v.Msgs, v.First, w.Msgs, w.First = 0, 0, 0, 0
		}
		if !ok || v != w {
			d = append(d, fmt.Sprintf("%s: before %+v, after %+v", k, v, w))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("%s: new stream %+v", k, v))
		}
	}
	slices.Sort(d)
	return d
}

// attack is one attempt of a role: a subscription, or a publish with an
// optional reply subject and body. allowed marks a publish the role may
// make (its own direct get or report) whose reply subject is the attack:
// it draws no permissions violation, and the suite proves it harmless by
// the stores alone.
type attack struct {
	sub     string
	pub     string
	reply   string
	body    string
	header  nats.Header
	allowed bool
}

func (a attack) String() string {
	if a.sub != "" {
		return "subscribe " + a.sub
	}
	s := "publish " + a.pub
	if a.reply != "" {
		s += " reply " + a.reply
	}
	if a.body != "" {
		s += " body " + a.body
	}
	return s
}

// replyTargets are the subjects a reply may be aimed at: every stored or
// delivered subject family of its own and of another namespace.
func replyTargets(own, other string) []string {
	return []string{
		"cc." + other + ".p.all.ranking", "cc." + own + ".p.all.checkout", "cc." + other + ".v.junk", "cc." + own + ".v.junk",
		"ccr." + other + ".p.all.ranking", "ccr." + own + ".p.all.checkout",
		"ccs." + other + ".web-1.ranking", "ccs." + own + ".web-1.checkout",
		"cca." + other + ".ranking", "cca." + own + ".checkout",
		"$KV.cuecast-rollouts." + other + ".ranking", "$KV.cuecast-rollouts." + own + ".checkout",
		"$JS.API.STREAM.PURGE.CUECAST", "$JS.API.STREAM.DELETE.CUECAST_AUDIT",
		"$JS.hub.API.STREAM.PURGE.CUECAST", "$JS.API.STREAM.PURGE.CUECAST_" + other,
		"_INBOX_" + other + ".stolen", "_INBOX.stolen",
	}
}

// serviceAttacks is everything a service of namespace own tries against
// the tree (other is another namespace).
func serviceAttacks(own, other string) []attack {
	var as []attack
	for _, s := range []string{
		"ccr." + other + ".>", "ccr.>", "cc.>", "cc." + own + ".>", "ccs.>", "ccs." + other + ".>", "cca.>",
		"$KV.>", "$JS.API.>", "$JS.>", "_INBOX.>", "_INBOX_" + other + ".>", "$SYS.>", ">",
	} {
		as = append(as, attack{sub: s})
	}
	ownDirect := "$JS.API.DIRECT.GET." + natsconf.MirrorStream(own)
	for _, reply := range replyTargets(own, other) {
		as = append(as,
			attack{pub: ownDirect, reply: reply, body: `{"seq":1}`, allowed: true},
			attack{pub: ownDirect, reply: reply, body: `{"seq":1,"batch":10}`, allowed: true},
			attack{pub: ownDirect, reply: reply, body: `{"multi_last":["cc.` + own + `.>"]}`, allowed: true},
			attack{pub: ownDirect + ".cc." + own + ".v.checkout", reply: reply, allowed: true},
			attack{pub: ownDirect + ".cc." + own + ".p.all.checkout", reply: reply, allowed: true},
			attack{pub: "ccs." + own + ".web-1.checkout", reply: reply, body: `{}`, allowed: true},
		)
	}
	for _, p := range []string{
		"cc." + own + ".p.all.checkout", "cc." + own + ".v.checkout", "cc." + other + ".p.all.ranking",
		"ccr." + own + ".p.all.checkout", "ccr." + other + ".p.all.ranking",
		"ccs." + other + ".web-1.ranking", "cca." + own + ".checkout", "cca." + other + ".ranking",
		"$KV.cuecast-rollouts." + own + ".checkout", "$KV.cuecast-rollouts." + other + ".ranking",
		"$KV.cuecast-tailer.cursor.default", "$JS.API.DIRECT.GET.KV_cuecast-tailer", "$JS.API.STREAM.PURGE.KV_cuecast-tailer",
		"$JS.API.DIRECT.GET.CUECAST", "$JS.API.DIRECT.GET.CUECAST.cc." + other + ".v.ranking",
		"$JS.API.DIRECT.GET." + natsconf.MirrorStream(other), "$JS.API.DIRECT.GET." + natsconf.MirrorStream(other) + ".cc." + other + ".v.ranking",
		"$JS.API.DIRECT.GET.KV_cuecast-rollouts", "$JS.API.DIRECT.GET.CUECAST_AUDIT", "$JS.API.DIRECT.GET.CUECAST_REPORTS",
		"$JS.API.STREAM.MSG.GET.CUECAST", "$JS.API.STREAM.INFO.CUECAST", "$JS.API.STREAM.LIST", "$JS.API.INFO",
		"$JS.API.STREAM.PURGE.CUECAST", "$JS.API.STREAM.DELETE.CUECAST_AUDIT", "$JS.API.STREAM.UPDATE.CUECAST_AUDIT",
		"$JS.API.STREAM.PURGE." + natsconf.MirrorStream(own), "$JS.API.STREAM.MSG.DELETE.CUECAST_REPORTS",
		"$JS.API.STREAM.CREATE.EVIL", "$JS.API.CONSUMER.CREATE.CUECAST", "$JS.API.CONSUMER.CREATE." + natsconf.MirrorStream(own) + ".x",
		"$JS.hub.API.STREAM.PURGE.CUECAST", "$JS.hub.API.DIRECT.GET.CUECAST",
		"$SYS.REQ.SERVER.PING", "_INBOX_" + other + ".stolen", "_INBOX.stolen",
	} {
		as = append(as, attack{pub: p, reply: "_INBOX_" + own + ".attack", body: `{"seq":1}`})
	}
	return as
}

// operatorAttacks: the operator may read and steer rollouts but change no
// stream's configuration or contents, nor write versions and pointers.
func operatorAttacks(domains []string) []attack {
	var as []attack
	for _, st := range []string{natsconf.Stream, cuecast.ReportStream, "KV_cuecast-rollouts", "KV_cuecast-tailer", "CUECAST_AUDIT"} {
		for _, op := range []string{"UPDATE", "DELETE", "PURGE", "MSG.DELETE", "CREATE"} {
			as = append(as, attack{pub: "$JS.API.STREAM." + op + "." + st, reply: "_INBOX.attack", body: `{"name":"` + st + `","max_msgs":1,"seq":1}`})
		}
	}
	for _, dom := range domains {
		as = append(as,
			attack{pub: "$JS." + dom + ".API.STREAM.DELETE.CUECAST_AUDIT", reply: "_INBOX.attack", body: `{}`},
			attack{pub: "$JS." + dom + ".API.STREAM.PURGE.CUECAST_payments", reply: "_INBOX.attack", body: `{}`},
		)
	}
	as = append(as,
		attack{pub: "$JS.API.STREAM.CREATE.EVIL", reply: "_INBOX.attack", body: `{"name":"EVIL","subjects":["cc.evil.>"]}`},
		attack{pub: "$JS.API.KV.DEL.cuecast-rollouts", reply: "_INBOX.attack"},
		// The tailer's cursors are serve's alone (docs/SECURITY.md).
		attack{pub: "$KV.cuecast-tailer.cursor.default", reply: "_INBOX.attack", body: `{"cursor":"evil"}`},
		attack{pub: "cc.payments.p.all.checkout", body: `{}`},
		attack{pub: "cc.search.v.ranking", body: `{}`},
		attack{pub: "ccr.payments.p.all.checkout", body: `{}`},
		attack{pub: "ccs.payments.web-1.checkout", body: `{}`},
	)
	return append(as, operatorReplyAttacks()...)
}

// operatorReplyAttacks are the requests the operator may make (its reads,
// and writes refused by their expectations) with the reply aimed at a
// store, and the push consumers it could create with such a deliver
// subject (docs/SECURITY.md, the operator). The reply of a request it makes
// must reach only itself, and it can create no consumer.
func operatorReplyAttacks() []attack {
	var as []attack
	wrongSeq := nats.Header{"Nats-Expected-Last-Subject-Sequence": []string{"999999"}}
	wrongStream := nats.Header{"Nats-Expected-Stream": []string{"NOPE"}}
	for _, reply := range replyTargets("payments", "search") {
		for _, st := range []string{natsconf.Stream, cuecast.ReportStream, "KV_cuecast-rollouts", "KV_cuecast-tailer", "CUECAST_AUDIT"} {
			as = append(as,
				attack{pub: "$JS.API.DIRECT.GET." + st, reply: reply, body: `{"seq":1}`, allowed: true},
				attack{pub: "$JS.API.DIRECT.GET." + st, reply: reply, body: `{"seq":1,"batch":10,"next_by_subj":">"}`, allowed: true},
				attack{pub: "$JS.API.STREAM.INFO." + st, reply: reply, allowed: true},
			)
		}
		as = append(as,
			attack{pub: "$JS.API.DIRECT.GET.CUECAST.cc.payments.v.checkout", reply: reply, allowed: true},
			attack{pub: "$JS.API.DIRECT.GET.CUECAST", reply: reply, body: `{"multi_last":["cc.>"]}`, allowed: true},
			attack{pub: "$JS.API.DIRECT.GET.CUECAST_REPORTS.ccs.search.web-1.ranking", reply: reply, allowed: true},
			attack{pub: "$JS.API.STREAM.MSG.GET.CUECAST", reply: reply, body: `{"seq":1}`, allowed: true},
			attack{pub: "$JS.API.INFO", reply: reply, allowed: true},
			attack{pub: natsconf.ReportStreamInfo, reply: reply, allowed: true},
			attack{pub: "$JS.API.STREAM.NAMES", reply: reply, allowed: true},
			// Writes it may make, refused by their expectations: only the
			// error answers the reply.
			attack{pub: "$KV.cuecast-rollouts.payments.checkout", reply: reply, body: `{}`, header: wrongSeq, allowed: true},
			attack{pub: "cca.payments.checkout", reply: reply, body: `{}`, header: wrongStream, allowed: true},
		)
	}
	// Push consumers delivering into another stream's subjects, with
	// interest in them (the operator follows ccs.> and ccr.>).
	for i, c := range []struct{ stream, deliver string }{
		{natsconf.Stream, "ccs.search.web-7.ranking"},
		{cuecast.ReportStream, "cc.search.v.junk"},
		{"CUECAST_AUDIT", "ccs.payments.web-7.checkout"},
		{"KV_cuecast-rollouts", "cc.payments.p.all.checkout"},
	} {
		name := fmt.Sprintf("evil%d", i)
		body := fmt.Sprintf(`{"stream_name":%q,"config":{"name":%q,"deliver_subject":%q,"ack_policy":"none","deliver_policy":"all"}}`, c.stream, name, c.deliver)
		as = append(as,
			attack{pub: "$JS.API.CONSUMER.CREATE." + c.stream + "." + name, reply: "_INBOX.attack", body: body, allowed: true},
			attack{pub: "$JS.API.CONSUMER.CREATE." + c.stream, reply: "_INBOX.attack", body: body, allowed: true},
		)
	}
	return as
}

// refused waits for the server's permissions violation naming subject and
// reports a missing one as a test error.
func (a asyncErrs) refused(t *testing.T, what, subject string) {
	t.Helper()
	// A server maps its own domain's API ($JS.<domain>.API.>) onto $JS.API.>
	// before it checks permissions, and names the mapped subject.
	mapped := subject
	if rest, ok := strings.CutPrefix(subject, "$JS."); ok && !strings.HasPrefix(rest, "API.") {
		if _, api, ok := strings.Cut(rest, ".API."); ok {
			mapped = "$JS.API." + api
		}
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-a:
			if errors.Is(err, nats.ErrPermissionViolation) && (strings.Contains(err.Error(), `"`+subject+`"`) || strings.Contains(err.Error(), `"`+mapped+`"`)) {
				return
			}
			t.Logf("%s: other async error: %v", what, err)
		case <-deadline:
			t.Errorf("%s: not refused (no permissions violation for %s)", what, subject)
			return
		}
	}
}

// suiteTree is a hub ▶ regional leaf ▶ node tree holding every store: the
// versions and pointers of two namespaces, their mirrors in both lower
// domains, reports, the rollout bucket and the audit stream.
type suiteTree struct {
	*natstest.Tree
	servers []*natstest.TreeServer // hub, region, node
	domains []string
	dist    *nats.Conn
	js      jetstream.JetStream
}

// forEachSuiteMode runs f on a tree with passwords, a tree with .creds
// (operator mode) and serve's standalone secure server, each a subtest.
// distributor is serve's distributor on the suite's hub, with no
// heartbeat of its own during the test.
func (st *suiteTree) distributor(t *testing.T) *distributor.Distributor {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	d, err := distributor.New(ctx, st.dist, distributor.Options{Heartbeat: time.Hour})
	if err != nil {
		t.Fatalf("distributor: %v", err)
	}
	return d
}

func forEachSuiteMode(t *testing.T, f func(t *testing.T, st *suiteTree)) {
	for _, auth := range []string{"password", "creds", "standalone"} {
		t.Run(auth, func(t *testing.T) {
			if auth == "standalone" {
				f(t, startSuiteStandalone(t))
				return
			}
			f(t, startSuiteTree(t, auth == "creds"))
		})
	}
}

func startSuiteTree(t *testing.T, jwt bool) *suiteTree {
	t.Helper()
	return startSuiteTreeWith(t, natstest.TreeOptions{JWT: jwt})
}

// startSuiteTreeWith is startSuiteTree with o's authentication and TLS.
func startSuiteTreeWith(t *testing.T, o natstest.TreeOptions) *suiteTree {
	t.Helper()
	o.Namespaces = []string{"payments", "search"}
	tr := natstest.StartTree(t, o)
	region := tr.AddLeaf(t, tr.Hub, natsconf.Leaf, "eu-west")
	region.WaitLinked(t)
	node := tr.AddLeaf(t, region, natsconf.Node, "host-1")
	node.WaitLinked(t)
	st := fillStores(t, tr, []*natstest.TreeServer{tr.Hub, region, node}, []string{"hub", "eu-west", "host-1"}, tr.Mirrors)
	// The hub's fan-out account too.
	st.domains = append(st.domains, "fanout")
	return st
}

// startSuiteStandalone is serve's embedded server as `serve --secure`
// configures it: the Standalone level, its mirrors in its own domain.
func startSuiteStandalone(t *testing.T) *suiteTree {
	t.Helper()
	tr := &natstest.Tree{Passwords: map[string]string{}, Namespaces: []string{"payments", "search"}}
	spec := natsconf.Spec{Level: natsconf.Standalone, Name: "cuecast", Listen: "127.0.0.1:-1", Namespaces: tr.Namespaces}
	for _, u := range spec.Users() {
		tr.Passwords[u] = "pw-" + u
	}
	srv := tr.StartServer(t, spec)
	tr.Hub = srv
	mirrors := func(t testing.TB) {
		js, err := jetstream.NewWithDomain(srv.Connect(t, natsconf.DistributorUser), natsconf.HubDomain)
		if err != nil {
			t.Fatal(err)
		}
		spec := natsconf.MirrorSpec{Upstream: natsconf.HubDomain, FromHub: true, Namespaces: tr.Namespaces, NoRePublish: true}
		if err := natsconf.Mirrors(context.Background(), js, spec); err != nil {
			t.Fatalf("mirrors: %v", err)
		}
		// A mirror answering CUECAST's direct gets would answer reads of
		// other namespaces with "not found".
		for _, ns := range tr.Namespaces {
			m, err := js.Stream(context.Background(), natsconf.MirrorStream(ns))
			if err != nil {
				t.Fatal(err)
			}
			if m.CachedInfo().Config.MirrorDirect {
				t.Errorf("%s joined CUECAST's direct gets", natsconf.MirrorStream(ns))
			}
		}
	}
	return fillStores(t, tr, []*natstest.TreeServer{srv}, []string{"hub"}, mirrors)
}

// fillStores creates and fills every store as the distributor: versions
// and pointers of two namespaces and their mirrors, a report, a rollout
// record and an audit entry.
func fillStores(t *testing.T, tr *natstest.Tree, servers []*natstest.TreeServer, domains []string, mirrors func(testing.TB)) *suiteTree {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc := tr.Hub.Connect(t, natsconf.DistributorUser)
	d, err := distributor.New(ctx, nc, distributor.Options{Heartbeat: time.Hour})
	if err != nil {
		t.Fatalf("new distributor: %v", err)
	}
	mirrors(t)
	publish(t, d, "search/ranking", 1, `{"boost":2}`)
	publish(t, d, checkout, 1, `{"v":1}`)
	if _, err := rollout.New(ctx, nc, d, nil, rollout.Options{}); err != nil {
		t.Fatalf("open rollout state: %v", err)
	}
	js := natstest.JetStream(t, nc)
	if _, err := js.Publish(ctx, "$KV.cuecast-rollouts.payments.checkout", []byte(`{"config":"payments/checkout"}`)); err != nil {
		t.Fatalf("rollout record: %v", err)
	}
	if _, err := js.Publish(ctx, "cca.payments.checkout", []byte(`{"action":"halt"}`)); err != nil {
		t.Fatalf("audit entry: %v", err)
	}
	// The tailer's cursors, as serve's tailer keeps them (tailer.openStore):
	// the stores compared before and after every attack hold it too.
	tkv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: tailer.Bucket, History: 5, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatalf("tailer bucket: %v", err)
	}
	if _, err := tkv.Put(ctx, "cursor.default", []byte(`{"cursor":"3f2a9c1"}`)); err != nil {
		t.Fatalf("tailer cursor: %v", err)
	}
	request(t, nc, "ccs.search.web-1.ranking", []byte(`{"instance":"web-1","config":"search/ranking","healthy":true}`))
	st := &suiteTree{Tree: tr, servers: servers, domains: domains, dist: nc, js: js}
	for _, ns := range []string{"payments", "search"} {
		hub, err := js.Stream(ctx, natsconf.Stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := hub.Info(ctx, jetstream.WithSubjectFilter("cc."+ns+".>"))
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		for _, n := range info.State.Subjects {
			want += n
		}
		for _, dom := range domains[min(1, len(domains)-1):] {
			poll.Until(t, dom+" mirror of "+ns+" caught up", poll.Patience, func() (bool, string) {
				got := streamState(t, nc, dom, natsconf.MirrorStream(ns))
				return got.Msgs == want, fmt.Sprintf("%d messages, want %d", got.Msgs, want)
			})
		}
	}
	return st
}

// reportsLast is the hub's last report sequence.
func (st *suiteTree) reportsLast(t *testing.T) uint64 {
	t.Helper()
	return streamState(t, st.dist, "hub", cuecast.ReportStream).Last
}

// waitReports waits until the hub's report stream's last sequence is at
// least want (what says which reports, for the failure).
func (st *suiteTree) waitReports(t *testing.T, what string, want uint64) {
	t.Helper()
	poll.Until(t, what, poll.Patience, func() (bool, string) {
		got := st.reportsLast(t)
		return got >= want, fmt.Sprintf("last report %d, want %d", got, want)
	})
}

// listAll drains a JetStream lister's channel (Info), then takes its error.
func listAll[T any](infos <-chan T, err func() error) ([]T, error) {
	var all []T
	for i := range infos {
		all = append(all, i)
	}
	return all, err()
}

// run makes every attempt of as on nc, each a permissions violation unless
// allowed, then barrier (which returns how many reports it and the allowed
// attempts legitimately stored), and compares the stores before and after.
func (st *suiteTree) run(t *testing.T, nc *nats.Conn, errs asyncErrs, as []attack, barrier func(before uint64) uint64) {
	t.Helper()
	before := snapshot(t, st.dist, st.domains)
	for _, a := range as {
		if a.sub != "" {
			if _, err := nc.SubscribeSync(a.sub); err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			errs.refused(t, a.String(), a.sub)
			continue
		}
		m := nats.NewMsg(a.pub)
		m.Reply, m.Data = a.reply, []byte(a.body)
		if a.header != nil {
			m.Header = a.header
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if !a.allowed {
			errs.refused(t, a.String(), a.pub)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	key := "hub/" + cuecast.ReportStream
	r := before[key]
	r.Last = barrier(r.Last)
	before[key] = r
	after := snapshot(t, st.dist, st.domains)
	for _, d := range before.diff(after) {
		t.Errorf("store changed by the attacks: %s", d)
	}
}

// connectInstance logs in with the .creds of one instance of ns.
func connectInstance(t *testing.T, st *suiteTree, srv *natstest.TreeServer, ns, instance string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	b, err := st.Keys.InstanceCreds(ns, instance)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "instance.creds")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	nc, err := natstest.Dial(ctx, srv.ClientURL(), append([]nats.Option{nats.UserCredentials(path), nats.CustomInboxPrefix(natsconf.InstanceInboxPrefix(ns, instance))}, opts...)...)
	if err != nil {
		t.Fatalf("connect as %s: %v", natsconf.InstanceUser(ns, instance), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestPermissionSuite: every role, on every level of the tree, tries every
// subscription, publish and request it should not make, including requests
// it may make whose reply subject aims at a store, and the stores of every
// domain are unchanged.
func TestPermissionSuite(t *testing.T) {
	forEachSuiteMode(t, func(t *testing.T, st *suiteTree) {
		type role struct{ own, other, instance string }
		roles := []role{{"payments", "search", ""}, {"search", "payments", ""}}
		if st.Keys != nil {
			// An instance's own credential (nats-config user).
			roles = append(roles, role{"payments", "search", "web-1"})
		}
		for _, role := range roles {
			for _, srv := range st.servers {
				user := natsconf.ServiceUser(role.own)
				if role.instance != "" {
					user = natsconf.InstanceUser(role.own, role.instance)
				}
				t.Run(user+"@"+srv.Spec.Name, func(t *testing.T) {
					errs := asyncErrs(make(chan error, 1024))
					var nc *nats.Conn
					as := serviceAttacks(role.own, role.other)
					sentinel := "ccs." + role.own + ".sentinel.checkout"
					if role.instance == "" {
						nc = srv.Connect(t, user, errs.option(), nats.PermissionErrOnSubscribe(true))
					} else {
						nc = connectInstance(t, st, srv, role.own, role.instance, errs.option(), nats.PermissionErrOnSubscribe(true))
						sentinel = "ccs." + role.own + "." + role.instance + ".sentinel"
						as = append(as,
							attack{pub: "ccs." + role.own + ".web-2.checkout", body: `{}`},
							attack{pub: "ccs." + role.own + ".sentinel.checkout", body: `{}`},
						)
					}
					reports := 0
					for _, a := range as {
						if a.allowed && strings.HasPrefix(a.pub, "ccs.") {
							reports++
						}
					}
					st.run(t, nc, errs, as, func(before uint64) uint64 {
						// The barrier: the service's own reports and a
						// last one reach the hub's report stream, after
						// every reply the attempts drew.
						if err := nc.Publish(sentinel, []byte(`{}`)); err != nil {
							t.Fatal(err)
						}
						want := before + uint64(reports) + 1
						st.waitReports(t, "the reports at the hub", want)
						return want
					})
				})
			}
		}
		for _, srv := range st.servers {
			t.Run("operator@"+srv.Spec.Name, func(t *testing.T) {
				errs := asyncErrs(make(chan error, 1024))
				nc := srv.Connect(t, natsconf.OperatorUser, errs.option(), nats.PermissionErrOnSubscribe(true))
				// Interest in what a consumer it created would deliver:
				// it follows reports and updates live.
				for _, subj := range []string{"ccs.>", "ccr.>"} {
					if _, err := nc.Subscribe(subj, func(*nats.Msg) {}); err != nil {
						t.Fatal(err)
					}
				}
				st.run(t, nc, errs, operatorAttacks(st.domains), func(before uint64) uint64 {
					// The barrier: an answered direct get of the hub's
					// stream after the attempts, and no consumer on any
					// stream of the hub. Operators read from the hub:
					// below it, the hub's streams answer only their
					// domain's API ($JS.hub.API), which the operator's
					// account does not import, so there the barrier is
					// a request through the server's link to the hub,
					// which forwards in order what reaches it.
					if srv == st.Hub {
						m := request(t, nc, "$JS.API.DIRECT.GET."+natsconf.Stream+".cc.payments.v.checkout", nil)
						if got := m.Header.Get("Nats-Subject"); got != "cc.payments.v.checkout" {
							t.Errorf("direct get of the hub's stream: subject %q, status %q", got, m.Header.Get("Status"))
						}
					} else {
						if err := nc.Flush(); err != nil {
							t.Fatal(err)
						}
						// The one JetStream request a link may send up
						// (natsconf.LeafAllowed); an empty one is answered
						// with an error.
						m := request(t, srv.Connect(t, natsconf.DistributorUser), "$JS.hub.API.CONSUMER.CREATE."+cuecast.FanoutStream, []byte(`{}`))
						if !strings.Contains(string(m.Data), `consumer_create_response`) {
							t.Fatalf("a request to the hub through the link after the operator's attempts: %s", m.Data)
						}
					}
					for _, name := range []string{natsconf.Stream, cuecast.ReportStream, "KV_cuecast-rollouts", "CUECAST_AUDIT"} {
						s, err := st.js.Stream(t.Context(), name)
						if err != nil {
							t.Fatal(err)
						}
						for c := range s.ListConsumers(t.Context()).Info() {
							t.Errorf("consumer %s on %s (deliver subject %q) after the operator's attempts", c.Name, name, c.Config.DeliverSubject)
							_ = s.DeleteConsumer(t.Context(), c.Name)
						}
					}
					return before
				})
			})
		}
	})
}

// TestOperatorSteersWithoutManagingStreams: the operator's credentials open
// the distributor, the rollout state and the tailer's state read-only (as
// every CLI command does), from the operator's account, which reaches the
// streams by direct get only: status, versions, reports, rollout records,
// progress, the audit trail and the tailer's cursor all read, and a
// rollback is recorded, which only serve's controller carries out, while
// the suite above proves they change no stream's configuration.
func TestOperatorSteersWithoutManagingStreams(t *testing.T) {
	forEachSuiteMode(t, func(t *testing.T, st *suiteTree) {
		testOperatorSteers(t, st)
	})
}

func testOperatorSteers(t *testing.T, st *suiteTree) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tkv, err := st.js.KeyValue(ctx, tailer.Bucket) // fillStores made it
	if err != nil {
		t.Fatalf("tailer bucket: %v", err)
	}
	if _, err := tkv.Put(ctx, "cursor.default", []byte(`{"repo":"r","branch":"main","cursor":"c0ffee"}`)); err != nil {
		t.Fatalf("tailer state: %v", err)
	}
	nc := st.Hub.Connect(t, natsconf.OperatorUser)
	d, err := distributor.Open(ctx, nc, distributor.Options{})
	if err != nil {
		t.Fatalf("open distributor as operator: %v", err)
	}
	ctl, err := rollout.Open(ctx, nc, d, nil, rollout.Options{AwaitTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("open rollout state as operator: %v", err)
	}
	before := streamState(t, st.dist, "hub", "CUECAST_AUDIT")
	_, err = ctl.Rollback(ctx, checkout, 1, rollout.Action{Actor: "oncall", Reason: "test"})
	if !errors.Is(err, rollout.ErrNotCarriedOut) {
		t.Fatalf("rollback as operator: got %v, want it recorded and awaiting serve", err)
	}
	rec, err := ctl.Record(ctx, checkout)
	if err != nil || rec.Pin == nil || rec.Pin.Version != 1 {
		t.Fatalf("record after the rollback: %+v, %v", rec, err)
	}
	if got := streamState(t, st.dist, "hub", "CUECAST_AUDIT"); got.Last != before.Last+1 || got.Msgs != before.Msgs+1 {
		t.Errorf("audit stream %+v after the rollback, want one entry more than %+v", got, before)
	}
	// Every read of the operator's commands.
	if recs, err := ctl.Records(ctx); err != nil || len(recs) != 1 || recs[0].Config != checkout {
		t.Errorf("rollout records as operator: %+v, %v; want %s's", recs, err, checkout)
	}
	if _, err := ctl.Progress(ctx, checkout); err != nil && !errors.Is(err, rollout.ErrNoRollout) {
		t.Errorf("progress as operator: %v", err)
	}
	audit, err := ctl.Audit(ctx, "")
	if err != nil || len(audit) == 0 || audit[len(audit)-1].Action != "rollback" || audit[len(audit)-1].Actor != "oncall" {
		t.Errorf("audit as operator: %+v, %v; want oncall's rollback last", audit, err)
	}
	if cfgs, err := d.Configs(ctx); err != nil || len(cfgs) != 2 {
		t.Errorf("configs as operator: %v, %v; want 2", cfgs, err)
	}
	if s, err := d.Status(ctx); err != nil || len(s) != 2 {
		t.Errorf("status as operator: %+v, %v; want 2 configs", s, err)
	}
	if vs, err := d.Versions(ctx, checkout); err != nil || len(vs) != 1 {
		t.Errorf("versions as operator: %+v, %v; want 1", vs, err)
	}
	if rs, err := d.Reports(ctx, ""); err != nil || len(rs) != 1 {
		t.Errorf("reports as operator: %+v, %v; want search's one", rs, err)
	}
	js := natstest.JetStream(t, nc)
	if ts, err := tailer.LoadState(ctx, distributor.NewDirectStream(js.Conn(), tailer.StateStream), "default"); err != nil || ts.Cursor != "c0ffee" {
		t.Errorf("tailer state as operator: %+v, %v; want cursor c0ffee", ts, err)
	}
}

// TestCompromisedNodeCannotWriteUpstream: whoever controls a node server
// (its configuration, hence any local user) publishes through the node's
// leafnode link into the level above: versions, pointers, audit entries,
// rollout records, stream administration and direct gets (whose answers a
// reply subject could aim at a stream's API) are refused there, and no
// store of the tree changes.
func TestCompromisedNodeCannotWriteUpstream(t *testing.T) {
	for _, auth := range []string{"password", "creds"} {
		t.Run(auth, func(t *testing.T) { testCompromisedNode(t, startSuiteTree(t, auth == "creds")) })
	}
}

func testCompromisedNode(t *testing.T, st *suiteTree) {
	// A version whose content is a consumer's creation in CUECAST
	// delivering every version onto the audit stream's subjects: what a
	// committer could write, and a compromised link could then try to
	// have delivered onto the fan-out account's import of that API.
	d := st.distributor(t)
	publish(t, d, checkout, 2, `{"stream_name":"CUECAST","config":{"name":"evil","deliver_subject":"cca.search.ranking","ack_policy":"none","deliver_policy":"all"}}`)
	for _, dom := range []string{"eu-west", "host-1"} {
		poll.Until(t, dom+" mirror of payments caught up", poll.Patience, func() (bool, string) {
			got := streamState(t, st.dist, dom, natsconf.MirrorStream("payments"))
			return got.Last >= streamState(t, st.dist, "hub", natsconf.Stream).Last, fmt.Sprintf("last %d", got.Last)
		})
	}
	node := st.servers[2]
	// The node's own distributor user may do anything on the node.
	nc := node.Connect(t, natsconf.DistributorUser)
	before := snapshot(t, st.dist, st.domains)
	for _, subj := range []string{
		"cc.search.p.all.ranking", "cc.payments.v.checkout", "cca.payments.checkout", "$KV.cuecast-rollouts.payments.checkout",
		"$JS.hub.API.STREAM.PURGE.CUECAST", "$JS.hub.API.STREAM.DELETE.CUECAST_AUDIT", "$JS.eu-west.API.STREAM.PURGE.CUECAST_search",
		"$JS.hub.API.STREAM.UPDATE.CUECAST_AUDIT",
	} {
		if err := nc.Publish(subj, []byte(`{"name":"CUECAST_AUDIT","max_msgs":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	// Direct gets upstream, with the reply aimed at a stream's API or a
	// store: the stream publishes its answer on the reply subject in the
	// upstream account, where a JetStream API subject executes it (a reply
	// $JS.API.STREAM.PURGE.CUECAST purged the hub's versions and pointers,
	// one aimed at a region's API its mirror). The levels below never need
	// a direct get upstream (mirrors follow by consumer, services read
	// their own level's mirror), so the link may not send one.
	for _, reply := range replyTargets("payments", "search") {
		for _, get := range []string{"$JS.hub.API.DIRECT.GET.CUECAST", "$JS.hub.API.DIRECT.GET.CUECAST_REPORTS", "$JS.hub.API.DIRECT.GET.CUECAST_AUDIT", "$JS.eu-west.API.DIRECT.GET.CUECAST_payments"} {
			for _, body := range []string{`{"seq":1}`, `{"seq":1,"batch":10}`} {
				if err := nc.PublishRequest(get, reply, []byte(body)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := nc.PublishRequest("$JS.hub.API.DIRECT.GET.CUECAST.cc.payments.v.checkout", reply, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The compromised link: requests the link may make (management reads,
	// reports, consumers for the mirrors) with the reply aimed at a store,
	// and consumers upstream delivering on one. JetStream publishes both
	// in the account the link is bound to upstream.
	linkAttacks(t, nc, st)
	// The barrier: a report after them reaches the hub (reports may go up).
	last := st.reportsLast(t)
	if err := nc.Publish("ccs.payments.barrier.checkout", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	st.waitReports(t, "the barrier report at the hub", last+1)
	key := "hub/" + cuecast.ReportStream
	r := before[key]
	r.Last = last + 1
	before[key] = r
	for _, d := range before.diff(snapshot(t, st.dist, st.domains)) {
		t.Errorf("store changed from a node: %s", d)
	}
}

// upstreamStreams are the streams a compromised node's link may name in a
// request at the hub and at the region.
var upstreamStreams = map[string][]string{
	"$JS.hub.API":     {natsconf.Stream, cuecast.FanoutStream, cuecast.ReportStream, "KV_cuecast-rollouts", "CUECAST_AUDIT"},
	"$JS.eu-west.API": {natsconf.MirrorStream("payments"), natsconf.MirrorStream("search")},
}

// linkAttacks makes, from a node's local connection nc and so through its
// leafnode link, every request the link may send up with its reply aimed
// at a store (the stream information, the list of streams, a report, whose
// acknowledgement answers, a consumer's creation), and creates consumers
// at the hub and at the region delivering on a store's subject, with a
// control consumer after them on the same stream delivering to nc, which
// shows when the others have delivered what they would. Reports aimed at
// ccs. are left out: the link may send reports of any namespace itself
// (docs/SECURITY.md).
func linkAttacks(t *testing.T, nc *nats.Conn, st *suiteTree) {
	t.Helper()
	var targets []string
	for _, r := range replyTargets("payments", "search") {
		if !strings.HasPrefix(r, "ccs.") {
			targets = append(targets, r)
		}
	}
	// Interest in the control consumers' deliveries first, so that it has
	// reached the hub when they are created.
	var delivered atomic.Int64
	for _, streams := range upstreamStreams {
		for _, s := range streams {
			if _, err := nc.Subscribe("probe.control."+s, func(*nats.Msg) { delivered.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	targets = append(targets, "$JS.hub.API.STREAM.PURGE.CUECAST_FANOUT", "$JS.eu-west.API.STREAM.PURGE.CUECAST_search",
		"cuecast.fanout.api.CONSUMER.CREATE.CUECAST", "cuecast.fanout.api.CONSUMER.CREATE.CUECAST.evil", "$JS.FC.CUECAST.x.y")
	// Interest in every target from below, as a compromised host can
	// have: a consumer delivers only where someone listens. (Not in the
	// JetStream API's subjects: a node's own subscription there takes its
	// requests to the upstream domains off the link, which stops the
	// suite, not an attack.)
	for _, s := range targets {
		if strings.HasPrefix(s, "$JS.") && !strings.HasPrefix(s, "$JS.FC.") {
			continue
		}
		if _, err := nc.Subscribe(s, func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
	}
	for _, reply := range targets {
		for api, streams := range upstreamStreams {
			for _, s := range streams {
				for _, subj := range []string{api + ".STREAM.INFO." + s, api + ".CONSUMER.CREATE." + s + ".evil-r", api + ".CONSUMER.INFO." + s + ".none"} {
					body := fmt.Sprintf(`{"stream_name":%q,"config":{"name":"evil-r","deliver_subject":"cc.search.v.junk","ack_policy":"none"}}`, s)
					if err := nc.PublishRequest(subj, reply, []byte(body)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, subj := range []string{api + ".STREAM.NAMES", api + ".STREAM.LIST", api + ".INFO"} {
				if err := nc.PublishRequest(subj, reply, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := nc.PublishRequest("ccs.payments.web-1.checkout", reply, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	type control struct{ api, stream string }
	var controls []control
	for api, streams := range upstreamStreams {
		for _, s := range streams {
			created := 0
			for i, deliver := range targets {
				name := fmt.Sprintf("evil%d", i)
				body := fmt.Sprintf(`{"stream_name":%q,"config":{"name":%q,"deliver_subject":%q,"ack_policy":"none","deliver_policy":"all"}}`, s, name, deliver)
				m, err := nc.Request(api+".CONSUMER.CREATE."+s+"."+name, []byte(body), 5*time.Second)
				if err == nil && !strings.Contains(string(m.Data), `"error"`) {
					created++
				}
			}
			if created == 0 {
				continue
			}
			body := fmt.Sprintf(`{"stream_name":%q,"config":{"name":"control","deliver_subject":"probe.control.%s","ack_policy":"none","deliver_policy":"all"}}`, s, s)
			m, err := nc.Request(api+".CONSUMER.CREATE."+s+".control", []byte(body), 5*time.Second)
			if err != nil || strings.Contains(string(m.Data), `"error"`) {
				t.Fatalf("control consumer on %s: %v", s, err)
			}
			controls = append(controls, control{api, s})
		}
	}
	var want int64
	for _, c := range controls {
		domain := "fanout"
		if c.api != "$JS.hub.API" {
			domain = "eu-west"
		}
		want += int64(streamState(t, st.dist, domain, c.stream).Msgs)
	}
	poll.Until(t, "the control consumers delivered their streams", poll.Patience, func() (bool, string) {
		n := delivered.Load()
		return n >= want, fmt.Sprintf("%d of %d messages", n, want)
	})
}
