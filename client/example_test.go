package client_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsserver"
)

// A service watching its config: the distributor publishes and deploys a
// signed version, the watcher verifies and applies it, and Typed decodes it
// into a struct. A service copies the part below "The service's side", with
// the trusted-keys file `cuecast keys` prints.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "cuecast-example")
	defer os.RemoveAll(dir)
	srv, err := natsserver.Start(ctx, natsserver.Options{Dir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()

	// The pipeline's side, as `cuecast serve` does it: a signing key, and
	// its public half in the trusted-keys file that services are given.
	key, _, err := distributor.LoadOrCreateKey(dir + "/signing.nk")
	if err != nil {
		fmt.Println(err)
		return
	}
	pub, _ := key.PublicKey()
	if _, err := distributor.TrustKey(dir+"/"+distributor.TrustedKeysFile, pub); err != nil {
		fmt.Println(err)
		return
	}
	dnc, _ := nats.Connect(srv.ClientURL())
	defer dnc.Close()
	d, _ := distributor.New(ctx, dnc, distributor.Options{SigningKey: key})
	v := cuecast.Version{Config: "payments/checkout", Version: 1, Commit: "9fceb02"}
	_ = d.Publish(ctx, v, []byte(`{"limit":250,"currency":"EUR"}`))
	_ = d.Deploy(ctx, v)

	// The service's side: it accepts only what the trusted keys signed.
	nc, _ := nats.Connect(srv.ClientURL(), client.ConnectOptions()...)
	defer nc.Close()
	c, err := client.New(nc, client.WithInstance("checkout-1"),
		client.WithTrustedKeysFile(dir+"/trusted-keys"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	type checkout struct {
		Limit    int    `json:"limit"`
		Currency string `json:"currency"`
	}
	w, err := client.Typed[checkout](ctx, c, "payments/checkout",
		client.LastKnownGood(dir+"/checkout.lkg"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Stop()
	cfg, snap := w.Value()
	fmt.Printf("version %d: limit %d %s\n", snap.Version, cfg.Limit, cfg.Currency)
	// Output: version 1: limit 250 EUR
}
