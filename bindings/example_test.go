package bindings_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/bindings/testdata/go/payments"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestMain gives Example_watch its environment: an embedded server with
// version 1 of configs-example's payments/checkout, as compiled, deployed
// and signed (natstest.ExampleEnv, which does nothing unless -run selects
// an example).
func TestMain(m *testing.M) {
	const cfg = cuecast.ConfigPath("payments/checkout")
	res, err := compiler.Compile(context.Background(), "../configs-example", compiler.Options{Configs: []cuecast.ConfigPath{cfg}})
	if err != nil || !res.OK() {
		fmt.Fprintln(os.Stderr, "compile payments/checkout:", err, res.Errors)
		os.Exit(1)
	}
	cleanup, err := natstest.ExampleEnv(cfg, res.Outputs[cfg].JSON)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// A Go service reading its config through the bindings `cuecast gen go
// payments` wrote (here testdata/go/payments, from configs-example):
// Watch is client.Typed for the namespace's type, strict here, so a
// version with a field the type does not know would be refused. The
// fields payments' open schema (#Payments: {…, ...}) does not name are in
// Extra, as raw JSON.
func Example_watch() {
	ctx := context.Background()
	nc, err := nats.Connect(os.Getenv("NATS_URL"), client.ConnectOptions()...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	c, err := client.New(nc, client.WithInstance("checkout-1"), client.WithTrustedKeysFile(os.Getenv("CUECAST_TRUSTED_KEYS")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	w, err := payments.Watch(ctx, c, "payments/checkout", client.StrictDecoding())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Stop()
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.WaitReady(readyCtx); err != nil {
		fmt.Println(err)
		return
	}
	cfg, snap := w.Value()
	fmt.Printf("version %d: owner %s, env %s, currency %s\n", snap.Version, cfg.Owner, cfg.Env, *cfg.Currency)
	var max int64
	if err := json.Unmarshal(cfg.Extra["max_amount_minor"], &max); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("max_amount_minor:", max)

	// Watch is for the namespace's configs only.
	_, err = payments.Watch(ctx, c, "search/ranking")
	fmt.Println(err)
	// Output:
	// version 1: owner team-payments, env prod, currency EUR
	// max_amount_minor: 5000000
	// watch search/ranking: not a config of namespace payments
}
