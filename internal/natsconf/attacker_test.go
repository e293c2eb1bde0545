package natsconf_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// attacker is a nats-server of a compromised host's own, started with
// exactly what that host holds: the leafnode credential of its link (the
// leaf password or leaf.creds, and the tree's CA). Its configuration is the
// attacker's, not one natsconf generates: one leafnode remote to the region
// the host's node links to, and one straight to the hub (the same
// credential logs in there), each bound to an account of its own with
// JetStream, so that it can also run streams and consumers of its own.
type attacker struct {
	*natstest.Server
	// region and hub are local connections whose traffic crosses the link
	// to the region, respectively to the hub.
	region, hub *nats.Conn
	st          *suiteTree

	mu sync.Mutex
	// latest is the latest delivery of each mirror's consumer the
	// attacker heard, by stream (one mirror each).
	latest map[string]delivery
}

// The attacker's own accounts and JetStream domain.
const (
	attackerRegion = "REGION"
	attackerHub    = "HUB"
	attackerDomain = "attacker"
)

// startAttacker starts the attacker's server linked to the region (the
// tree's second server) and to the hub, and waits until both links are up.
func startAttacker(t *testing.T, st *suiteTree) *attacker {
	t.Helper()
	dir := t.TempDir()
	remote := func(addr, account string) string {
		u := url.URL{Scheme: "nats-leaf", Host: addr}
		if st.TLS != nil {
			u.Scheme = "tls"
		}
		var extra []string
		if st.Keys != nil {
			extra = append(extra, fmt.Sprintf("credentials: %q", st.Creds(t, natsconf.LeafUser)))
		} else {
			u.User = url.UserPassword(natsconf.LeafUser, st.Passwords[natsconf.LeafUser])
		}
		if tl := st.TLS; tl != nil {
			extra = append(extra, fmt.Sprintf("tls { ca_file: %q, cert_file: %q, key_file: %q }", tl.CA, tl.Cert, tl.Key))
		}
		return fmt.Sprintf("{ urls: [%q], account: %q, %s }", u.String(), account, strings.Join(extra, ", "))
	}
	conf := fmt.Sprintf(`server_name: "evil"
host: "127.0.0.1"
port: -1
jetstream { store_dir: %q, domain: %q }
accounts {
  %s { jetstream: enabled, users: [{user: "r", password: "r"}] }
  %s { jetstream: enabled, users: [{user: "h", password: "h"}] }
}
leafnodes {
  remotes = [
    %s
    %s
  ]
}
`, filepath.Join(dir, "js"), attackerDomain, attackerRegion, attackerHub,
		remote(st.servers[1].LeafAddr, attackerRegion), remote(st.Hub.LeafAddr, attackerHub))
	a := &attacker{Server: natstest.StartConfFile(t, dir, "attacker.conf", conf), st: st}
	s := a.Server.Server
	poll.Until(t, "the attacker linked to the region and the hub", poll.Patience, func() (bool, string) {
		n := s.NumLeafNodes()
		return n == 2, fmt.Sprintf("%d leafnode connections", n)
	})
	a.region = a.Connect(t, nats.UserInfo("r", "r"))
	a.hub = a.Connect(t, nats.UserInfo("h", "h"))
	a.listen(t)
	return a
}

