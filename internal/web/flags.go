package web

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cuecast/cuecast/flags"
)

// flagView is one flag of a flag set version as the dashboard shows it:
// its switch, its rules in order and what its fallthrough serves (the
// current rollout).
type flagView struct {
	Key            string     `json:"key"`
	Type           string     `json:"type"`
	On             bool       `json:"on"`
	OffVariant     string     `json:"off_variant"`
	DefaultVariant string     `json:"default_variant"`
	Prerequisites  []string   `json:"prerequisites,omitempty"`
	Rules          []ruleView `json:"rules,omitempty"`
	// Fallthrough is what a context no rule matches gets, "" for the
	// default variant.
	Fallthrough string `json:"fallthrough,omitempty"`
}

type ruleView struct {
	ID     string `json:"id,omitempty"`
	When   string `json:"when"`
	Serves string `json:"serves"`
}

// flagViews describes body when it is a flag set (schema flags.Schema);
// nil otherwise.
func flagViews(body []byte) []flagView {
	var s flags.Set
	if len(body) == 0 || json.Unmarshal(body, &s) != nil || s.Schema != flags.Schema {
		return nil
	}
	out := []flagView{}
	for _, key := range slices.Sorted(maps.Keys(s.Flags)) {
		f := s.Flags[key]
		fv := flagView{Key: key, Type: string(f.Type), On: f.On != nil && *f.On, OffVariant: f.OffVariant,
			DefaultVariant: f.DefaultVariant, Fallthrough: serves(f.Fallthrough)}
		for _, p := range f.Prerequisites {
			fv.Prerequisites = append(fv.Prerequisites, p.Flag+" is "+p.Variant)
		}
		for _, r := range f.Rules {
			var when []string
			for _, c := range r.Clauses {
				vals := make([]string, len(c.Values))
				for i, v := range c.Values {
					vals[i] = string(v)
				}
				op := string(c.Op)
				if c.Negate {
					op = "not " + op
				}
				when = append(when, fmt.Sprintf("%s %s %s", c.Attribute, op, strings.Join(vals, ", ")))
			}
			fv.Rules = append(fv.Rules, ruleView{ID: r.ID, When: strings.Join(when, " and "), Serves: serves(&r.Serve)})
		}
		out = append(out, fv)
	}
	return out
}

// serves words what a rule or the fallthrough serves: "on", or a rollout's
// shares "on 20% · off 80%", with the attribute when it is not the
// targeting key.
func serves(s *flags.Serve) string {
	switch {
	case s == nil:
		return ""
	case s.Rollout != nil:
		parts := make([]string, len(s.Rollout.Weights))
		for i, w := range s.Rollout.Weights {
			// A weight is in thousandths of a percent (flags.Whole is 100%).
			parts[i] = w.Variant + " " + strconv.FormatFloat(float64(w.Weight)*100/flags.Whole, 'f', -1, 64) + "%"
		}
		out := strings.Join(parts, " · ")
		if s.Rollout.BucketBy != "" && s.Rollout.BucketBy != flags.DefaultBucketBy {
			out += " by " + s.Rollout.BucketBy
		}
		return out
	default:
		return s.Variant
	}
}
