package mutator

import (
	"fmt"
	"strconv"

	"github.com/cuecast/cuecast"
)

// Subject is the commit subject of c on cfg's flag set, which `cuecast
// flags set` and the HTTP API both give their commits.
func (c FlagChange) Subject(cfg cuecast.ConfigPath) string {
	what := "rollout"
	if c.Rule != "" {
		what = "rule " + c.Rule + "'s rollout"
	}
	switch {
	case c.Enable:
		return fmt.Sprintf("%s: switch %s on", cfg, c.Flag)
	case c.Disable:
		return fmt.Sprintf("%s: switch %s off", cfg, c.Flag)
	case c.Rollout != nil:
		return fmt.Sprintf("%s: %s %s to %s%% of users", cfg, c.Flag, what, strconv.FormatFloat(*c.Rollout, 'f', -1, 64))
	}
	return fmt.Sprintf("%s: %s %s shares changed", cfg, c.Flag, what)
}
