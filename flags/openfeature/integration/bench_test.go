package integration_test

import (
	"context"
	"testing"
	"time"

	of "github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags/openfeature"
)

// BenchmarkOpenFeatureClient is an evaluation through the SDK's client:
// the SDK's floor (its NoopProvider) and this provider on a bool flag
// with one rule (color's rule, on a string flag) and a rollout.
func BenchmarkOpenFeatureClient(b *testing.B) {
	ctx := context.Background()
	evalCtx := of.NewEvaluationContext("user-2", map[string]any{"country": "NL"})
	b.Run("noop", func(b *testing.B) {
		api := isolated.NewAPI()
		if err := api.SetProviderAndWait(ctx, of.NoopProvider{}); err != nil {
			b.Fatal(err)
		}
		c := api.NewClient()
		b.ReportAllocs()
		for b.Loop() {
			c.Boolean(ctx, "kill", false, evalCtx)
		}
	})
	e := newEnv(b)
	e.ship(1, set(true, "blue"))
	nc := e.srv.Connect(b, client.ConnectOptions()...)
	p, err := openfeature.New(nc, openfeature.Options{Config: cfg, Client: []client.Option{client.WithTrustedKeys(e.pub), client.WithInstance("bench")}})
	if err != nil {
		b.Fatal(err)
	}
	api := isolated.NewAPI()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := api.SetProviderAndWait(sctx, p); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = api.Shutdown(ctx) }()
	c := api.NewClient()
	for _, flag := range []string{"kill", "checkout-v2"} {
		b.Run("cuecast/"+flag, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Boolean(ctx, flag, false, evalCtx)
			}
		})
	}
	b.Run("cuecast/color", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.String(ctx, "color", "", evalCtx)
		}
	})
}
