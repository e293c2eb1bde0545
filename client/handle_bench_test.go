package client

import (
	"encoding/base64"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
)

// BenchmarkHandlePointer is the watcher's own work for one pointer message
// as the stream RePublishes it (headers already decoded by nats.go): decode,
// verify the inline content's checksum, swap, schedule the report. With
// 10,000 instances sharing this box's two cores with the server, every
// microsecond here adds about 5 ms to the fleet's apply time
// (BENCHMARKS.md, "Distribution"), so it is measured on its own.
//
// Messages alternate between a forward pointer to version 2 and a rollback
// pointer to version 1, so that every one is applied.
func BenchmarkHandlePointer(b *testing.B) {
	cfg := cuecast.ConfigPath("payments/checkout")
	// Unverified, as it was measured before verification became the
	// default: BenchmarkHandlePointerSigned adds the shared Keyring's work.
	c, err := New(new(nats.Conn), WithInstance("bench-1"), WithInsecureSkipVerify())
	if err != nil {
		b.Fatal(err)
	}
	w := newWatcher(c, cfg, watchOptions{}) // handle is called here, not by its goroutine
	msgs := [2]*nats.Msg{
		benchPointerMsg(b, w, cuecast.Pointer{Config: cfg, Version: 2, Seq: 20}, 2),
		benchPointerMsg(b, w, cuecast.Pointer{Config: cfg, Version: 1, Seq: 10, Rollback: true}, 1),
	}
	loopHandle(b, w, msgs)
}

// BenchmarkHandlePointerSigned is BenchmarkHandlePointer with verification,
// as every client now runs: the pointers are signed and the watcher's
// Keyring has verified each signature once already (the Clients of a
// process share one, so a fleet pays the ed25519 verification once per
// pointer), leaving the memo's lookup and the revision and subject checks.
func BenchmarkHandlePointerSigned(b *testing.B) {
	cfg := cuecast.ConfigPath("payments/checkout")
	kp, pub := signingKey(b)
	c, err := New(new(nats.Conn), WithInstance("bench-1"), WithTrustedKeys(pub))
	if err != nil {
		b.Fatal(err)
	}
	w := newWatcher(c, cfg, watchOptions{})
	msgs := signedBenchPointers(b, w, kp)
	for _, m := range msgs {
		w.seen, w.revs = [3]uint64{}, [3]uint64{}
		w.handle(m) // the one verification each
	}
	loopHandle(b, w, msgs)
}

// signedBenchPointers are a version and a rollback to the one before it,
// signed by kp, for alternating handles.
func signedBenchPointers(b *testing.B, w *Watcher, kp nkeys.KeyPair) [2]*nats.Msg {
	sign := func(p cuecast.Pointer) cuecast.Pointer {
		sig, err := kp.Sign(p.SigningBytes())
		if err != nil {
			b.Fatal(err)
		}
		p.Signature = base64.RawURLEncoding.EncodeToString(sig)
		return p
	}
	cfg := w.cfg
	return [2]*nats.Msg{
		benchPointerMsgWith(b, w, cuecast.Pointer{Config: cfg, Version: 2, Seq: 20}, 2, sign),
		benchPointerMsgWith(b, w, cuecast.Pointer{Config: cfg, Version: 1, Seq: 10, Rollback: true}, 1, sign),
	}
}

// loopHandle measures w handling msgs alternately, each as new to it.
func loopHandle(b *testing.B, w *Watcher, msgs [2]*nats.Msg) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.seen, w.revs = [3]uint64{}, [3]uint64{}
		w.handle(msgs[i&1])
		i++
	}
	if s := w.Current(); s.Version == 0 || w.lastErr != "" {
		b.Fatalf("nothing applied: %+v %s", s, w.lastErr)
	}
	w.timer.Stop()
}

// benchPointerMsg is p with ~2 KB of inline content on the all-buckets
// subject, with the headers the stream's RePublish adds.
func benchPointerMsg(b testing.TB, w *Watcher, p cuecast.Pointer, n int) *nats.Msg {
	return benchPointerMsgWith(b, w, p, n, func(p cuecast.Pointer) cuecast.Pointer { return p })
}

// benchPointerMsgWith is benchPointerMsg with p passed through finish
// (signing it) once filled in.
func benchPointerMsgWith(b testing.TB, w *Watcher, p cuecast.Pointer, n int, finish func(cuecast.Pointer) cuecast.Pointer) *nats.Msg {
	content := []byte(`{"version":` + strconv.Itoa(n) + `,"limits":{` + strings.Repeat(`"merchant_tier_00":{"max_amount":1000,"currency":"EUR","review":true},`, 31) + `"x":1}}`)
	p.Checksum, p.Size, p.Inline = cuecast.Checksum(content), int64(len(content)), true
	p.Subject, p.Revision = cuecast.AllPointerSubject(w.cfg), uint64(time.Now().UnixNano())+uint64(n)
	p.Commit, p.Rollout, p.SetAt = "9fceb02d0ae598e95dc970b74767f19372d61af8", "deploy", time.Now().UTC()
	enc, err := json.Marshal(finish(p))
	if err != nil {
		b.Fatal(err)
	}
	subj := cuecast.AllPointerSubject(w.cfg)
	m := nats.NewMsg(cuecast.Republished(subj))
	m.Header.Set("Nats-Rollup", "sub")
	m.Header.Set(cuecast.HeaderPointer, string(enc))
	m.Header.Set("Nats-Expected-Last-Subject-Sequence", "0")
	m.Header.Set("Nats-Stream", cuecast.Stream)
	m.Header.Set(headerSubj, subj)
	m.Header.Set(headerSeq, strconv.FormatUint(p.Seq+1, 10))
	m.Header.Set("Nats-Time-Stamp", time.Now().UTC().Format(time.RFC3339Nano))
	m.Header.Set(headerLast, "0")
	m.Data = content
	return m
}

