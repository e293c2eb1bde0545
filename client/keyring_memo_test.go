package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
)

// signingKey is a new signing key of the distributor's kind (an account
// key) and its public key, for tests that sign pointers themselves.
func signingKey(tb testing.TB) (nkeys.KeyPair, string) {
	tb.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		tb.Fatal(err)
	}
	pub, _ := kp.PublicKey() // an account key always has one
	return kp, pub
}

// memoFleet is n watchers of one config whose clients share a Keyring
// (WithKeyring) or each have their own (WithTrustedKeys), fed by hand, and
// a signer for their pointers.
func memoFleet(t *testing.T, n int, shared bool) ([]*Watcher, func(cuecast.Pointer) cuecast.Pointer) {
	t.Helper()
	kp, pub := signingKey(t)
	kr, err := NewKeyring(pub)
	if err != nil {
		t.Fatal(err)
	}
	var ws []*Watcher
	for i := range n {
		trust := WithTrustedKeys(pub)
		if shared {
			trust = WithKeyring(kr)
		}
		c, err := New(new(nats.Conn), WithInstance("memo-"+string(rune('a'+i))), trust)
		if err != nil {
			t.Fatal(err)
		}
		w := newWatcher(c, "payments/checkout", watchOptions{})
		// No server: a read of the stored version (after inline content
		// that does not verify) fails at once.
		w.ctx, w.cancel = context.WithCancel(t.Context())
		w.cancel()
		t.Cleanup(func() { w.timer.Stop() })
		ws = append(ws, w)
	}
	return ws, func(p cuecast.Pointer) cuecast.Pointer {
		sig, err := kp.Sign(p.SigningBytes())
		if err != nil {
			t.Fatal(err)
		}
		p.Signature = base64.RawURLEncoding.EncodeToString(sig)
		return p
	}
}

// The Clients sharing a Keyring verify each pointer and each content once
// per process, like the signature: the instances after the first compare
// the content with the bytes verified already and share them.
func TestSharedKeyringSharesVerifiedContent(t *testing.T) {
	ws, sign := memoFleet(t, 3, true)
	m := benchPointerMsgWith(t, ws[0], cuecast.Pointer{Config: "payments/checkout", Version: 2, Seq: 20}, 2, sign)
	for _, w := range ws {
		w.handle(copyMsg(m))
		if s := w.Current(); s.Version != 2 || w.lastErr != "" || w.refused != "" {
			t.Fatalf("%s: got version %d (%s %s), want 2", w.c.o.instance, s.Version, w.lastErr, w.refused)
		}
	}
	first := ws[0].Current().Content
	for _, w := range ws[1:] {
		if c := w.Current().Content; &c[0] != &first[0] {
			t.Errorf("%s holds its own copy of the content; want the one the shared Keyring verified", w.c.o.instance)
		}
	}
}

// A memo never stands for other bytes: content that differs from the bytes
// remembered for its checksum is hashed and refused, and a pointer header
// that differs from a remembered one is decoded and verified afresh.
func TestSharedKeyringMemoRefusesOtherBytes(t *testing.T) {
	ws, sign := memoFleet(t, 3, true)
	good := benchPointerMsgWith(t, ws[0], cuecast.Pointer{Config: "payments/checkout", Version: 2, Seq: 20}, 2, sign)
	ws[0].handle(copyMsg(good))
	if ws[0].Current().Version != 2 {
		t.Fatalf("first instance: %s %s", ws[0].lastErr, ws[0].refused)
	}

	// The same signed pointer with other inline content: the memo's
	// checksum matches the pointer's, the bytes do not.
	tampered := copyMsg(good)
	tampered.Data[10] ^= 1
	ws[1].handle(tampered)
	if v := ws[1].Current().Version; v == 2 {
		t.Fatal("tampered inline content applied")
	}

	// A forged header (the signature of another pointer): not the
	// remembered header, so verified, and refused.
	forged := copyMsg(good)
	var p cuecast.Pointer
	if err := decodePointer(&p, forged.Header.Get(cuecast.HeaderPointer)); err != nil {
		t.Fatal(err)
	}
	p.Commit = "forged" // signed
	enc, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	forged.Header.Set(cuecast.HeaderPointer, string(enc))
	ws[2].handle(forged)
	if ws[2].Current().Version == 2 || ws[2].refused == "" {
		t.Fatalf("forged pointer: version %d, refused %q; want it refused", ws[2].Current().Version, ws[2].refused)
	}
}

// Clients with their own keys (WithTrustedKeys) verify everything
// themselves: nothing is shared between them.
func TestOwnKeyringsShareNothing(t *testing.T) {
	ws, sign := memoFleet(t, 2, false)
	m := benchPointerMsgWith(t, ws[0], cuecast.Pointer{Config: "payments/checkout", Version: 2, Seq: 20}, 2, sign)
	for _, w := range ws {
		w.handle(copyMsg(m))
		if w.Current().Version != 2 {
			t.Fatalf("%s: %s %s", w.c.o.instance, w.lastErr, w.refused)
		}
	}
	if a, b := ws[0].Current().Content, ws[1].Current().Content; &a[0] == &b[0] {
		t.Fatal("two clients with their own trusted keys share content")
	}
}

// copyMsg is m as another connection would receive it: its own header and
// data.
func copyMsg(m *nats.Msg) *nats.Msg {
	c := nats.NewMsg(m.Subject)
	for k, v := range m.Header {
		c.Header[k] = append([]string(nil), v...)
	}
	c.Data = append([]byte(nil), m.Data...)
	return c
}
