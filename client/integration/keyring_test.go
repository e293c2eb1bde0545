package integration_test

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
)

func TestKeyring(t *testing.T) {
	t.Parallel()
	trusted, _ := nkeys.CreateAccount()
	other, _ := nkeys.CreateAccount()
	pub, _ := trusted.PublicKey()
	sign := func(kp nkeys.KeyPair, data string) string {
		sig, _ := kp.Sign([]byte(data))
		return base64.RawURLEncoding.EncodeToString(sig)
	}
	k, err := client.NewKeyring(pub)
	if err != nil {
		t.Fatal(err)
	}
	good := sign(trusted, "pointer")
	tests := []struct {
		name string
		data string
		sig  string
		want error
	}{
		{"valid", "pointer", good, nil},
		{"valid again (remembered)", "pointer", good, nil},
		{"other data with a remembered signature", "pointer2", good, cuecast.ErrBadSignature},
		{"unsigned", "pointer", "", cuecast.ErrBadSignature},
		{"untrusted key", "pointer", sign(other, "pointer"), cuecast.ErrBadSignature},
		{"not base64", "pointer", "!!!", cuecast.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k.Verify([]byte(tt.data), tt.sig)
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := client.NewKeyring(); err == nil {
		t.Fatal("NewKeyring(): got success, want error")
	}
	if _, err := client.NewKeyring("SUAAA"); err == nil {
		t.Fatal("NewKeyring(seed-like): got success, want error")
	}
	nc := newEnv(t, envOpts{}).srv.Connect(t)
	if _, err := client.New(nc, client.WithInstance("a"), client.WithKeyring(k), client.WithTrustedKeys(pub)); err == nil {
		t.Fatal("WithKeyring and WithTrustedKeys together: got success, want error")
	}
}

// BenchmarkKeyringRemembered is what each instance sharing a Keyring pays
// for a pointer signature another instance verified already.
func BenchmarkKeyringRemembered(b *testing.B) {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		b.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	k, err := client.NewKeyring(pub)
	if err != nil {
		b.Fatal(err)
	}
	p := cuecast.Pointer{Config: "payments/checkout", Version: 12, Seq: 123456, Checksum: cuecast.Checksum([]byte("x")),
		Size: 2234, Commit: "9fceb02d0ae598e95dc970b74767f19372d61af8", SetAt: time.Now()}
	sig, err := kp.Sign(p.SigningBytes())
	if err != nil {
		b.Fatal(err)
	}
	p.Signature = base64.RawURLEncoding.EncodeToString(sig)
	if err := k.Verify(p.SigningBytes(), p.Signature); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := k.Verify(p.SigningBytes(), p.Signature); err != nil {
			b.Fatal(err)
		}
	}
}
