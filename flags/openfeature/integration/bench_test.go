package integration_test

import (
	"context"
	"testing"
	"time"

	of "github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags"
	"github.com/cuecast/cuecast/flags/openfeature"
	"github.com/cuecast/cuecast/internal/cputime"
)

// BenchmarkOpenFeatureClient is an evaluation through the SDK's client:
// the SDK's floor (its NoopProvider), a trivial provider of constants
// (the SDK's path for any provider but its Noop one, which skips the
// provider state checks), and this provider on a static bool flag (kill),
// a bool rollout (checkout-v2) and a string flag with one rule (color).
//
// The embedded NATS server, the distributor and the provider's client run
// before any of them, the floor included: every sub-benchmark allocates
// the SDK's 1200 B per evaluation, and the garbage collector's cost per
// evaluation depends on the process's heap and goroutines, so a floor
// measured in an emptier process is not the same floor. noop-alone is that
// other floor, the NoopProvider before anything else runs (how this
// benchmark measured the floor until 2026-12-02), to show the difference.
func BenchmarkOpenFeatureClient(b *testing.B) {
	ctx := context.Background()
	evalCtx := of.NewEvaluationContext("user-2", map[string]any{"country": "NL"})
	b.Run("noop-alone", func(b *testing.B) {
		api := isolated.NewAPI()
		if err := api.SetProviderAndWait(ctx, of.NoopProvider{}); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = api.Shutdown(ctx) }()
		c := api.NewClient()
		b.ReportAllocs()
		defer reportCPU(b)()
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
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	clientOf := func(p of.FeatureProvider) *of.Client {
		api := isolated.NewAPI()
		if err := api.SetProviderAndWait(sctx, p); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = api.Shutdown(ctx) })
		return api.NewClient()
	}
	noop, trivial, c := clientOf(of.NoopProvider{}), clientOf(constProvider{}), clientOf(p)
	positionOnly := clientOf(positionProvider{})
	for _, bc := range []struct {
		name string
		c    *of.Client
		flag string
	}{{"noop", noop, "kill"}, {"trivial", trivial, "kill"}, {"cuecast/kill", c, "kill"}, {"cuecast/checkout-v2", c, "checkout-v2"}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				bc.c.Boolean(ctx, bc.flag, false, evalCtx)
			}
		})
	}
	b.Run("cuecast/color", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			c.String(ctx, "color", "", evalCtx)
		}
	})
	// vs-noop/... and vs-trivial/...: a provider against a floor in
	// alternating batches, so that a change of load between sub-benchmarks
	// (a shared machine) does not land on one side only: x-floor is the
	// provider's time over the floor's, both measured in the same batches;
	// floor-ns/op is the floor alone, and ns/op is one evaluation of each.
	// Two floors: the SDK's NoopProvider, for which the SDK skips its
	// provider state checks, and a trivial provider of constants, the
	// least any other provider costs (the issue's anchor, "the OpenFeature
	// client around a trivial provider"). position-only is a reference,
	// not a floor: the bucketing rule alone (flags.Position of the
	// targeting key) with no flag set, the least any provider that follows
	// it costs for a rollout.
	for _, floor := range []struct {
		name string
		c    *of.Client
	}{{"noop", noop}, {"trivial", trivial}} {
		for _, bc := range []struct {
			name string
			c    *of.Client
			flag string
		}{{"trivial", trivial, "kill"}, {"position-only", positionOnly, "checkout-v2"}, {"cuecast/kill", c, "kill"}, {"cuecast/checkout-v2", c, "checkout-v2"}} {
			if bc.c == floor.c {
				continue
			}
			b.Run("vs-"+floor.name+"/"+bc.name, func(b *testing.B) {
				interleave(b, floor.c, bc.c, bc.flag, evalCtx)
			})
		}
	}
}