// listen subscribes on both links to the mirrors' deliveries ($JS.M.>, and
// nothing else: interest in more draws the tree's traffic across the
// links) for the whole test, recording the latest of each mirror's
// consumer, and waits until the region and the hub know of the interest
// (a delivery before that is not heard).
func (a *attacker) listen(t *testing.T) {
	t.Helper()
	const deliveries = "$JS.M.>"
	a.latest = map[string]delivery{}
	for _, nc := range []*nats.Conn{a.region, a.hub} {
		if _, err := nc.Subscribe(deliveries, func(m *nats.Msg) {
			d, ok := parseAck(m.Reply)
			if !ok {
				return
			}
			// Either link may hear a delivery; each consumer is reached
			// through the link to its own domain.
			d.side, d.api = a.region, "$JS.eu-west.API"
			if d.stream == cuecast.FanoutStream {
				d.side, d.api = a.hub, "$JS.hub.API"
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if d.sseq >= a.latest[d.stream].sseq {
				a.latest[d.stream] = d
			}
		}); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, up := range []*natstest.TreeServer{a.st.servers[1], a.st.Hub} {
		poll.Until(t, up.Spec.Name+" knowing the attacker's interest in "+deliveries, poll.Patience, func() (bool, string) {
			lz, err := up.Leafz(&server.LeafzOptions{Subscriptions: true})
			if err != nil {
				return false, err.Error()
			}
			for _, l := range lz.Leafs {
				if l.Name == "evil" && slices.Contains(l.Subs, deliveries) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d leafnode connections, none of evil's with it", len(lz.Leafs))
		})
	}
}

// delivery is one JetStream delivery the attacker overheard: a consumer's
// message, whose reply ($JS.ACK.<stream>.<consumer>.…) names the consumer.
type delivery struct {
	// side is the attacker's connection to the consumer's domain, api
	// that domain's JetStream API.
	side                *nats.Conn
	api                 string
	stream, name        string
	sseq, dseq, pending uint64
}

// parseAck reads a delivery's acknowledgement subject,
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<time>.<pending>,
// as nats-server writes it (and a link sees it, with @<subject> after it).
func parseAck(reply string) (delivery, bool) {
	rest, ok := strings.CutPrefix(reply, "$JS.ACK.")
	if !ok {
		return delivery{}, false
	}
	rest, _, _ = strings.Cut(rest, "@")
	tok := strings.Split(rest, ".")
	if len(tok) < 7 {
		return delivery{}, false
	}
	d := delivery{stream: tok[0], name: tok[1]}
	for i, n := range map[int]*uint64{3: &d.sseq, 4: &d.dseq, 6: &d.pending} {
		v, err := strconv.ParseUint(tok[i], 10, 64)
		if err != nil {
			return delivery{}, false
		}
		*n = v
	}
	return d, true
}

// overhear publishes a commit and returns the latest delivery of it the
// attacker heard from each mirror's consumer (the hub's fan-out mirror's
// and host-1's at the region), once every payments mirror stored it (what
// is heard on the wire is not stored yet, and a snapshot taken in between
// would take the mirror storing it for an attack's doing). A mirror
// re-creates its consumer under a new name when it misses its heartbeats
// (a loaded machine, or an attack that may disturb it), and the server
// lists no mirror's consumer, so a test overhears again whenever it needs
// the names now, rather than keeping them.
func (a *attacker) overhear(t *testing.T, d *distributor.Distributor, version uint64) []delivery {
	t.Helper()
	publish(t, d, checkout, version, fmt.Sprintf(`{"v":%d}`, version))
	hubLast := streamState(t, a.st.dist, "hub", natsconf.Stream).Last
	poll.Until(t, "the attacker overhearing the commit's deliveries by the mirrors' consumers at the hub and the region", poll.Patience, func() (bool, string) {
		a.mu.Lock()
		defer a.mu.Unlock()
		hub, region := a.latest[cuecast.FanoutStream].sseq, a.latest[natsconf.MirrorStream("payments")].sseq
		return hub >= hubLast && region >= hubLast, fmt.Sprintf("heard sequence %d at the hub, %d at the region, of %d", hub, region, hubLast)
	})
	for dom, stream := range map[string]string{"fanout": cuecast.FanoutStream, "eu-west": natsconf.MirrorStream("payments"), "host-1": natsconf.MirrorStream("payments")} {
		poll.Until(t, dom+"'s mirror storing the commit", poll.Patience, func() (bool, string) {
			got := streamState(t, a.st.dist, dom, stream).Last
			return got >= hubLast, fmt.Sprintf("last %d of %d", got, hubLast)
		})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []delivery{a.latest[cuecast.FanoutStream], a.latest[natsconf.MirrorStream("payments")]}
	slices.SortFunc(out, func(x, y delivery) int { return strings.Compare(x.stream+x.name, y.stream+y.name) })
	return out
}

// consumerSnap is what the suite compares of one consumer: its
// configuration and whether it is paused.
type consumerSnap struct {
	Config string
	Paused bool
}

// consumers reads, as the distributor, every consumer of every stream of
// the tree's domains and the mirrors' consumers the attacker heard (the
// server lists no mirror's consumer), keyed domain/stream/consumer.
func consumers(t *testing.T, st *suiteTree, heard []delivery) map[string]consumerSnap {
	t.Helper()
	out := map[string]consumerSnap{}
	add := func(dom, stream string, c *jetstream.ConsumerInfo) {
		cfg, err := json.Marshal(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		out[dom+"/"+stream+"/"+c.Name] = consumerSnap{Config: string(cfg), Paused: c.Paused}
	}
	for _, dom := range st.domains {
		js := domainJS(t, st, dom)
		names := ask(t, "streams of "+dom, func(ctx context.Context) ([]string, error) {
			var names []string
			l := js.StreamNames(ctx)
			for n := range l.Name() {
				names = append(names, n)
			}
			return names, l.Err()
		})
		for _, name := range names {
			cs := ask(t, fmt.Sprintf("consumers of %s in %s", name, dom), func(ctx context.Context) ([]*jetstream.ConsumerInfo, error) {
				s, err := js.Stream(ctx, name)
				if err != nil {
					return nil, err
				}
				l := s.ListConsumers(ctx)
				return listAll(l.Info(), l.Err)
			})
			for _, c := range cs {
				add(dom, name, c)
			}
		}
	}
	for _, h := range heard {
		dom := "eu-west"
		if h.stream == cuecast.FanoutStream {
			dom = "fanout"
		}
		// A mirror's consumer is a push consumer, which jetstream's
		// Consumer does not open.
		api := "$JS." + dom + ".API"
		if dom == "fanout" {
			api = cuecast.FanoutAdminPrefix
		}
		info := ask(t, fmt.Sprintf("consumer %s of %s in %s", h.name, h.stream, dom), func(ctx context.Context) (*jetstream.ConsumerInfo, error) {
			return consumerInfo(ctx, st.dist, api, h.stream, h.name)
		})
		if info != nil {
			add(dom, h.stream, info)
		}
		// Gone (nil): consumersDiff says so.
	}
	return out
}

// consumerInfo asks api (a JetStream API prefix) for a consumer's
// information: nil when the consumer does not exist, an error wrapping
// jetstream.APIError when JetStream answers with another error.
func consumerInfo(ctx context.Context, nc *nats.Conn, api, stream, name string) (*jetstream.ConsumerInfo, error) {
	m, err := nc.RequestWithContext(ctx, api+".CONSUMER.INFO."+stream+"."+name, nil)
	if err != nil {
		return nil, err
	}
	var info struct {
		jetstream.ConsumerInfo
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return nil, fmt.Errorf("consumer %s of %s: %w", name, stream, err)
	}
	switch {
	case info.Error == nil:
		return &info.ConsumerInfo, nil
	case info.Error.ErrorCode == jetstream.JSErrCodeConsumerNotFound:
		return nil, nil
	}
	return nil, fmt.Errorf("consumer %s of %s: %w", name, stream, info.Error)
}

// domainJS is the distributor's JetStream of a domain of the tree ("fanout":
// the hub's fan-out account).
func domainJS(t *testing.T, st *suiteTree, dom string) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.NewWithDomain(st.dist, dom)
	if dom == "fanout" {
		js, err = jetstream.NewWithAPIPrefix(st.dist, cuecast.FanoutAdminPrefix)
	}
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// consumersDiff lists the consumers that are gone, changed or paused.
func consumersDiff(before, after map[string]consumerSnap) []string {
	var d []string
	for k, v := range before {
		w, ok := after[k]
		switch {
		case !ok:
			d = append(d, k+": deleted")
		case v != w:
			d = append(d, fmt.Sprintf("%s: before %+v, after %+v", k, v, w))
		}
	}
	for k, w := range after {
		if w.Paused {
			d = append(d, k+": paused")
		}
	}
	slices.Sort(d)
	return d
}

// recreated reports whether every change in diffs is a heard mirror
// consumer gone, and overhearing a new commit finds each of those mirrors
// delivering through a consumer of another name: the mirror re-created it.
func (a *attacker) recreated(t *testing.T, d *distributor.Distributor, version *uint64, heard []delivery, diffs []string) bool {
	t.Helper()
	gone := map[string]bool{} // stream ▶ its consumer is gone
	for _, diff := range diffs {
		k, ok := strings.CutSuffix(diff, ": deleted")
		if !ok {
			return false
		}
		found := false
		for _, h := range heard {
			if strings.HasSuffix(k, "/"+h.stream+"/"+h.name) {
				gone[h.stream], found = true, true
			}
		}
		if !found {
			return false
		}
	}
	*version++
	for _, h := range a.overhear(t, d, *version) {
		for _, old := range heard {
			if gone[h.stream] && old.stream == h.stream && old.name == h.name {
				return false
			}
		}
	}
	return true
}

// signedDistributor is serve's distributor on the suite's hub, signing
// with treeKey as serve does, so that watchers apply what it writes.
func signedDistributor(t *testing.T, st *suiteTree) *distributor.Distributor {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d, err := distributor.New(ctx, st.dist, distributor.Options{Heartbeat: time.Hour, SigningKey: treeKey})
	if err != nil {
		t.Fatalf("distributor: %v", err)
	}
	return d
}

// victims are watchers of checkout on the hosts the attacker does not own:
// the region and the node (host-1), both on the version last published.
func victims(t *testing.T, st *suiteTree, d *distributor.Distributor, version uint64) [][]*client.Watcher {
	t.Helper()
	publish(t, d, checkout, version, fmt.Sprintf(`{"v":%d}`, version))
	var out [][]*client.Watcher
	for _, srv := range st.servers[1:] {
		ws := instances(t, srv, checkout, 1)
		waitVersion(t, "a watcher on "+srv.Spec.Name, ws, version)
		out = append(out, ws)
	}
	return out
}

// deliveryContinues is the suite's second oracle: a real commit after the
// attacks reaches the watchers on the hosts the attacker does not own.
func deliveryContinues(t *testing.T, d *distributor.Distributor, watchers [][]*client.Watcher, version uint64) {
	t.Helper()
	publish(t, d, checkout, version, fmt.Sprintf(`{"v":%d}`, version))
	for _, ws := range watchers {
		waitVersion(t, "the next commit after the attacks", ws, version)
	}
}

// consumerVerbs are the JetStream API's requests on one consumer, as
// nats-server (go.mod's version, server/jetstream_api.go) names them, each
// with a body that does harm if it is carried out. DELETE comes last: the
// mirror re-creates a deleted consumer under another name, which would
// hide what the others did.
func consumerVerbs(stream, name string) []attack {
	subj := func(pattern string) string {
		return strings.Replace(strings.Replace(pattern, "*", stream, 1), "*", name, 1)
	}
	return []attack{
		{pub: fmt.Sprintf(server.JSApiConsumerResetT, stream, name), body: `{"seq":999999}`},
		{pub: subj(server.JSApiConsumerUnpin), body: `{"group":"g"}`},
		{pub: subj(server.JSApiConsumerLeaderStepDown), body: `{}`},
		{pub: subj(server.JSApiConsumerRemovePeer), body: `{"peer":"hub"}`},
		{pub: subj(server.JSApiConsumerEvacuatePeer), body: `{}`},
		{pub: fmt.Sprintf(server.JSApiRequestNextT, stream, name), body: `{"batch":1}`},
		{pub: subj(server.JSApiConsumerInfo)},
		{pub: subj(server.JSApiDurableCreate), body: fmt.Sprintf(`{"stream_name":%q,"config":{"durable_name":%q,"deliver_subject":"evil.x","ack_policy":"none"}}`, stream, name)},
		{pub: subj(server.JSApiConsumerPause), body: `{"pause_until":"2099-01-01T00:00:00Z"}`},
		{pub: subj(server.JSApiConsumerDelete)},
	}
}

// onDomain moves a subject of the local JetStream API ($JS.API.…) to the
// API of a domain ($JS.<domain>.API.…), which is how a link reaches it.
func onDomain(api, subject string) string {
	return api + strings.TrimPrefix(subject, server.JSApiPrefix)
}

// TestCompromisedLink is the compromised-link attacker (docs/SECURITY.md,
// a compromised node or leaf host): a nats-server of the attacker's own,
// holding only what a node's host holds (the link's password or
// leaf.creds, and the CA), linked to the node's region and to the hub, and
// a leafnode connection spoken by hand with the same credential. Every
// step's oracle is the suite's: no store of any domain changed, every
// consumer keeps its configuration and runs, and a real commit afterwards
// reaches the watchers on the hosts the attacker does not own (the region
// and the node host-1).
func TestCompromisedLink(t *testing.T) {
	// Passwords without TLS, .creds with TLS: both credentials, both
	// transports, in the time of two trees.
	for _, mode := range []string{"password", "creds-tls"} {
		t.Run(mode, func(t *testing.T) {
			st := startSuiteTreeWith(t, natstest.TreeOptions{JWT: mode != "password", TLS: mode == "creds-tls"})
			d := signedDistributor(t, st)
			ws := victims(t, st, d, 2)
			a := startAttacker(t, st)
			heard := a.overhear(t, d, 3)
			for _, w := range ws {
				waitVersion(t, "the commit the attacker overheard", w, 3)
			}
			version := uint64(3)
			// check runs one attack and the oracle after it; step runs it
			// as a subtest. keeps says every consumer must keep its
			// configuration, which an attack that may make a mirror
			// re-create its consumer does not (docs/SECURITY.md). The
			// attacker overhears the mirrors' consumers' names again first
			// (heard): they are the names now, not the ones of a step ago.
			check := func(t *testing.T, keeps bool, attack func(t *testing.T)) {
				t.Helper()
				for try := 1; ; try++ {
					version++
					heard = a.overhear(t, d, version)
					before, cbefore := snapshot(t, st.dist, st.domains), consumers(t, st, heard)
					attack(t)
					a.barrier(t, st)
					for _, diff := range storesChanged(t, st, before) {
						t.Errorf("store changed by the link: %s", diff)
					}
					if !keeps {
						break
					}
					diffs := consumersDiff(cbefore, consumers(t, st, heard))
					// A mirror whose heartbeats came late (a loaded
					// machine) re-creates its consumer under a new
					// name, which one run cannot tell from the attack
					// deleting it; the attack's doing would happen
					// again, so the step runs once more on the new
					// names before it counts.
					if try == 1 && len(diffs) > 0 && a.recreated(t, d, &version, heard, diffs) {
						t.Logf("a mirror re-created its consumer during the step (%v): once more on the new names", diffs)
						continue
					}
					for _, diff := range diffs {
						t.Errorf("consumer changed by the link: %s", diff)
					}
					break
				}
				version++
				deliveryContinues(t, d, ws, version)
			}
			step := func(name string, attack func(t *testing.T)) {
				t.Run(name, func(t *testing.T) { check(t, true, attack) })
			}
			// Defect 1: the mirrors' consumers, named by the $JS.ACK
			// replies of what the attacker overheard, paused until 2099,
			// reset, deleted… at their domains; and acknowledged on their
			// $JS.ACK subjects, which nats-server lets through every
			// leafnode permission (harmless: a mirror's consumer
			// acknowledges nothing), and answered on flow control.
			step("mirror consumers", func(t *testing.T) {
				for _, h := range heard {
					for _, v := range consumerVerbs(h.stream, h.name) {
						if err := h.side.PublishRequest(onDomain(h.api, v.pub), "_INBOX.evil", []byte(v.body)); err != nil {
							t.Fatal(err)
						}
					}
					for _, body := range []string{"+TERM", "-NAK", "+ACK", "+WPI", "+NXT"} {
						if err := h.side.Publish(fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.1.%d", h.stream, h.name, h.sseq, h.dseq, h.pending), []byte(body)); err != nil {
							t.Fatal(err)
						}
					}
					// Flow-control answers, which a link may send.
					if err := h.side.Publish(fmt.Sprintf("$JS.FC.%s.%s.evil", h.stream, h.name), nil); err != nil {
						t.Fatal(err)
					}
				}
			})
			// Defects 1-3, refused by the upstream itself.
			step("refused upstream", func(t *testing.T) { testRefusedUpstream(t, st, heard) })
			// Defect 2: a delivery forged onto host-1's mirror.
			t.Run("forged mirror delivery", func(t *testing.T) {
				check(t, true, forgeDelivery(t, st, a, d, &version))
			})
			// A consumer the link may create, delivering on host-1's
			// mirror's deliver subject a subset of the stream, with
			// heartbeats and flow control: host-1's mirror ignores its
			// messages (they name another consumer), and its heartbeats,
			// which count other deliveries than the mirror's, may make the
			// mirror re-create its own consumer. Delivery continues.
			t.Run("consumer on another host's deliver subject", func(t *testing.T) {
				check(t, false, func(t *testing.T) {
					deliver := deliverSubject(t, st, heard)
					body := fmt.Sprintf(`{"stream_name":%q,"config":{"name":"evil-hb","deliver_subject":%q,"ack_policy":"none","deliver_policy":"all","filter_subject":"cc.payments.v.>","idle_heartbeat":100000000,"flow_control":true}}`, natsconf.MirrorStream("payments"), deliver)
					m, err := a.region.Request("$JS.eu-west.API.CONSUMER.CREATE."+natsconf.MirrorStream("payments")+".evil-hb", []byte(body), 5*time.Second)
					if err != nil || !strings.Contains(string(m.Data), `"deliver_subject":"`+deliver+`"`) {
						t.Fatalf("create a consumer delivering on %s: %v", deliver, err)
					}
					// Its heartbeats would go on disturbing host-1's
					// mirror through the steps after this one, and it
					// would vanish in one of them once it lost its
					// interest: serve's operator deletes it.
					t.Cleanup(func() {
						api := "$JS.eu-west.API.CONSUMER.DELETE." + natsconf.MirrorStream("payments") + ".evil-hb"
						m, err := st.dist.Request(api, nil, poll.Patience)
						if err != nil || !strings.Contains(string(m.Data), `"success":true`) {
							t.Errorf("delete the attacker's consumer evil-hb: %v", err)
						}
					})
				})
			})
			// Defect 2 as the issue tells it: in the attacker's own
			// JetStream, a stream named like the region's mirror and a push
			// consumer named like host-1's mirror consumer, delivering on
			// that consumer's deliver subject a forged pointer far ahead of
			// the hub. Its deliveries cross the link as publishes on the
			// deliver subject, which the region refuses: host-1's mirror
			// stores nothing and keeps following the hub.
			t.Run("stream and consumer mimicking the tree's", func(t *testing.T) {
				check(t, true, func(t *testing.T) {
					deliver := deliverSubject(t, st, heard)
					name := ""
					for _, h := range heard {
						if h.stream == natsconf.MirrorStream("payments") {
							name = h.name
						}
					}
					js, err := a.region.JetStream()
					if err != nil {
						t.Fatal(err)
					}
					stream := natsconf.MirrorStream("payments")
					if _, err := js.AddStream(&nats.StreamConfig{Name: stream, Subjects: []string{"evil.payments.>"}}); err != nil {
						t.Fatalf("the attacker's own stream %s: %v", stream, err)
					}
					forged := nats.NewMsg("evil.payments.p.all.checkout")
					forged.Header.Set(cuecast.HeaderPointer, `{"config":"payments/checkout","version":999,"rev":99999999999}`)
					for range 3 {
						if _, err := js.PublishMsg(forged); err != nil {
							t.Fatal(err)
						}
					}
					// Interest of its own in the deliver subject, so that the
					// consumer delivers whether or not the region's interest
					// reaches this server.
					own, err := a.region.SubscribeSync(deliver)
					if err != nil {
						t.Fatal(err)
					}
					defer func() { _ = own.Unsubscribe() }()
					if err := a.region.Flush(); err != nil {
						t.Fatal(err)
					}
					if _, err := js.AddConsumer(stream, &nats.ConsumerConfig{Durable: name, DeliverSubject: deliver,
						AckPolicy: nats.AckNonePolicy, DeliverPolicy: nats.DeliverAllPolicy}); err != nil {
						t.Fatalf("the attacker's own consumer %s on %s: %v", name, deliver, err)
					}
					poll.Until(t, "the attacker's consumer to deliver everything", poll.Patience, func() (bool, string) {
						ci, err := js.ConsumerInfo(stream, name)
						if err != nil {
							return false, err.Error()
						}
						return ci.Delivered.Stream >= 3, fmt.Sprintf("delivered up to %d", ci.Delivered.Stream)
					})
				})
			})
			// Defect 7: the link's credential is no client's.
			t.Run("link credential as a client", func(t *testing.T) {
				testLinkCredentialAsClient(t, st)
			})
		})
	}
}

// barrier returns once everything the attacker sent before it on both links
// has been processed upstream: a report on each link reaches the hub's
// report stream (reports may go up).
func (a *attacker) barrier(t *testing.T, st *suiteTree) {
	t.Helper()
	last := st.reportsLast(t)
	for _, nc := range []*nats.Conn{a.region, a.hub} {
		if err := nc.Publish("ccs.payments.barrier.checkout", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	st.waitReports(t, "the barrier reports at the hub", last+2)
}

// storesChanged compares every store with before, except the count of
// reports: the watchers report and the link may send reports
// (docs/SECURITY.md).
func storesChanged(t *testing.T, st *suiteTree, before storeState) []string {
	t.Helper()
	after := snapshot(t, st.dist, st.domains)
	key := "hub/" + cuecast.ReportStream
	r := before[key]
	r.Last = after[key].Last
	before[key] = r
	return before.diff(after)
}

// rawLink is a leafnode connection spoken by hand, as an attacker who
// changed their nats-server would speak it: a stock server keeps whatever
// its upstream denies from leaving it at all (the upstream tells its
// leafnodes their permissions), which proves nothing about the upstream.
// Here the upstream itself must refuse: it answers a denied publish with a
// permissions violation and closes the link.
type rawLink struct {
	conn net.Conn
	r    *bufio.Reader
	// interest is what the upstream told the link it subscribes to (LS+).
	interest []string
}

// dialRaw logs in to the leafnode listener addr with the link's
// credential. A login that ends unjudged (the upstream's authentication
// timer fired first, or the connection ended before the PONG, as on a
// loaded machine) is made again; any other answer fails t.
func dialRaw(t *testing.T, st *suiteTree, addr string) *rawLink {
	t.Helper()
	deadline := time.Now().Add(poll.Patience)
	for {
		l, unjudged := loginRaw(t, st, addr)
		if l != nil {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("leafnode login at %s: still unjudged after %s: %s", addr, poll.Patience, unjudged)
		}
	}
}

// loginRaw makes one leafnode login at addr: the link, or why the login
// ended unjudged.
func loginRaw(t *testing.T, st *suiteTree, addr string) (*rawLink, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	l := &rawLink{conn: c, r: bufio.NewReader(c)}
	line, err := l.r.ReadString('\n')
	if err != nil {
		return nil, "no INFO: " + err.Error()
	}
	if !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("leafnode INFO from %s: %q", addr, line)
	}
	var info struct {
		Nonce       string `json:"nonce"`
		TLSRequired bool   `json:"tls_required"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &info); err != nil {
		t.Fatal(err)
	}
	if info.TLSRequired {
		pool := x509.NewCertPool()
		ca, err := os.ReadFile(st.TLS.CA)
		if err != nil || !pool.AppendCertsFromPEM(ca) {
			t.Fatalf("read CA: %v", err)
		}
		cert, err := tls.LoadX509KeyPair(st.TLS.Cert, st.TLS.Key)
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
		if err := tc.Handshake(); err != nil {
			// The server's TLS timeout, or a close: not a refusal of
			// the credential, which is sent after.
			return nil, "TLS handshake: " + err.Error()
		}
		l.conn, l.r = tc, bufio.NewReader(tc)
	}
	connect := map[string]any{"name": "evil-raw", "server_id": "NEVILRAWLINK", "headers": true}
	if st.Keys != nil {
		creds, err := os.ReadFile(st.Creds(t, natsconf.LeafUser))
		if err != nil {
			t.Fatal(err)
		}
		token, err := jwt.ParseDecoratedJWT(creds)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := jwt.ParseDecoratedNKey(creds)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := kp.Sign([]byte(info.Nonce))
		if err != nil {
			t.Fatal(err)
		}
		connect["jwt"], connect["sig"] = token, base64.RawURLEncoding.EncodeToString(sig)
	} else {
		connect["user"], connect["pass"] = natsconf.LeafUser, st.Passwords[natsconf.LeafUser]
	}
	b, err := json.Marshal(connect)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(l.conn, "CONNECT %s\r\nPING\r\n", b); err != nil {
		t.Fatal(err)
	}
	refused, what := l.await()
	switch {
	case !refused && what == "PONG":
		return l, ""
	case !refused && (strings.HasPrefix(what, "connection ended") || strings.Contains(what, "Authentication Timeout")):
		return nil, what
	}
	t.Fatalf("leafnode login at %s: %s", addr, what)
	return nil, ""
}

// await reads until the upstream answers the last PING (PONG: nothing was
// refused) or refuses what was sent (a permissions violation).
func (l *rawLink) await() (refused bool, what string) {
	for {
		line, err := l.r.ReadString('\n')
		if err != nil {
			return false, "connection ended: " + err.Error()
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "PONG":
			return false, line
		case line == "PING":
			if _, err := io.WriteString(l.conn, "PONG\r\n"); err != nil {
				return false, err.Error()
			}
		case strings.HasPrefix(line, "-ERR"):
			return strings.Contains(line, "Permissions Violation for Publish"), line
		case strings.HasPrefix(line, "LS+ "):
			if f := strings.Fields(line); len(f) > 1 {
				l.interest = append(l.interest, f[1])
			}
		}
		// INFO and LS- lines.
	}
}

// publish sends one message up the link with reply and body, and reports
// whether the upstream refused it.
func (l *rawLink) publish(subject, reply, body string) (refused bool, what string) {
	if _, err := fmt.Fprintf(l.conn, "LMSG %s %s %d\r\n%s\r\nPING\r\n", subject, reply, len(body), body); err != nil {
		return false, err.Error()
	}
	return l.await()
}

// apiVerbs are the JetStream API's subjects as nats-server (go.mod's
// version, server/jetstream_api.go) names them, with the wildcards filled
// in for one stream and consumer: every account, stream, consumer and
// message request but a consumer's creation, each with a body that does
// harm if carried out.
func apiVerbs(stream, consumer string) []attack {
	fill := func(pattern string, names ...string) string {
		for _, n := range names {
			pattern = strings.Replace(pattern, "*", n, 1)
		}
		return pattern
	}
	as := consumerVerbs(stream, consumer)
	for _, v := range []struct{ subj, body string }{
		{server.JSApiAccountInfo, ""},
		{server.JSApiStreams, ""},
		{server.JSApiStreamList, ""},
		{fill(server.JSApiStreamCreate, "EVIL"), `{"name":"EVIL","subjects":["cc.>"]}`},
		{fill(server.JSApiStreamUpdate, stream), `{"name":"` + stream + `","max_msgs":1}`},
		{fill(server.JSApiStreamInfo, stream), ""},
		{fill(server.JSApiStreamDelete, stream), ""},
		{fill(server.JSApiStreamPurge, stream), "{}"},
		{fill(server.JSApiStreamSnapshot, stream), `{"deliver_subject":"evil.snap"}`},
		{fill(server.JSApiStreamRestore, stream), "{}"},
		{fill(server.JSApiMsgDelete, stream), `{"seq":1}`},
		{fill(server.JSApiMsgGet, stream), `{"seq":1}`},
		{fill(server.JSDirectMsgGet, stream), `{"seq":1}`},
		{fill(server.JSDirectGetLastBySubject, stream, "cc.payments.v.checkout"), ""},
		{fill(server.JSApiConsumers, stream), ""},
		{fill(server.JSApiConsumerList, stream), ""},
		{fill(server.JSApiStreamRemovePeer, stream), `{"peer":"hub"}`},
		{fill(server.JSApiStreamEvacuatePeer, stream), "{}"},
		{fill(server.JSApiStreamCancelMove, stream), ""},
		{fill(server.JSApiStreamLeaderStepDown, stream), ""},
		{server.JSApiLeaderStepDown, ""},
		{server.JSApiRemoveServer, `{"peer":"hub"}`},
		{server.JSApiEvacuateServer, "{}"},
		{server.JSApiMetaRescue, "{}"},
		{fill(server.JSApiAccountPurge, "FANOUT"), ""},
		{fill(server.JSApiServerStreamMove, "FANOUT", stream), "{}"},
		{fill(server.JSApiServerStreamCancelMove, "FANOUT", stream), ""},
	} {
		as = append(as, attack{pub: v.subj, body: v.body})
	}
	return as
}

// testRefusedUpstream sends, by hand on a link to the hub and on one to the
// region, every JetStream API request but a consumer's creation (on the
// domain's API and the local one), and every subject a link must not
// publish on: versions, pointers, audit entries, rollout records, the
// updates a level's instances hear (ccr.>, defect 3), JetStream's
// deliveries, acknowledgements and internal replies (defect 2), the hub's
// fan-out imports. The upstream refuses each (a permissions violation,
// which closes the link), and lets through what the link needs.
func testRefusedUpstream(t *testing.T, st *suiteTree, heard []delivery) {
	type upstream struct{ name, addr, api, stream, consumer string }
	ups := []upstream{
		{"hub", st.Hub.LeafAddr, "$JS.hub.API", cuecast.FanoutStream, "JS_MIRROR_x"},
		{"region", st.servers[1].LeafAddr, "$JS.eu-west.API", natsconf.MirrorStream("payments"), "JS_MIRROR_x"},
	}
	for i, up := range ups {
		for _, h := range heard {
			if h.stream == up.stream {
				ups[i].consumer = h.name
			}
		}
	}
	for _, up := range ups {
		var as []attack
		for _, v := range apiVerbs(up.stream, up.consumer) {
			as = append(as, v, attack{pub: onDomain(up.api, v.pub), body: v.body})
		}
		create := fmt.Sprintf(`{"stream_name":%q,"config":{"name":"evil","deliver_subject":"evil.x","ack_policy":"none"}}`, up.stream)
		as = append(as, attack{pub: fmt.Sprintf(server.JSApiConsumerCreateT, up.stream), body: create})
		for _, subj := range []string{
			"cc.payments.p.all.checkout", "cc.payments.v.checkout", "cc.search.p.all.ranking",
			"ccr.payments.p.all.checkout", "ccr.search.p.all.ranking",
			"cca.payments.checkout", "$KV.cuecast-rollouts.payments.checkout",
			"$JS.M.evil", "$JS.S.evil",
			"$JSC.R.evil", "$JSC.ACK.evil", "$JS.SNAPSHOT.ACK.x.y", "$JS.SNAPSHOT.RESTORE.x.y",
			"$JS.FC.CUECAST.x.y", "cuecast.fanout.api.CONSUMER.CREATE.CUECAST.evil.cc.x", "cuecast.fanout.deliver.x",
			"cuecast.fanout.admin.STREAM.DELETE." + cuecast.FanoutStream, "$SYS.REQ.SERVER.PING",
			"$JS.EVENT.ADVISORY.API", "evil.anything",
		} {
			as = append(as, attack{pub: subj, body: "{}"})
		}
		// Each on a login of its own (a refusal closes the link), the
		// logins side by side: on a loaded machine one after another
		// took most of the suite's time. The group returns when all did.
		t.Run("refused at the "+up.name, func(t *testing.T) {
			for _, a := range as {
				t.Run(a.pub, func(t *testing.T) {
					t.Parallel()
					refused, what := dialRaw(t, st, up.addr).publish(a.pub, "_INBOX.evil", a.body)
					if !refused {
						t.Errorf("%s at the %s: not refused by the upstream (%s)", a, up.name, what)
					}
				})
			}
		})
		// What the link needs goes through: reports, a mirror consumer's
		// creation, flow control, answers to requests from above.
		l := dialRaw(t, st, up.addr)
		for _, a := range []attack{
			{pub: "ccs.payments.raw.checkout", body: "{}"},
			{pub: up.api + ".CONSUMER.CREATE." + up.stream, body: "{}"},
			{pub: "$JS.FC." + up.stream + ".x.y"},
			{pub: "_INBOX.x"},
			{pub: "_R_.x"},
		} {
			if refused, what := l.publish(a.pub, "_INBOX.evil", a.body); refused || what != "PONG" {
				t.Errorf("%s at the %s: %s, want it let through", a, up.name, what)
			}
		}
	}
}

// forgeDelivery forges a delivery of host-1's mirror's consumer (the
// issue's defect 2): the attacker reads the consumer's name and delivery
// sequence from a commit it overhears, and returns the attack: to send, by
// hand on a link to the region, a pointer at the hub's last sequence + 40
// as that consumer's next delivery, on its deliver subject. Stored, it
// would hold host-1's mirror ahead of every real message. The region
// refuses it: a link may publish no delivery at all.
func forgeDelivery(t *testing.T, st *suiteTree, a *attacker, d *distributor.Distributor, version *uint64) func(t *testing.T) {
	*version++
	var last delivery
	for _, h := range a.overhear(t, d, *version) {
		if h.stream == natsconf.MirrorStream("payments") {
			last = h
		}
	}
	hubLast := streamState(t, st.dist, "hub", natsconf.Stream).Last
	deliver := deliverSubject(t, st, []delivery{last})
	reply := fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.%d.0@cc.payments.p.all.checkout", last.stream, last.name, hubLast+40, last.dseq+1, time.Now().UnixNano())
	forged := `{"config":"payments/checkout","version":999,"rev":99999999999}`
	return func(t *testing.T) {
		if refused, what := dialRaw(t, st, st.servers[1].LeafAddr).publish(deliver, reply, forged); !refused {
			t.Errorf("a delivery forged on %s: not refused by the region (%s)", deliver, what)
		}
	}
}

// testLinkCredentialAsClient logs in with the link's credential as a plain
// client on the hub's and the region's client ports: refused, the user may
// only link (natsconf.ConnectionLeafnode).
func testLinkCredentialAsClient(t *testing.T, st *suiteTree) {
	opts := []nats.Option{nats.Timeout(5 * time.Second), nats.UserInfo(natsconf.LeafUser, st.Passwords[natsconf.LeafUser])}
	if st.Keys != nil {
		opts = []nats.Option{nats.Timeout(5 * time.Second), nats.UserCredentials(st.Creds(t, natsconf.LeafUser))}
	}
	if tl := st.TLS; tl != nil {
		opts = append(opts, nats.RootCAs(tl.CA), nats.ClientCert(tl.Cert, tl.Key))
	}
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	for _, srv := range st.servers[:2] {
		// A login that timed out unjudged is asked again: only the
		// server's refusal counts as one.
		nc, err := natstest.Dial(ctx, srv.ClientURL(), opts...)
		if err == nil {
			nc.Close()
			t.Errorf("the link's credential logged in as a client at %s", srv.Spec.Name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("the link's credential as a client at %s: %v, want an authorization violation", srv.Spec.Name, err)
		}
	}
}

// deliverSubject is the deliver subject of host-1's mirror's consumer the
// attacker heard, read as serve: the strongest attacker knows it.
func deliverSubject(t *testing.T, st *suiteTree, heard []delivery) string {
	t.Helper()
	for _, h := range heard {
		if h.stream != natsconf.MirrorStream("payments") {
			continue
		}
		info := ask(t, "host-1's mirror consumer "+h.name, func(ctx context.Context) (*jetstream.ConsumerInfo, error) {
			return consumerInfo(ctx, st.dist, "$JS.eu-west.API", h.stream, h.name)
		})
		if info == nil || !strings.HasPrefix(info.Config.DeliverSubject, "$JS.M.") {
			t.Fatalf("host-1's mirror consumer %s: %+v", h.name, info)
		}
		return info.Config.DeliverSubject
	}
	t.Fatal("the attacker heard no consumer of host-1's mirror")
	return ""
}
