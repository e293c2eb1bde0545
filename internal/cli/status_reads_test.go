package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestStatusOfAConfigReadsTheFleetOnce: `cuecast status CONFIG` lists the
// instances failing to apply, and those drifting, from the read of the
// fleet its counts came from. It read the reports again for each list (three
// reads where one is the count's), so a list could disagree with the count
// above it, and each read costs the server a walk of the report stream.
func TestStatusOfAConfigReadsTheFleetOnce(t *testing.T) {
	inBothModesTwoOnV1(t, func(t *testing.T, f *reportFleet) {
		ctx := t.Context()
		// web-3 failed to apply, and web-4 runs content v1 is not: both
		// lists are printed.
		f.fl.Report(t, cuecast.Report{Instance: "web-3", Config: checkoutCfg, Version: 1, Healthy: true, At: time.Now().UTC(),
			LastError: "version 2: validate: limit must be positive"})
		f.fl.Report(t, cuecast.Report{Instance: "web-4", Config: checkoutCfg, Version: 1, Healthy: true, At: time.Now().UTC(),
			Checksum: "feedface" + strings.Repeat("0", 56)})
		poll.Until(t, "the hub hearing web-3 failing and web-4", poll.Patience, func() (bool, string) {
			st, err := f.d.Status(ctx, checkoutCfg)
			if err != nil {
				return false, err.Error()
			}
			return len(st) == 1 && st[0].Failing == 1 && st[0].Instances == 4, fmt.Sprintf("status %+v", st)
		})
		reads := f.reads()
		// One read of the fleet, as the distributor makes it: the
		// instances' reports, and the regions' summaries.
		if _, err := f.d.Reports(ctx, checkoutCfg); err != nil {
			t.Fatal(err)
		}
		once := reads()
		code, out, errb := run(ctx, append(append([]string{"status", "--nats", f.url}, f.login...), string(checkoutCfg))...)
		if code != 0 {
			t.Fatalf("status %s: exit %d, stderr %q", checkoutCfg, code, errb)
		}
		for _, want := range []string{
			"  failing to apply (their last apply failed):\n    web-3 on v1: version 2: validate: limit must be positive\n",
			"  DRIFT (reported content matches no version it should hold):\n    web-4 reports v1 with checksum feedface0000, v1 is ",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("status %s lacks %q:\n%s", checkoutCfg, want, out)
			}
		}
		if got := reads() - once; got != once {
			t.Errorf("status %s made %d requests reading the report stream; one read of the fleet makes %d", checkoutCfg, got, once)
		}
	})
}

// TestStatusReadsEveryRecordOnce: `cuecast status` looks for pins in the
// rollout records it already read for its counts. It read each config's
// record again for that, one request per config on top of the one that
// read them all.
func TestStatusReadsEveryRecordOnce(t *testing.T) {
	inBothModesTwoOnV1(t, func(t *testing.T, f *reportFleet) {
		ctx := t.Context()
		status := func(configs int) int {
			t.Helper()
			reads := f.recordReads()
			code, out, errb := run(ctx, append([]string{"status", "--nats", f.url}, f.login...)...)
			if code != 0 {
				t.Fatalf("status: exit %d, stderr %q", code, errb)
			}
			if rows := strings.Count(out.String(), "payments/"); rows != configs {
				t.Fatalf("status lists %d configs, want %d:\n%s", rows, configs, out)
			}
			return reads()
		}
		f.publishSvcs(0, 1)
		two := status(2) // checkout and svc0
		f.publishSvcs(1, 7)
		eight := status(8)
		t.Logf("status read the rollout records with %d requests for 2 configs, %d for 8", two, eight)
		if eight > two {
			t.Errorf("status of 8 configs read the rollout records with %d requests, of 2 configs %d: one more per config", eight, two)
		}
	})
}

// TestRolloutStatusReadsEveryRecordOnce: `cuecast rollout status` with no
// config measures each rollout from the record that listed it. It read
// each config's record again, one request per rollout on top of the one
// that listed them all.
func TestRolloutStatusReadsEveryRecordOnce(t *testing.T) {
	inBothModesTwoOnV1(t, func(t *testing.T, f *reportFleet) {
		ctx := t.Context()
		c, err := rollout.New(ctx, f.nc, f.d, rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}}}, rollout.Options{})
		if err != nil {
			t.Fatal(err)
		}
		deploy := func(from, to int) {
			t.Helper()
			for _, v := range f.publishSvcs(from, to) {
				if err := c.Deploy(ctx, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		status := func(rollouts int) int {
			t.Helper()
			reads := f.recordReads()
			code, out, errb := run(ctx, append([]string{"rollout", "status", "--nats", f.url, "-o", "json"}, f.login...)...)
			if code != 0 {
				t.Fatalf("rollout status: exit %d, stderr %q", code, errb)
			}
			var ps []rollout.Progress
			if err := json.Unmarshal([]byte(out.String()), &ps); err != nil {
				t.Fatalf("rollout status -o json: %v\n%s", err, out)
			}
			if len(ps) != rollouts {
				t.Fatalf("rollout status lists %d rollouts, want %d:\n%s", len(ps), rollouts, out)
			}
			for _, p := range ps {
				if p.Record.Current == nil || p.Record.Current.Version != 1 {
					t.Errorf("rollout status of %s: current %+v, want the rollout of v1", p.Record.Config, p.Record.Current)
				}
			}
			return reads()
		}
		deploy(0, 2)
		two := status(2)
		deploy(2, 8)
		eight := status(8)
		t.Logf("rollout status read the rollout records with %d requests for 2 rollouts, %d for 8", two, eight)
		if eight > two {
			t.Errorf("rollout status of 8 rollouts read the rollout records with %d requests, of 2 rollouts %d: one more per rollout", eight, two)
		}
	})
}

// publishSvcs publishes v1 of payments/svc<from> to payments/svc<to-1>
// and returns those versions.
func (f *reportFleet) publishSvcs(from, to int) []cuecast.Version {
	f.t.Helper()
	var vs []cuecast.Version
	for i := from; i < to; i++ {
		v := cuecast.Version{Config: cuecast.ConfigPath(fmt.Sprintf("payments/svc%d", i)), Version: 1, Commit: fmt.Sprintf("c%d", i)}
		if err := f.d.Publish(f.t.Context(), v, []byte(`{"v":1}`)); err != nil {
			f.t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}
