package integration_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
)

// A mirror copies CUECAST after CUECAST has RePublished the pointer, so on
// a single server (where the namespace mirror does not RePublish) an
// instance can hear of a version before the mirror it reads has it. Content
// too large to travel inline must then be read again once the mirror has
// caught up: not taken for purged and left until the next reconcile.
func TestMirrorBehindTheNotification(t *testing.T) {
	t.Parallel()
	e, lag, w, ev := watchingHeldMirror(t)
	e.ship(2, body(2))
	waitEvent(t, ev, "version 2 not found in the mirror", func(e client.Event) bool {
		return e.Kind == client.EventError && e.Version == 2
	})
	// It reads again while the mirror is behind, not only at the next
	// reconcile.
	waitEvent(t, ev, "a re-read of a mirror still behind", func(e client.Event) bool {
		return e.Kind == client.EventError && strings.Contains(e.Detail, "behind a pointer already received")
	})
	if got := w.Current().Version; got != 1 {
		t.Fatalf("applied version %d from a mirror that does not have it", got)
	}
	lag.release()
	waitContent(t, w, ev, 2, "after the mirror caught up")
}

// The same for a strict config's staged version: staging it read the
// version once and, on a 404, waited for the next reconcile, which a
// cutover waiting for every live instance to stage waited for too.
func TestMirrorBehindTheStagedPointer(t *testing.T) {
	t.Parallel()
	e, lag, w, ev := watchingHeldMirror(t)
	v2 := cuecast.Version{Config: cfg, Version: 2, Commit: "c002", Author: "ann"}
	if err := e.d.Publish(t.Context(), v2, body(2)); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Stage(t.Context(), cfg, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ev, "staging version 2 from a mirror without it", func(e client.Event) bool {
		return e.Kind == client.EventRejected && e.Version == 2 && e.Detail == "stage"
	})
	waitEvent(t, ev, "a re-read of a mirror still behind", func(e client.Event) bool {
		return e.Kind == client.EventError && strings.Contains(e.Detail, "behind a staged pointer already received")
	})
	lag.release()
	e.waitReport("i1", func(r cuecast.Report) bool { return r.Staged == 2 })
	if got := w.Current().Version; got != 1 {
		t.Fatalf("staging applied version %d; want 1 until the activation", got)
	}
}

// And for a watcher that starts after the pointer was RePublished, while the
// mirror has not copied it yet: it heard nothing and read nothing, and
// waited for the next reconcile.
func TestMirrorBehindAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	lag := startLaggingMirror(t, e.srv.Connect(t), "LAG")
	lag.hold(t) // an empty mirror
	e.ship(1, body(1))
	c, ev := e.newClient("i1", client.WithStream("", "LAG"), client.WithReconcile(time.Hour))
	w := watch(t, c)
	waitEvent(t, ev, "nothing found at the start", func(e client.Event) bool { return e.Kind == client.EventNotFound })
	lag.release()
	waitContent(t, w, ev, 1, "after the mirror caught up")
}

// watchingHeldMirror is instance i1 watching cfg, never inline, through a
// lagging mirror, on version 1, with the mirror then held.
func watchingHeldMirror(t *testing.T) (*env, *laggingMirror, *client.Watcher, *events) {
	t.Helper()
	e := newEnv(t, envOpts{inline: -1})
	lag := startLaggingMirror(t, e.srv.Connect(t), "LAG")
	e.ship(1, body(1))
	// The reconcile would re-read in the end; an hour keeps it out of the test.
	c, ev := e.newClient("i1", client.WithStream("", "LAG"), client.WithReconcile(time.Hour))
	w := watch(t, c)
	waitVersion(t, w, ev, 1)
	lag.hold(t)
	return e, lag, w, ev
}

