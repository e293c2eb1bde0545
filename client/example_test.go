package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/client"
)

// Checkout is the service's view of its config, payments/checkout. Fields
// the config gains later are ignored until the service adds them (Typed
// decodes leniently; StrictDecoding refuses them instead).
type Checkout struct {
	Limit    int    `json:"limit"`
	Currency string `json:"currency"`
}

// A service watching its config, as it would run in production: the NATS
// URL, the trusted-keys file (`cuecast keys` prints it; serve writes it to
// <data>/trusted-keys) and the state directory come from the environment,
// and nothing here is specific to the test. It waits until it has a
// verified version (from the server, or its last-known-good file when NATS
// is down) before serving, and logs the client's events, which say why it
// is still waiting (a misspelt config path, a rollout not here yet).
//
// It runs, as it is here, in client/integration, whose test binary
// provides the environment: an embedded server with version 1 of
// payments/checkout deployed (example_setup_test.go there). It is not run
// in this package, whose tests use no server, so that a service's go.sum
// does not gain nats-server through them (docs/ARCHITECTURE.md, "client").
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	nc, err := nats.Connect(os.Getenv("NATS_URL"), client.ConnectOptions()...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	host, _ := os.Hostname()
	c, err := client.New(nc,
		client.WithInstance("checkout-"+instanceSuffix(host)),
		client.WithTrustedKeysFile(os.Getenv("CUECAST_TRUSTED_KEYS")),
		client.WithEvents(func(e client.Event) { slog.Info("cuecast", "event", e.String()) }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	w, err := client.Typed[Checkout](ctx, c, "payments/checkout",
		client.LastKnownGood(filepath.Join(os.Getenv("STATE_DIRECTORY"), "checkout.lkg")),
		client.ValidateValue(func(cfg Checkout) error {
			if cfg.Limit <= 0 {
				return fmt.Errorf("limit %d: want a positive limit", cfg.Limit)
			}
			return nil
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Stop()

	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.WaitReady(readyCtx); err != nil {
		fmt.Println(err) // errors.Is(err, client.ErrNotReady): no version, no last-known-good file
		return
	}
	cfg, snap := w.Value()
	fmt.Printf("version %d: limit %d %s\n", snap.Version, cfg.Limit, cfg.Currency)

	// Later versions arrive on Updates, decoded; a real service loops:
	//	for u := range w.Updates() { apply(u.Value) }
}

// instanceSuffix makes an instance ID (1-128 of [A-Za-z0-9_-]) from a host
// name.
func instanceSuffix(host string) string {
	b := []byte(host)
	for i, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "local"
	}
	return string(b[:min(len(b), 100)])
}
