package mutator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// FlagChange is a change to one flag of a flag set (docs/FLAGS.md):
// exactly one of Enable, Disable, Rollout and Shares.
type FlagChange struct {
	Flag string
	// Enable and Disable set the kill switch (on).
	Enable, Disable bool
	// Rollout is the percentage (0–100, to a thousandth) of users served
	// the rollout's variant other than the flag's off variant; the off
	// variant gets the rest. The rollout must have two weights. Nil when
	// not changing it.
	Rollout *float64
	// Shares are percentages per variant, for a rollout of any number of
	// weights; every weighted variant is named and they sum to 100.
	Shares map[string]float64
	// Rule, when set, is the rule (its id, or its index) whose rollout
	// changes; otherwise the fallthrough's.
	Rule string
}

// FlagAssignments reads cfg's flag as the head has it and returns the
// assignments making change, with Expect holding the values read: applied
// with Set, the change fails with a *ConflictError if someone changed the
// flag in between rather than overwriting their change.
//
// Errors: *RequestError (no such flag, rule or rollout; shares that do not
// fit), *CompileError, ctx.Err().
func (m *Mutator) FlagAssignments(ctx context.Context, cfg cuecast.ConfigPath, variant map[string]string, change FlagChange) (set, expect []Assignment, err error) {
	n := 0
	for _, b := range []bool{change.Enable, change.Disable, change.Rollout != nil, len(change.Shares) > 0} {
		if b {
			n++
		}
	}
	if n != 1 {
		return nil, nil, badRequest("flags set: give exactly one of enable, disable, rollout and shares")
	}
	flag := `flags.` + strconv.Quote(change.Flag)
	ex, err := compiler.Explain(ctx, m.dir, cfg, compiler.ExplainOptions{Variant: variant, Path: flag, Timeout: m.opts.Timeout})
	if err != nil {
		return nil, nil, explainErr(err)
	}
	leaves := map[string]json.RawMessage{}
	for _, ev := range ex.Values {
		leaves[strings.TrimPrefix(normPath(ev.Path), normPath(flag))] = ev.JSON
	}
	if change.Enable || change.Disable {
		on := ".on"
		old, ok := leaves[on]
		if !ok {
			return nil, nil, badRequest("flags set: %s has no flag %q", cfg, change.Flag)
		}
		return []Assignment{{Path: flag + on, Value: strconv.FormatBool(change.Enable)}}, []Assignment{{Path: flag + on, Value: string(old)}}, nil
	}
	at := ".fallthrough.rollout.weights"
	if change.Rule != "" {
		i, err := ruleIndex(leaves, change.Rule)
		if err != nil {
			return nil, nil, badRequest("flags set: %s: flag %q: %v", cfg, change.Flag, err)
		}
		at = fmt.Sprintf(".rules[%d].rollout.weights", i)
	}
	var variants []string
	var weights []json.RawMessage
	for i := 0; ; i++ {
		v, ok := leaves[fmt.Sprintf("%s[%d].variant", at, i)]
		if !ok {
			break
		}
		var name string
		_ = json.Unmarshal(v, &name)
		variants = append(variants, name)
		weights = append(weights, leaves[fmt.Sprintf("%s[%d].weight", at, i)])
	}
	if len(variants) == 0 {
		return nil, nil, badRequest("flags set: %s: flag %q has no rollout at %s (serve a rollout there first, by hand)", cfg, change.Flag, strings.TrimPrefix(at, "."))
	}
	shares := change.Shares
	if change.Rollout != nil {
		var off string
		_ = json.Unmarshal(leaves[".offVariant"], &off)
		if len(variants) != 2 || (variants[0] == off) == (variants[1] == off) {
			return nil, nil, badRequest("flags set: %s: flag %q: --rollout needs a rollout of two variants, one of them the off variant %q (it has %s): give each share instead", cfg, change.Flag, off, strings.Join(variants, ", "))
		}
		on := variants[0]
		if on == off {
			on = variants[1]
		}
		shares = map[string]float64{on: *change.Rollout, off: 100 - *change.Rollout}
	}
	total := 0
	for i, v := range variants {
		p, ok := shares[v]
		if !ok {
			return nil, nil, badRequest("flags set: %s: flag %q: no share given for variant %q", cfg, change.Flag, v)
		}
		w := math.Round(p * 1000)
		if p < 0 || p > 100 || math.Abs(w-p*1000) > 1e-6 {
			return nil, nil, badRequest("flags set: share %v%% of %q: a percentage from 0 to 100, to a thousandth", p, v)
		}
		total += int(w)
		path := fmt.Sprintf("%s%s[%d].weight", flag, at, i)
		set = append(set, Assignment{Path: path, Value: strconv.Itoa(int(w))})
		expect = append(expect, Assignment{Path: path, Value: string(weights[i])})
	}
	if len(shares) != len(variants) || total != 100000 {
		return nil, nil, badRequest("flags set: %s: flag %q: the shares must name the rollout's variants (%s) and sum to 100%%", cfg, change.Flag, strings.Join(variants, ", "))
	}
	return set, expect, nil
}

// ruleIndex finds a rule by id or index among a flag's leaves.
func ruleIndex(leaves map[string]json.RawMessage, rule string) (int, error) {
	for i := 0; ; i++ {
		id, idOK := leaves[fmt.Sprintf(".rules[%d].id", i)]
		_, any := leaves[fmt.Sprintf(".rules[%d].variant", i)]
		if !idOK && !any && !hasPrefix(leaves, fmt.Sprintf(".rules[%d].", i)) {
			break
		}
		if string(id) == strconv.Quote(rule) || strconv.Itoa(i) == rule {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no rule %q (name it by its id or its index)", rule)
}

func hasPrefix(m map[string]json.RawMessage, p string) bool {
	for k := range m {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// explainErr maps an error of compiler.Explain to the mutator's.
func explainErr(err error) error {
	var ce *compiler.CompileError
	switch {
	case errors.As(err, &ce):
		return &CompileError{Errors: ce.Errors}
	case errors.Is(err, compiler.ErrUnknownConfig), errors.Is(err, compiler.ErrUnknownPath), errors.Is(err, compiler.ErrUnknownVariant), errors.Is(err, compiler.ErrNoModule):
		return &RequestError{Err: err}
	}
	return fmt.Errorf("explain: %w", err)
}
