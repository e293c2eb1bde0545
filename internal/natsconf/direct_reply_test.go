package natsconf_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestInstanceInboxIsPrivate: with its own credential (operator mode), an
// instance may receive replies only under its own inbox prefix
// (natsconf.InstanceInboxPrefix), so it cannot learn another instance's
// reply subjects and aim a direct get's answer at a request of theirs;
// its own direct gets are answered there.
func TestInstanceInboxIsPrivate(t *testing.T) {
	st := startSuiteTree(t, true)
	for _, srv := range st.servers {
		t.Run(srv.Spec.Name, func(t *testing.T) {
			errs := asyncErrs(make(chan error, 64))
			nc := connectInstance(t, st, srv, "payments", "web-1", errs.option(), nats.PermissionErrOnSubscribe(true))
			for _, subj := range []string{"_INBOX_payments.>", "_INBOX_payments.*", "_INBOX_payments.web-2.>", "_INBOX_payments.web-2.x.y", "_INBOX_payments.web-10.>"} {
				if _, err := nc.SubscribeSync(subj); err != nil {
					t.Fatal(err)
				}
				errs.refused(t, "subscribe "+subj, subj)
			}
			if srv != st.servers[2] {
				return // services read their namespace's mirror below the hub
			}
			m := request(t, nc, "$JS.API.DIRECT.GET."+natsconf.MirrorStream("payments")+".cc.payments.v.checkout", nil)
			if !strings.HasPrefix(m.Subject, natsconf.InstanceInboxPrefix("payments", "web-1")+".") || m.Header.Get("Nats-Subject") != "cc.payments.v.checkout" {
				t.Errorf("web-1's own direct get answered on %s with subject %q, want its own inbox and cc.payments.v.checkout", m.Subject, m.Header.Get("Nats-Subject"))
			}
		})
	}
}

