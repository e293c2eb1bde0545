package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/cuecast/cuecast/client"
	// Both packages are named openfeature: name one of them.
	cuecastof "github.com/cuecast/cuecast/flags/openfeature"
)

// A service evaluating a cuecast flag set through the OpenFeature SDK, as it
// would run in production: the NATS URL, the trusted-keys file (`cuecast
// keys` prints it) and the state directory come from the environment.
// Every evaluation is in-process; NATS only brings new versions.
//
// It runs, as it is here, in flags/openfeature/integration, whose test
// binary provides that environment: an embedded server with version 1 of
// the flag set payments/flags deployed (example_setup_test.go there). It is
// not run in this package, whose tests use no server.
func Example() {
	ctx := context.Background()

	// client.ConnectOptions: reconnect forever, and connect even while
	// NATS is down at start, so the last-known-good file can serve.
	nc, err := nats.Connect(os.Getenv("NATS_URL"), client.ConnectOptions()...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	p, err := cuecastof.New(nc, cuecastof.Options{
		Config: "payments/flags", // a cuecast.ConfigPath: the flag set's config
		Client: []client.Option{
			// Both required: the instance ID places it in its cohort and
			// names its reports; nothing unsigned by a trusted key applies.
			client.WithInstance("checkout-1"),
			client.WithTrustedKeysFile(os.Getenv("CUECAST_TRUSTED_KEYS")),
		},
		Watch: []client.WatchOption{
			client.LastKnownGood(filepath.Join(os.Getenv("STATE_DIRECTORY"), "flags.lkg")),
		},
	})
	if err != nil {
		fmt.Println(err) // wraps client.ErrNoTrustedKeys or cuecast.ErrInvalidInstance
		return
	}

	// Init returns at the first verified version, or at once from a
	// verified last-known-good file. If neither comes in time the SDK
	// returns the context's error and the provider is in PROVIDER_ERROR;
	// the watch goes on, and PROVIDER_READY follows the first version.
	initCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := of.SetProviderWithContextAndWait(initCtx, p); err != nil {
		fmt.Println(err)
		return
	}
	defer of.Shutdown() // stops the watch and closes the provider's client

	flags := of.NewDefaultClient()
	user := of.NewEvaluationContext("user-42", map[string]any{"country": "NL"})
	v2, err := flags.BooleanValueDetails(ctx, "checkout-v2", false, user)
	if err != nil {
		fmt.Println(err) // FLAG_NOT_FOUND, TYPE_MISMATCH...: the default is returned
	}
	fmt.Printf("checkout-v2 for user-42: %t (%s)\n", v2.Value, v2.Reason)

	// Output: checkout-v2 for user-42: false (SPLIT)
}
