package cli_test

import (
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/poll"
)

const flagSetV1 = `package flags

schema: "cuecast.flags/v1"
flags: "checkout-v2": {
	type: "bool"
	variants: {on: true, off: false}
	on:             %s
	offVariant:     "off"
	defaultVariant: "off"
	salt:           "checkout-v2"
	fallthrough: rollout: weights: [{variant: "on", weight: 50000}, {variant: "off", weight: 50000}]
}
`

// TestFlagsEvalPublished: --published evaluates the newest published
// version of the flag set, or the one --version names, as served.
func TestFlagsEvalPublished(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	repo.CommitFiles("growth flags", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/flags@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: growth: owners: [\"team-growth\"]\n",
		"growth/flags/f.cue": strings.Replace(flagSetV1, "%s", "true", 1),
	})
	p := servePipeline(t, repo, nil)
	ctx := t.Context()
	url := p.ClientURL()
	poll.Until(t, "v1 published", poll.Patience, func() (bool, string) {
		code, out, errOut := run(ctx, "flags", "eval", "growth/flags", "checkout-v2", "--published", "--nats", url, "--ctx", "targetingKey=user-2")
		return code == 0, out.String() + errOut.String()
	})
	repo.CommitFiles("growth: checkout-v2 off", map[string]string{
		"growth/flags/f.cue": strings.Replace(flagSetV1, "%s", "false", 1),
	})
	poll.Until(t, "v2 published and evaluated", poll.Patience, func() (bool, string) {
		code, out, errOut := run(ctx, "flags", "eval", "growth/flags", "checkout-v2", "--published", "--nats", url, "--ctx", "targetingKey=user-2")
		return code == 0 && strings.Contains(out.String(), "reason:  DISABLED") && strings.Contains(out.String(), "growth/flags@2"), out.String() + errOut.String()
	})
	code, out, errOut := run(ctx, "flags", "eval", "growth/flags", "checkout-v2", "--published", "--version", "1", "--nats", url, "--ctx", "targetingKey=user-2")
	if code != 0 || !strings.Contains(out.String(), "checkout-v2 = true") || !strings.Contains(out.String(), "position:  9543") || !strings.Contains(out.String(), "growth/flags@1") {
		t.Errorf("--version 1: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run(ctx, "flags", "eval", "growth/flags", "checkout-v2", "--published", "--version", "9", "--nats", url); code != 2 || !strings.Contains(errOut.String(), "growth/flags@9 is not stored") {
		t.Errorf("--version 9: exit %d, stderr %q; want 2 naming the version", code, errOut)
	}
}