// laggingMirror answers direct gets on a stream name of its own as a mirror
// of CUECAST would that, while held, has copied nothing since hold: a mirror
// cannot be made to lag on purpose, so the test plays one, on the real
// server and over the real CUECAST.
type laggingMirror struct {
	nc *nats.Conn
	mu sync.Mutex
	// While held, upTo is CUECAST's last sequence at hold, and last
	// each subject's last message then: CUECAST keeps one pointer per
	// subject, so the one a lagging mirror still has is gone from it.
	held bool
	upTo uint64
	last map[string]*nats.Msg
}

const cuecastDirectGet = "$JS.API.DIRECT.GET." + cuecast.Stream

func startLaggingMirror(t *testing.T, nc *nats.Conn, name string) *laggingMirror {
	t.Helper()
	m := &laggingMirror{nc: nc}
	prefix := "$JS.API.DIRECT.GET." + name
	for subj, h := range map[string]nats.MsgHandler{prefix: m.bySeq, prefix + ".>": m.lastOf(prefix + ".")} {
		sub, err := nc.Subscribe(subj, h)
		if err != nil {
			t.Fatalf("subscribe %s: %v", subj, err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return m
}

// hold stops the mirror at CUECAST as it is now.
func (m *laggingMirror) hold(t *testing.T) {
	t.Helper()
	inbox := m.nc.NewRespInbox()
	sub, err := m.nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := m.nc.PublishRequest(cuecastDirectGet, inbox, []byte(`{"multi_last":[">"]}`)); err != nil {
		t.Fatal(err)
	}
	last := map[string]*nats.Msg{}
	for {
		r, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("read CUECAST's last messages: %v", err)
		}
		if st := r.Header.Get("Status"); st != "" { // the end of the batch, or none
			var upTo uint64
			if st != "404" { // an empty CUECAST has nothing up to sequence 0
				if upTo, err = strconv.ParseUint(r.Header.Get("Nats-UpTo-Sequence"), 10, 64); err != nil || upTo == 0 {
					t.Fatalf("end of CUECAST's last messages: %v %v", r.Header, err)
				}
			}
			m.mu.Lock()
			m.held, m.upTo, m.last = true, upTo, last
			m.mu.Unlock()
			return
		}
		last[r.Header.Get("Nats-Subject")] = r
	}
}

func (m *laggingMirror) release() {
	m.mu.Lock()
	m.held, m.upTo, m.last = false, 0, nil
	m.mu.Unlock()
}

// holding returns whether the mirror is held, and as of what.
func (m *laggingMirror) holding() (bool, uint64, map[string]*nats.Msg) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held, m.upTo, m.last
}

// bySeq answers a read by sequence: not found past the held sequence.
func (m *laggingMirror) bySeq(req *nats.Msg) {
	var r struct {
		Seq uint64 `json:"seq"`
	}
	if held, upTo, _ := m.holding(); held && json.Unmarshal(req.Data, &r) == nil && r.Seq > upTo {
		answerNotFound(req)
		return
	}
	fwd, err := m.nc.Request(cuecastDirectGet, req.Data, 5*time.Second)
	if err == nil {
		_ = req.RespondMsg(&nats.Msg{Header: fwd.Header, Data: fwd.Data})
	}
}

// lastOf answers a read of a subject's last message: as it was at hold.
func (m *laggingMirror) lastOf(prefix string) nats.MsgHandler {
	return func(req *nats.Msg) {
		subj := strings.TrimPrefix(req.Subject, prefix)
		if held, _, last := m.holding(); held {
			if r, ok := last[subj]; ok {
				_ = req.RespondMsg(&nats.Msg{Header: r.Header, Data: r.Data})
			} else {
				answerNotFound(req)
			}
			return
		}
		fwd, err := m.nc.Request(cuecastDirectGet+"."+subj, nil, 5*time.Second)
		if err == nil {
			_ = req.RespondMsg(&nats.Msg{Header: fwd.Header, Data: fwd.Data})
		}
	}
}

func answerNotFound(req *nats.Msg) {
	_ = req.RespondMsg(&nats.Msg{Header: nats.Header{"Status": {"404"}, "Description": {"Message Not Found"}}})
}
