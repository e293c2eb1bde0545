package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestLiveFleetReadsByNamespace: liveFleet answers the same whether it reads
// each path's reports (few paths of a namespace) or the namespace's once
// (namespaceReadFrom or more), and counts nobody from another namespace or
// an unnamed config.
func TestLiveFleetReadsByNamespace(t *testing.T) {
	s := natstest.Start(t)
	nc := s.Connect(t)
	d, err := distributor.New(t.Context(), nc, distributor.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[cuecast.ConfigPath][]string{}
	report := func(cp cuecast.ConfigPath, inst string) {
		t.Helper()
		b, _ := json.Marshal(cuecast.Report{Instance: inst, Config: cp, Version: 1, At: time.Now()})
		if _, err := js.Publish(t.Context(), cuecast.ReportSubject(cp, inst), b); err != nil {
			t.Fatal(err)
		}
		truth[cp] = append(truth[cp], inst)
	}
	var many []cuecast.ConfigPath
	for c := range namespaceReadFrom + 8 {
		cp := cuecast.ConfigPath(fmt.Sprintf("pay/cfg%02d/env=prod", c))
		many = append(many, cp)
		for i := range c % 4 { // some configs nobody runs
			report(cp, fmt.Sprintf("web-%d", i))
		}
	}
	report("pay/unnamed", "web-0")
	report("search/ranking", "web-9")
	few := []cuecast.ConfigPath{many[1], many[2], many[3], "search/ranking"}

	f := &liveFleet{d: d}
	for _, tc := range []struct {
		name  string
		paths []cuecast.ConfigPath
	}{{"per path", few}, {"per namespace", append(slices.Clone(many), "search/ranking")}} {
		got, err := f.Instances(t.Context(), tc.paths)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := map[cuecast.ConfigPath][]string{}
		for _, cp := range tc.paths {
			if len(truth[cp]) > 0 {
				want[cp] = truth[cp]
			}
		}
		for cp := range got {
			slices.Sort(got[cp])
		}
		if !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("%s: got %v\nwant %v", tc.name, got, want)
		}
	}
}
