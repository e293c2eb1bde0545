package cli_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestStatusShowsRefusedApartFromFailing: an instance whose last report
// refused a forged pointer (Report.Refused, PROTOCOL.md §5) is shown as
// refused, by name, and not as failing to apply; one whose apply failed is
// shown as failing. Status showed neither (issue 17, issue 15 item 5).
func TestStatusShowsRefusedApartFromFailing(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, testStatusShowsRefusedApartFromFailing)
}

func testStatusShowsRefusedApartFromFailing(t *testing.T) {
	t.Parallel()
	p, fl := pipelinetest.RunInMode(t, pipeline.Config{Repo: exampleRepo(t).Dir}, natstest.FleetOptions{Namespaces: exampleNamespaces})
	ctx := t.Context()
	// v1's rollout complete, so every instance is where the rollout means
	// it and the count column is the steady one (read while the controller
	// was still placing v1, it added "0/3 where the rollout means them").
	awaitRolledOut(t, p, checkoutCfg, 1)
	for _, r := range []cuecast.Report{
		{Instance: "web-1", Version: 1, Healthy: true},
		{Instance: "web-2", Version: 1, Healthy: true, LastError: "version 2: validate: limit must be positive"},
		{Instance: "web-3", Version: 1, Healthy: true, Refused: "version 2: pointer: bad signature"},
	} {
		r.Config = checkoutCfg
		fl.Report(t, r)
	}
	var out string
	poll.Until(t, "status with three instances", 20*time.Second, func() (bool, string) {
		code, o, e := run(ctx, append(append([]string{"status", "--nats", fl.HubURL()}, fl.Login(natsconf.OperatorUser)...), "payments/checkout")...)
		out = o.String()
		return code == 0 && strings.Contains(out, "/3 instances"), fmt.Sprintf("exit %d, stdout %q, stderr %q", code, out, e)
	})
	// The failing list holds web-2 alone, and the refused list, right
	// after it, web-3 alone.
	for _, want := range []string{
		"3/3 instances, 1 failing to apply, 1 refused a pointer",
		"  failing to apply (their last apply failed):\n    web-2 on v1: version 2: validate: limit must be positive\n" +
			"  refused (a forged or unverifiable pointer, not applied; not an apply failure):\n    web-3 on v1: version 2: pointer: bad signature\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status payments/checkout lacks %q:\n%s", want, out)
		}
	}
}
