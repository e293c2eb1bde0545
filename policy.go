package cuecast

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("5m", "1h30m"), which is how people write hold times in the
// manifest. A bare JSON number is read as nanoseconds so that values written
// by older tools still decode.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of nanoseconds. It
// returns an error for anything else, or for a negative duration.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if nerr := json.Unmarshal(b, &n); nerr != nil {
			return fmt.Errorf("decode duration %s: want a string like \"5m\"", b)
		}
		if n < 0 {
			return fmt.Errorf("decode duration %s: negative", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("decode duration: %w", err)
	}
	if v < 0 {
		return fmt.Errorf("decode duration %q: negative", s)
	}
	*d = Duration(v)
	return nil
}

// String is the Go duration form.
func (d Duration) String() string { return time.Duration(d).String() }

// Stage is one step of a rollout. It covers the cohort buckets below Percent
// plus any instances named explicitly or matching Labels (canary hosts). The
// controller advances past it only after Hold has passed with the stage's
// instances healthy: at least MinInstances reporting, at most MaxUnhealthy
// (a share, 0..1) of them unhealthy and at most MaxApplyFailures of them
// failing to apply. Analysis, when set, also judges the stage on the
// service's own metrics, cohort against baseline (Metric); the stage then
// passes only once each metric's last evaluation passed.
type Stage struct {
	Name             string            `json:"name"`
	Percent          int               `json:"percent,omitempty"`
	Instances        []string          `json:"instances,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	MinInstances     int               `json:"min_instances,omitempty"`
	Hold             Duration          `json:"hold,omitempty"`
	MaxUnhealthy     float64           `json:"max_unhealthy,omitempty"`
	MaxApplyFailures float64           `json:"max_apply_failures,omitempty"`
	Analysis         []Metric          `json:"analysis,omitempty"`
}

// Policy is a namespace's rollout policy: its stages, in order. The last
// stage normally covers 100%.
type Policy struct {
	Stages []Stage `json:"stages"`
}

// DefaultPolicy is the policy of a namespace whose manifest entry names none:
// one stage, "all", covering every instance at once.
func DefaultPolicy() Policy {
	return Policy{Stages: []Stage{{Name: "all", Percent: 100}}}
}
