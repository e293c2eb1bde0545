package web_test

import (
	"encoding/json"
	"fmt"
	"strings"
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
// A region that does not answer leaves its instances counted by bucket,
// and the page says which.
func TestNamedStageOnTheConfigPage(t *testing.T) {
	policy := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: []string{"checkout-a"}, Hold: cuecast.Duration(time.Hour)},
		{Name: "all", Percent: 100},
	}}}
	inBothModes(t, fixtureOptions{policies: policy}, func(t *testing.T, f *fixture) {
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
		if !natstest.InTree(t) {
			return // a single server holds each instance's own report
		}

		// A region that summarises the config and does not answer: its
		// instances stay counted by bucket, and the page says so.
		summarise := silentRegion(t, f.fl.Hub(t), 1)
		poll.Until(t, "the page naming the region that did not answer", poll.Patience, func() (bool, string) {
			if err := summarise(); err != nil {
				return false, err.Error()
			}
			_, body := get(t, f.base+"/api/configs/"+string(checkout))
			cv.Rollout.Stages, cv.Rollout.Counted = nil, ""
			if err := json.Unmarshal([]byte(body), &cv); err != nil {
				t.Fatal(err)
			}
			st := cv.Rollout.Stages
			// leaf-1 answered: its named instance is still counted by name.
			return len(st) == 2 && st[0] == stage{"canary", 1, 1} && strings.Contains(cv.Rollout.Counted, "us-east did not answer within 2s"),
				fmt.Sprintf("stages %+v, counted %q", st, cv.Rollout.Counted)
		})
	})
}
