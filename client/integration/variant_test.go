package integration_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/poll"
)

// The variant paths of cfg the tests ship, and the index at cfg naming them
// (the compiler's canonical JSON).
var (
	prodEU    = cuecast.ConfigPath("payments/checkout/env=prod/region=eu")
	prodUS    = cuecast.ConfigPath("payments/checkout/env=prod/region=us")
	stagingEU = cuecast.ConfigPath("payments/checkout/env=staging/region=eu")
	variantIx = []byte(`{"config":"payments/checkout","dimensions":["env","region"],"schema":"cuecast.variants/v1",` +
		`"variants":["payments/checkout/env=prod/region=eu","payments/checkout/env=prod/region=us","payments/checkout/env=staging/region=eu"]}`)
)

func variantBody(p cuecast.ConfigPath, n uint64) []byte {
	return fmt.Appendf(nil, `{"limit":%d,"variant":%q}`, n, p.VariantLabel())
}

// shipAt publishes version n of path p with content b and deploys it.
func (e *env) shipAt(p cuecast.ConfigPath, n uint64, b []byte) {
	e.t.Helper()
	v := cuecast.Version{Config: p, Version: n, Commit: fmt.Sprintf("c%03d", n), Author: "ann"}
	if err := e.d.Publish(e.t.Context(), v, b); err != nil {
		e.t.Fatalf("Publish %s@%d: %v", p, n, err)
	}
	if err := e.d.Deploy(e.t.Context(), v); err != nil {
		e.t.Fatalf("Deploy %s@%d: %v", p, n, err)
	}
}

// shipVariants publishes the index at cfg and version 1 of each variant.
func (e *env) shipVariants() {
	e.t.Helper()
	e.shipAt(cfg, 1, variantIx)
	for _, p := range []cuecast.ConfigPath{prodEU, prodUS, stagingEU} {
		e.shipAt(p, 1, variantBody(p, 1))
	}
}

// TestVariantWatchPicksOwn: an instance declaring env=prod, region=eu (and
// a dimension the config does not use) that watches payments/checkout
// gets prod-eu's content, reports on prod-eu's path with its dimensions
// among its labels, and keeps the variant in its last-known-good file.
func TestVariantWatchPicksOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.shipVariants()
	path := lkgPath(t)
	c, ev := e.newClient("v-eu", client.WithLabels(map[string]string{"host": "h1"}),
		client.WithDimensions(map[string]string{"env": "prod", "region": "eu", "tier": "gold"}))
	w := watch(t, c, client.LastKnownGood(path))
	s := waitVersion(t, w, ev, 1)
	if s.Config != prodEU || string(s.Content) != string(variantBody(prodEU, 1)) {
		t.Fatalf("applied %s %s, want %s %s", s.Config, s.Content, prodEU, variantBody(prodEU, 1))
	}
	poll.Until(t, "a report on the variant's path", poll.Patience, func() (bool, string) {
		rs, err := e.d.Reports(t.Context(), prodEU)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs {
			if r.Instance == "v-eu" {
				ok := r.Version == 1 && r.Labels["env"] == "prod" && r.Labels["region"] == "eu" && r.Labels["host"] == "h1"
				b, _ := json.Marshal(r)
				return ok, string(b)
			}
		}
		return false, "no report"
	})
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `"config":"`+string(prodEU)+`"`) {
		t.Fatalf("last-known-good file: %v %.200s, want it to hold %s", err, b, prodEU)
	}
	// A new version of another variant changes nothing here; one of
	// prod-eu is applied.
	e.shipAt(prodUS, 2, variantBody(prodUS, 2))
	e.shipAt(prodEU, 2, variantBody(prodEU, 2))
	waitVersion(t, w, ev, 2)
	waitApplied(t, ev, 2) // the last-known-good file is written before the event
	if got := string(w.Current().Content); got != string(variantBody(prodEU, 2)) {
		t.Fatalf("content %s, want prod-eu's version 2", got)
	}

	// Restarted while the server is unreachable: the last-known-good file
	// names the variant, and it is served.
	p := startProxy(t, e.srv.Addr().String())
	p.cut()
	nc := p.connect(t)
	c2, ev2 := e.newClientOn(nc, "v-eu", client.WithDimensions(map[string]string{"env": "prod", "region": "eu"}))
	w2 := watch(t, c2, client.LastKnownGood(path))
	if s := w2.Current(); s.Config != prodEU || s.Version != 2 || !s.FromLastKnownGood {
		t.Fatalf("offline start: got %s@%d (lkg %v), want %s@2 from the last-known-good file; events:%s", s.Config, s.Version, s.FromLastKnownGood, prodEU, ev2)
	}
}

