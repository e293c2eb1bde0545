package web_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestNamedStageOnTheConfigPage: a rollout whose canary names one
// instance shows that instance in the canary on the config page. On a
// tree the hub holds the region's summary groups only, which are in a
// stage by their bucket; the page showed the named canary with no
// instances (while `cuecast rollout status` counted it) until it asked
// the region for the instances the stages name, as the controller does.
func TestNamedStageOnTheConfigPage(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		policy := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "canary", Instances: []string{"checkout-a"}, Hold: cuecast.Duration(time.Hour)},
			{Name: "all", Percent: 100},
		}}}
		f := start(t, fixtureOptions{policies: policy})
		for _, id := range []string{"checkout-a", "checkout-b", "checkout-c"} {
			f.watch(checkout, id)
		}
		f.waitRollout()
		type stage struct {
			Name      string
			Instances int
			OnTarget  int `json:"on_target"`
		}
		var cv struct {
			Rollout struct {
				Version uint64
				Stages  []stage
				Counted string
			}
		}
		poll.Until(t, "the page counting the named canary and the fleet", poll.Patience, func() (bool, string) {
			_, body := get(t, f.base+"/api/configs/"+string(checkout))
			cv.Rollout.Stages, cv.Rollout.Counted = nil, ""
			if err := json.Unmarshal([]byte(body), &cv); err != nil {
				t.Fatal(err)
			}
			st := cv.Rollout.Stages
			return len(st) == 2 && st[0] == stage{"canary", 1, 1} && st[1] == stage{"all", 3, 1} && cv.Rollout.Counted == "",
				fmt.Sprintf("stages %+v, counted %q", st, cv.Rollout.Counted)
		})
	})
}
