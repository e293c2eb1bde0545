package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestDrillDownSaysWhatArrived: on a tree whose region leaf-1 summarises
// three instances, DrillDown splits the instance a rollout's canary names
// out of its group. With region us-east summarising the config and not
// answering, it still splits what leaf-1 sent, names us-east in Short and
// fails with ErrDetailIncomplete: the controller takes the error (it
// judges no stage on part of the fleet), the dashboard shows the rest.
func TestDrillDownSaysWhatArrived(t *testing.T) {
	t.Parallel()
	t.Run(natstest.TreeMode, func(t *testing.T) {
		fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{cfg.Namespace()}, Heartbeat: heartbeat, Logger: logger(t)})
		hub := fl.Hub(t)
		d, err := distributor.New(t.Context(), hub, distributor.Options{Heartbeat: heartbeat, Logger: logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		fl.Summarize(t)
		for _, id := range []string{"a-1", "a-2", "a-3"} {
			fl.Report(t, cuecast.Report{Instance: id, Config: cfg, Version: 1, Healthy: true})
		}
		var reports []cuecast.Report
		poll.Until(t, "the hub holding leaf-1's summary of 3 instances", poll.Patience, func() (bool, string) {
			reports, err = d.Reports(t.Context(), cfg)
			if err != nil {
				return false, err.Error()
			}
			return distributor.Weigh(reports) == 3 && reports[0].Count > 0, fmt.Sprintf("%+v", reports)
		})
		r := &rollout.Rollout{Config: cfg, Version: 1, Policy: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "canary", Instances: []string{"a-2"}}, {Name: "all", Percent: 100}}}}
		if _, ok := rollout.NeedsDrillDown(&rollout.Rollout{Config: cfg, Policy: cuecast.DefaultPolicy()}, reports); ok {
			t.Error("NeedsDrillDown: a rollout by percent only needs none")
		}
		if _, ok := rollout.NeedsDrillDown(r, []cuecast.Report{{Instance: "a-2", Config: cfg, Version: 1}}); ok {
			t.Error("NeedsDrillDown: instances' own reports need none")
		}
		split := func(dr rollout.Drill) bool {
			for _, rp := range dr.Reports {
				if rp.Instance == "a-2" && rp.Count == 0 {
					return distributor.Weigh(dr.Reports) == 3
				}
			}
			return false
		}
		var dr rollout.Drill
		poll.Until(t, "DrillDown splitting a-2 out of its group", poll.Patience, func() (bool, string) {
			dr, err = rollout.DrillDown(t.Context(), d, cfg, r, reports)
			return err == nil && split(dr) && len(dr.Short) == 0, fmt.Sprintf("%+v, %v", dr, err)
		})

		silent, err := json.Marshal(distributor.BuildSummary("us-east", cfg, []cuecast.Report{{Instance: "ghost-1", Config: cfg, Version: 1, Healthy: true}}, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		// us-east's summary lives four heartbeats: sent again each try;
		// asked again if leaf-1, busy, did not answer either.
		poll.Until(t, "DrillDown naming us-east, with leaf-1's answer split", poll.Patience, func() (bool, string) {
			if err := hub.Publish(cuecast.SummarySubject("us-east", cfg), silent); err != nil {
				return false, err.Error()
			}
			if err := hub.Flush(); err != nil {
				return false, err.Error()
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			dr, err = rollout.DrillDown(ctx, d, cfg, r, reports)
			return errors.Is(err, distributor.ErrDetailIncomplete) && split(dr) && len(dr.Short) == 1 && dr.Short[0].Region == "us-east" && dr.Short[0].Unanswered,
				fmt.Sprintf("%+v, %v", dr, err)
		})
	})
}