// BenchmarkHandlePointerShared is BenchmarkHandlePointerSigned for a Client
// sharing its Keyring (WithKeyring) with others that have applied the same
// pointers: the header and the content are recognised, not decoded,
// verified and hashed again.
func BenchmarkHandlePointerShared(b *testing.B) {
	cfg := cuecast.ConfigPath("payments/checkout")
	kp, pub := signingKey(b)
	kr, err := NewKeyring(pub)
	if err != nil {
		b.Fatal(err)
	}
	newW := func(name string) *Watcher {
		c, err := New(new(nats.Conn), WithInstance(name), WithKeyring(kr))
		if err != nil {
			b.Fatal(err)
		}
		return newWatcher(c, cfg, watchOptions{})
	}
	other, w := newW("bench-0"), newW("bench-1")
	msgs := signedBenchPointers(b, w, kp)
	for _, m := range msgs {
		other.seen, other.revs = [3]uint64{}, [3]uint64{}
		other.handle(m) // the other instance verified them first
	}
	other.timer.Stop()
	loopHandle(b, w, msgs)
}

// BenchmarkHandlePointerFleet is BenchmarkHandlePointer as a fleet meets
// it: 10,000 watchers (each its own Client) take turns, so each handles
// its message with its own state out of the CPU's caches, as in
// BenchmarkFanout's child, where the same work costs about twice what it
// costs hot. Each message is decoded from its wire form first, as nats.go
// does (DecodeHeadersMsg, a copy of the body), and that is timed too: it is
// the same for every watcher change, so the difference between two builds
// is the watcher's. Every handle applies (versions 2 and 1 alternate, the
// second a rollback).
func BenchmarkHandlePointerFleet(b *testing.B) {
	for _, fleet := range []int{1, 10_000, 100_000} {
		b.Run("watchers="+strconv.Itoa(fleet), func(b *testing.B) { benchHandleFleet(b, fleet) })
	}
}

func benchHandleFleet(b *testing.B, fleet int) {
	cfg := cuecast.ConfigPath("payments/checkout")
	ws := make([]*Watcher, fleet)
	for i := range ws {
		c, err := New(new(nats.Conn), WithInstance("bench-"+strconv.Itoa(i)), WithInsecureSkipVerify())
		if err != nil {
			b.Fatal(err)
		}
		ws[i] = newWatcher(c, cfg, watchOptions{})
	}
	// rounds are the wire forms of the pointers of consecutive rounds:
	// their revisions and sequences rise, each round's last sequence the
	// one before it, so no watcher sees a gap.
	type wire struct {
		subj string
		hdr  []byte
		data []byte
	}
	round := func(r int) wire {
		p := cuecast.Pointer{Config: cfg, Version: 2, Seq: 20}
		if r%2 == 1 {
			p = cuecast.Pointer{Config: cfg, Version: 1, Seq: 10, Rollback: true}
		}
		m := benchPointerMsg(b, ws[0], p, int(p.Version))
		m.Header.Set(headerSeq, strconv.Itoa(r+1))
		m.Header.Set(headerLast, strconv.Itoa(r))
		var hdr strings.Builder
		hdr.WriteString("NATS/1.0\r\n")
		for k, vs := range m.Header {
			for _, v := range vs {
				hdr.WriteString(k + ": " + v + "\r\n")
			}
		}
		hdr.WriteString("\r\n")
		return wire{subj: m.Subject, hdr: []byte(hdr.String()), data: m.Data}
	}
	const rounds = 64
	var wires [rounds]wire
	for r := range wires {
		wires[r] = round(r)
	}
	// No collection within a round, as in BenchmarkFanout (its child
	// collects before each): one would mark every watcher, in whichever
	// iterations it fell. The collection between rounds is not timed.
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, n := (i/fleet)%rounds, i%fleet
		if i%max(fleet, 10_000) == 0 && i > 0 {
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
		}
		if r == 0 && n == 0 {
			// The revisions start again: so do the watchers.
			for _, w := range ws {
				w.seen, w.revs = [3]uint64{}, [3]uint64{}
			}
		}
		wr := &wires[r]
		h, err := nats.DecodeHeadersMsg(wr.hdr)
		if err != nil {
			b.Fatal(err)
		}
		m := &nats.Msg{Subject: wr.subj, Header: h, Data: append([]byte(nil), wr.data...)}
		ws[n].handle(m)
		i++
	}
	for _, w := range ws {
		if w.lastErr != "" {
			b.Fatalf("%s", w.lastErr)
		}
		w.timer.Stop()
	}
}