// TestDirectGetAnswersAimedAtUpdates: a direct get's answer goes to the
// reply subject its requester names, in the requester's own account. An
// instance of payments (the namespace's password, or web-1's own
// credential) aims the answers of every direct get it may make (every
// stored message by sequence, batched, multi-last, last by subject) at the
// update subjects every watcher of payments/checkout on its server
// follows, among them the pointers of a canary of v3 that web-2 is not in
// (another instance's, another bucket's). The watcher web-2 receives
// genuine stored messages of its own namespace there and applies none of
// them: pointers are signed for their own subject and revision, versions
// are never read from an update subject. Nothing stored changes, web-2
// reports no error and applies the next change, v4.
func TestDirectGetAnswersAimedAtUpdates(t *testing.T) {
	for _, auth := range []string{"password", "creds"} {
		t.Run(auth, func(t *testing.T) {
			st := startSuiteTree(t, auth == "creds")
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			d, err := distributor.New(ctx, st.dist, distributor.Options{Heartbeat: time.Hour, SigningKey: treeKey})
			if err != nil {
				t.Fatal(err)
			}
			publish(t, d, checkout, 2, `{"v":2}`)
			node := st.servers[2]
			var victim, attacker *nats.Conn
			if auth == "creds" {
				victim = connectInstance(t, st, node, "payments", "web-2", client.ConnectOptions()...)
				attacker = connectInstance(t, st, node, "payments", "web-1")
			} else {
				victim = node.Connect(t, natsconf.ServiceUser("payments"), append(client.ConnectOptions(), nats.CustomInboxPrefix(natsconf.InstanceInboxPrefix("payments", "web-2")))...)
				attacker = node.Connect(t, natsconf.ServiceUser("payments"))
			}
			var mu sync.Mutex
			var applied []uint64
			var failures []string
			// web-2 reports each version it applies, 0.5–1.5 s later,
			// and then every heartbeat: an hour, so that between the
			// snapshots below nothing legitimate is stored.
			w := natstest.Watch(t, victim, checkout, []client.Option{client.WithInstance("web-2"), client.WithTrustedKeys(treePub),
				client.WithStream("", natsconf.MirrorStream("payments")), client.WithHeartbeat(time.Hour),
				client.WithEvents(func(ev client.Event) {
					mu.Lock()
					defer mu.Unlock()
					switch ev.Kind {
					case client.EventApplied:
						applied = append(applied, ev.Version)
					case client.EventError:
						failures = append(failures, ev.String())
					}
				})})
			// reported waits for web-2's report of v at the hub.
			reported := func(v uint64) cuecast.Report {
				t.Helper()
				var got cuecast.Report
				poll.Until(t, fmt.Sprintf("web-2's report of v%d at the hub", v), poll.Patience, func() (bool, string) {
					rs, err := d.Reports(ctx, checkout)
					if err != nil {
						return false, err.Error()
					}
					for _, r := range rs {
						if r.Instance == "web-2" && r.Version == v {
							got = r
							return true, ""
						}
					}
					return false, fmt.Sprintf("%+v", rs)
				})
				return got
			}
			waitVersion(t, "web-2 on v2", []*client.Watcher{w}, 2)
			// Its report of v2 is stored at the hub before the snapshot: on
			// a loaded box it landed between the snapshots ("store changed
			// by aimed answers: hub/CUECAST_REPORTS", Last 1 to 2).
			reported(2)
			// A canary of v3 that is not web-2's: another instance's
			// pointer and another bucket's, signed, in the mirror.
			if err := d.Publish(ctx, cuecast.Version{Config: checkout, Version: 3, Commit: fmt.Sprintf("%040d", 3)}, []byte(`{"v":3}`)); err != nil {
				t.Fatal(err)
			}
			other := (w.Bucket() + 1) % cuecast.Buckets
			if err := d.SetInstancePointers(ctx, checkout, []string{"web-3"}, cuecast.Pointer{Version: 3}); err != nil {
				t.Fatal(err)
			}
			if err := d.SetPointers(ctx, checkout, []int{other}, cuecast.Pointer{Version: 3}); err != nil {
				t.Fatal(err)
			}
			hub := streamState(t, st.dist, "hub", natsconf.Stream).Last
			poll.Until(t, "the node's mirror holding the canary", poll.Patience, func() (bool, string) {
				got := streamState(t, st.dist, "host-1", natsconf.MirrorStream("payments")).Last
				return got >= hub, fmt.Sprintf("last %d, hub %d", got, hub)
			})

			before := snapshot(t, st.dist, st.domains)
			mirror := "$JS.API.DIRECT.GET." + natsconf.MirrorStream("payments")
			last := streamState(t, st.dist, "host-1", natsconf.MirrorStream("payments")).Last
			targets := []string{
				"ccr.payments.p.all.checkout",
				fmt.Sprintf("ccr.payments.p.%d.checkout", w.Bucket()),
				"ccr.payments.i.web-2.checkout",
				"ccr.payments.s.checkout",
				"ccr.payments.a.checkout",
			}
			sent := 0
			for _, reply := range targets {
				for seq := uint64(1); seq <= last; seq++ {
					if err := attacker.PublishRequest(mirror, reply, fmt.Appendf(nil, `{"seq":%d}`, seq)); err != nil {
						t.Fatal(err)
					}
					sent++
				}
				for _, body := range []string{`{"seq":1,"batch":1000}`, `{"multi_last":["cc.payments.>"]}`} {
					if err := attacker.PublishRequest(mirror, reply, []byte(body)); err != nil {
						t.Fatal(err)
					}
					sent++
				}
				for _, subj := range []string{"cc.payments.v.checkout", "cc.payments.p.all.checkout", fmt.Sprintf("cc.payments.p.%d.checkout", other), "cc.payments.i.web-3.checkout"} {
					if err := attacker.PublishRequest(mirror+"."+subj, reply, nil); err != nil {
						t.Fatal(err)
					}
					sent++
				}
			}
			// The barrier: the attacker's own direct get after them is
			// answered, and the stream answers in order.
			request(t, attacker, mirror+".cc.payments.v.checkout", nil)
			for _, diff := range before.diff(snapshot(t, st.dist, st.domains)) {
				t.Errorf("store changed by aimed answers: %s", diff)
			}

			// web-2 still gets the next change, and applied nothing but v2
			// and v4 (not the canary's v3) and reports no error.
			publish(t, d, checkout, 4, `{"v":4}`)
			waitVersion(t, "web-2 on v4 after the aimed answers", []*client.Watcher{w}, 4)
			if got := string(w.Current().Content); got != `{"v":4}` {
				t.Errorf("web-2 serves %s, want {\"v\":4}", got)
			}
			if r := reported(4); r.LastError != "" || !r.Healthy {
				t.Errorf("web-2 reports %+v, want healthy without an error", r)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(applied, []uint64{2, 4}) {
				t.Errorf("web-2 applied %v, want [2 4]", applied)
			}
			if len(failures) > 0 {
				t.Errorf("web-2's errors: %v", failures)
			}
		})
	}
}