// TestVariantWatchErrors: an instance whose values match no variant, or
// that declares none, gets an error saying what to declare, never a
// default and never another variant.
func TestVariantWatchErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.shipVariants()
	tests := []struct {
		name string
		dims map[string]string
		path cuecast.ConfigPath
		want string
	}{
		{"no dimensions", nil, cfg, "config payments/checkout has variants by env, region: declare this instance's values (client.WithDimensions, or --dim on watch and agent), e.g. env=prod,region=eu; its variants: env=prod,region=eu; env=prod,region=us; env=staging,region=eu"},
		{"a dimension missing", map[string]string{"env": "prod"}, cfg, "declares no value for region (it declares env=prod)"},
		{"no such combination", map[string]string{"env": "staging", "region": "us"}, cfg, "has no variant env=staging,region=us (its variants: env=prod,region=eu; env=prod,region=us; env=staging,region=eu)"},
		{"an unknown value", map[string]string{"env": "qa", "region": "eu"}, cfg, "has no variant env=qa,region=eu"},
		{"a variant path against the declared values", map[string]string{"env": "staging"}, prodEU, "this instance declares env=staging"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []client.Option
			if tt.dims != nil {
				opts = append(opts, client.WithDimensions(tt.dims))
			}
			c, ev := e.newClient("v-err", opts...)
			w, err := c.Watch(t.Context(), tt.path)
			if err == nil {
				w.Stop()
				t.Fatalf("Watch: no error, watching %s; events:%s", w.Current().Config, ev)
			}
			if !errors.Is(err, client.ErrVariant) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Watch: got %v, want ErrVariant saying %q", err, tt.want)
			}
		})
	}
}

// TestVariantIndexNeverApplied: a watcher of a plain config that later
// gains variants keeps its version and says to Watch again; the index is
// never served as the config's content.
func TestVariantIndexNeverApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.shipAt(cfg, 1, body(1))
	c, ev := e.newClient("v-old", client.WithDimensions(map[string]string{"env": "prod", "region": "eu"}))
	w := watch(t, c)
	waitVersion(t, w, ev, 1)
	e.shipAt(cfg, 2, variantIx)
	rej := waitEvent(t, ev, "the index rejected", func(e client.Event) bool { return e.Kind == client.EventRejected && e.Version == 2 })
	if !errors.Is(rej.Err, client.ErrVariant) || !strings.Contains(rej.Err.Error(), "Watch it again") {
		t.Fatalf("rejection: %v, want ErrVariant saying to Watch again", rej.Err)
	}
	if s := w.Current(); s.Version != 1 || string(s.Content) != string(body(1)) {
		t.Fatalf("current %d %s, want version 1 kept", s.Version, s.Content)
	}
	// Watched again, it finds its variant.
	e.shipAt(prodEU, 1, variantBody(prodEU, 1))
	w2 := watch(t, c)
	if s := waitVersion(t, w2, ev, 1); s.Config != prodEU {
		t.Fatalf("second Watch: %s, want %s", s.Config, prodEU)
	}
}

// TestVariantRemoved: the variant an instance follows is tombstoned (the
// config's variants changed): the watcher holds the tombstone and says to
// Watch the base path again.
func TestVariantRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.shipVariants()
	w, ev := e.watching("v-rm", 1, client.WithDimensions(map[string]string{"env": "prod", "region": "us"}))
	v := cuecast.Version{Config: prodUS, Version: 2, Commit: "c002", Author: "ann", Deleted: true}
	if err := e.d.Publish(t.Context(), v, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Deploy(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	got := waitEvent(t, ev, "the removal said", func(e client.Event) bool { return e.Kind == client.EventError && errors.Is(e.Err, client.ErrVariant) })
	if !strings.Contains(got.Detail, "Watch payments/checkout again") || !w.Current().Deleted {
		t.Fatalf("event %q, deleted %v; want the tombstone held and a hint to Watch again", got.Detail, w.Current().Deleted)
	}
}