// interleave evaluates flag through floor and prov in alternating batches
// and reports prov's time over floor's as x-floor.
func interleave(b *testing.B, floor, prov *of.Client, flag string, evalCtx of.EvaluationContext) {
	ctx := context.Background()
	const batch = 256
	var tf, tp time.Duration
	b.ResetTimer()
	for done, i := 0, 0; done < b.N; i++ {
		k := min(batch, b.N-done)
		// Each batch the other way round, so neither side always runs
		// on the cache the other left.
		first, second, tFirst, tSecond := floor, prov, &tf, &tp
		if i%2 == 1 {
			first, second, tFirst, tSecond = prov, floor, &tp, &tf
		}
		t0 := time.Now()
		for range k {
			first.Boolean(ctx, flag, false, evalCtx)
		}
		t1 := time.Now()
		for range k {
			second.Boolean(ctx, flag, false, evalCtx)
		}
		*tFirst += t1.Sub(t0)
		*tSecond += time.Since(t1)
		done += k
	}
	b.ReportMetric(float64(tp)/float64(tf), "x-floor")
	b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "floor-ns/op")
}

// reportCPU starts measuring the process's CPU time; the function it
// returns reports it per operation as cpu-ns/op. On a shared machine
// wall time per operation swings with the other processes' load, CPU time
// much less: compare providers by cpu-ns/op there.
func reportCPU(b *testing.B) func() {
	start := cputime.Process()
	return func() {
		// cputime.Process is 0 where it is not measured.
		if end := cputime.Process(); end > 0 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// positionProvider computes a rollout's bucket position of the targeting
// key (flags.Position, the SHA-256 rule every SDK shares) and serves the
// default: what bucketing alone costs through the SDK.
type positionProvider struct{ constProvider }

func (positionProvider) BooleanEvaluation(_ context.Context, flag string, def bool, fc of.FlattenedContext) of.BoolResolutionDetail {
	key, _ := fc[of.TargetingKey].(string)
	on := flags.Position(flag, key) < flags.Whole/2
	return of.BoolResolutionDetail{Value: on != def, ProviderResolutionDetail: of.ProviderResolutionDetail{Reason: of.SplitReason, Variant: "default"}}
}

// constProvider is the least a provider other than the SDK's NoopProvider
// can do: every evaluation returns the default, STATIC.
type constProvider struct{}

func (constProvider) Metadata() of.Metadata { return of.Metadata{Name: "const"} }
func (constProvider) Hooks() []of.Hook      { return nil }
func (constProvider) BooleanEvaluation(_ context.Context, _ string, def bool, _ of.FlattenedContext) of.BoolResolutionDetail {
	return of.BoolResolutionDetail{Value: def, ProviderResolutionDetail: of.ProviderResolutionDetail{Reason: of.StaticReason, Variant: "default"}}
}
func (constProvider) StringEvaluation(_ context.Context, _ string, def string, _ of.FlattenedContext) of.StringResolutionDetail {
	return of.StringResolutionDetail{Value: def, ProviderResolutionDetail: of.ProviderResolutionDetail{Reason: of.StaticReason, Variant: "default"}}
}
func (constProvider) FloatEvaluation(_ context.Context, _ string, def float64, _ of.FlattenedContext) of.FloatResolutionDetail {
	return of.FloatResolutionDetail{Value: def, ProviderResolutionDetail: of.ProviderResolutionDetail{Reason: of.StaticReason, Variant: "default"}}
}
func (constProvider) IntEvaluation(_ context.Context, _ string, def int64, _ of.FlattenedContext) of.IntResolutionDetail {
	return of.IntResolutionDetail{Value: def, ProviderResolutionDetail: of.ProviderResolutionDetail{Reason: of.StaticReason, Variant: "default"}}
}
func (constProvider) ObjectEvaluation(_ context.Context, _ string, def any, _ of.FlattenedContext) of.InterfaceResolutionDetail {
	return of.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: of.ProviderResolutionDetail{Reason: of.StaticReason, Variant: "default"}}
}
