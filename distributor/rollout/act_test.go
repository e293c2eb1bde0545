package rollout_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
)

// TestActDefaults: Act, the one entry of the CLI and the dashboard, applies
// the operator actions' defaults in one place. A rollback with no version
// goes to the rollout's previous version (only the dashboard could say
// that); Emergency marks only what skips something (the dashboard recorded
// a halt with its emergency box ticked as an emergency, the CLI could not);
// and no error names a CLI flag (the library said "--reason").
func TestActDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeStages(time.Hour), cuecast.Relaxed)
	e.baseline()
	ctx := t.Context()
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)

	for _, c := range []struct {
		name string
		a    rollout.Action
		want error
	}{
		{"unknown verb", rollout.Action{Verb: "pause", Config: cfg, Reason: "x"}, rollout.ErrUnknownVerb},
		{"no reason", rollout.Action{Verb: rollout.VerbHalt, Config: cfg}, rollout.ErrNoReason},
		{"resume of an active rollout", rollout.Action{Verb: rollout.VerbResume, Config: cfg, Reason: "x"}, rollout.ErrState},
		{"unpin of no pin", rollout.Action{Verb: rollout.VerbUnpin, Config: cfg, Reason: "x"}, rollout.ErrNotPinned},
		{"rollback of a config with no rollout", rollout.Action{Verb: rollout.VerbRollback, Config: "payments/other", Reason: "x"}, rollout.ErrNoRollout},
	} {
		_, err := e.c.Act(ctx, c.a)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "--") {
			t.Errorf("%s: %q names a CLI flag; the CLI adds its hint", c.name, err)
		}
	}

	if _, err := e.c.Act(ctx, rollout.Action{Verb: rollout.VerbHalt, Config: cfg, Actor: "web:ada", Reason: "latency", Emergency: true}); err != nil {
		t.Fatalf("Act halt: %v", err)
	}
	rec, err := e.c.Act(ctx, rollout.Action{Verb: rollout.VerbRollback, Config: cfg, Actor: "ann", Reason: "back to before"})
	if err != nil {
		t.Fatalf("Act rollback to the previous version: %v", err)
	}
	if rec.Pin == nil || rec.Pin.Version != 1 {
		t.Errorf("rollback with no version: pin %+v, want v1, the rollout's previous version", rec.Pin)
	}
	audit, err := e.c.Audit(ctx, cfg)
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	var got []string
	for _, a := range audit {
		got = append(got, a.Action+":"+a.Actor+":"+map[bool]string{true: "emergency", false: "normal"}[a.Emergency])
	}
	want := []string{"halt:web:ada:normal", "rollback:ann:emergency"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("audit: got %v, want %v", got, want)
	}
}

// TestParseVerb: every verb the CLI and the dashboard offer parses to
// itself; anything else is ErrUnknownVerb, listing them.
func TestParseVerb(t *testing.T) {
	t.Parallel()
	for _, v := range rollout.Verbs() {
		if got, err := rollout.ParseVerb(string(v)); got != v || err != nil {
			t.Errorf("ParseVerb(%q) = %q, %v", v, got, err)
		}
	}
	_, err := rollout.ParseVerb("pause")
	if !errors.Is(err, rollout.ErrUnknownVerb) || !strings.Contains(err.Error(), "advance, halt, resume, rollback, unpin") {
		t.Errorf("ParseVerb(pause): %v, want ErrUnknownVerb listing the verbs", err)
	}
}
