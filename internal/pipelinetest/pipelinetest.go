// Package pipelinetest runs a whole cuecast serve (pipeline.Pipeline) for a
// test: the one way tests in every package start it, so that each does not
// repeat the start, run and shutdown dance by hand.
package pipelinetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
)

// Interval is the tailer's poll interval a test's pipeline gets unless it
// sets one: short, so a commit is published within a test's patience.
const Interval = 20 * time.Millisecond

// Run starts cfg and runs it until the test ends or stop is called (stop
// may be called more than once). What cfg leaves unset it fills: branch
// main, a data directory in t.TempDir(), a free loopback port, Interval.
// A failed start or a Run that ends with an error fails the test.
func Run(t testing.TB, cfg pipeline.Config) (p *pipeline.Pipeline, stop func()) {
	t.Helper()
	if cfg.Branch == "" {
		cfg.Branch = "main"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Interval == 0 {
		cfg.Interval = Interval
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := pipeline.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("start pipeline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("pipeline run: %v", err)
			}
			p.Close()
		})
	}
	t.Cleanup(stop)
	return p, stop
}

// RunInMode runs cfg in the mode of t (natstest.BothModes) and returns the
// fleet its instances report to: in single mode, serve's embedded server
// (cfg unchanged); in tree mode, a hub and a summarising region, serve on
// the hub as the distributor with the fleet's heartbeat (unless cfg sets
// one), and the region's summarizer running.
func RunInMode(t testing.TB, cfg pipeline.Config, o natstest.FleetOptions) (*pipeline.Pipeline, *natstest.Fleet) {
	t.Helper()
	if !natstest.InTree(t) {
		p, _ := Run(t, cfg)
		return p, natstest.FleetOf(p.Server, o)
	}
	fl := natstest.StartFleet(t, o)
	cfg.NATS, cfg.NATSOptions = fl.HubURL(), fl.LoginOptions(natsconf.DistributorUser)
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = fl.Heartbeat()
	}
	p, _ := Run(t, cfg)
	fl.Summarize(t)
	return p, fl
}
