package ci

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// Status is what a change does to one config.
type Status string

// The statuses of an affected config.
const (
	StatusAdded        Status = "added"         // new at head, compiles
	StatusRemoved      Status = "removed"       // gone at head
	StatusRenamed      Status = "renamed"       // gone from From, same output at Config
	StatusChanged      Status = "changed"       // compiled output differs
	StatusUnchanged    Status = "unchanged"     // its CUE changed, its output did not
	StatusInvalid      Status = "invalid"       // does not compile at head: the change broke it
	StatusStillInvalid Status = "still-invalid" // did not compile at base either: pre-existing
	StatusFixed        Status = "fixed"         // did not compile at base, compiles at head
)

// Revision is one side of the comparison: what was asked and what it named.
type Revision struct {
	Rev    string `json:"rev"`
	Commit string `json:"commit"`
}

// Report is the outcome of Check. Its JSON form is what `cuecast check
// --output json` prints.
type Report struct {
	Base Revision `json:"base"`
	Head Revision `json:"head"`
	// MergeBase is set when Base is not an ancestor of Head: the commit
	// actually compared against.
	MergeBase    string   `json:"merge_base,omitempty"`
	ChangedFiles []string `json:"changed_files"`
	// Everything is set when the manifest or cue.mod/ changed, so every
	// config was compiled at both revisions.
	Everything bool           `json:"everything,omitempty"`
	Risk       Risk           `json:"risk"`
	Configs    []ConfigChange `json:"configs"`
	// Errors are the errors and lint findings at head, in the affected
	// configs and in files no config owns (the manifest, libraries).
	Errors     []Finding   `json:"errors"`
	Namespaces []Namespace `json:"namespaces"`
	// Undeclared are top-level directories where the change touches CUE
	// files that no namespace holds and no config imports: nothing there
	// is compiled, which is what a forgotten namespace declaration looks
	// like. A warning; the check does not fail for it.
	Undeclared []string `json:"undeclared,omitempty"`
	// Origins are where the values the change touched come from at head;
	// Check fills it with Options.Explain, ExplainChanges afterwards
	// (cuecast check does for the pull request comment and --output
	// markdown).
	Origins []ValueOrigin `json:"origins,omitempty"`
	// Bindings are the namespaces whose typed bindings (`cuecast gen`)
	// the change alters, when it touches a file a schema can read. A
	// warning; the check does not fail for it.
	Bindings []BindingsChange `json:"bindings,omitempty"`
	// Analysis is what the changed configs' rollouts will be judged by
	// on the service's metrics, stage by stage (analysis.go).
	Analysis []Judgement `json:"analysis,omitempty"`
}

// ConfigChange is one affected config.
type ConfigChange struct {
	Config cuecast.ConfigPath `json:"config"`
	Status Status             `json:"status"`
	// From is the old path of a renamed config.
	From         cuecast.ConfigPath `json:"from,omitempty"`
	BaseChecksum string             `json:"base_checksum,omitempty"`
	HeadChecksum string             `json:"head_checksum,omitempty"`
	// Diff is the compiled difference of a changed config; of an added
	// config it is every top-level field, added.
	Diff []Difference `json:"diff,omitempty"`
	// Errors counts this config's errors at head.
	Errors int `json:"errors,omitempty"`
	// Instances is how many live instances run this path (and From's, for
	// a renamed config); nil when the fleet was not counted
	// (CountInstances, cuecast check --fleet).
	Instances *int `json:"instances,omitempty"`
}

// Finding is one error or lint finding at head. PreExisting is set when the
// change did not cause it, and then the check does not fail for it: an error
// in a config that was already invalid at the base, or an error of no config
// (the manifest, a library file) that the base had too (same file, ID and
// message; lines move).
type Finding struct {
	compiler.Error
	PreExisting bool `json:"pre_existing,omitempty"`
}

// Namespace is a namespace the change touches, as the head's manifest (or
// the base's, for a namespace the change removes) describes it.
type Namespace struct {
	Name        string              `json:"name"`
	Owners      []string            `json:"owners"`
	Consistency cuecast.Consistency `json:"consistency,omitempty"`
	// ImportConfigsFrom are the other namespaces whose configs this one's
	// may import (the manifest's import_configs_from); none when empty.
	ImportConfigsFrom []string             `json:"import_configs_from,omitempty"`
	Configs           []cuecast.ConfigPath `json:"configs"`
}

// Risk is the change's blast radius, shown at the top of every report.
type Risk struct {
	// Level is computed from what the compiled outputs do, not from what
	// the change could reach (ci/README.md states the levels):
	//
	//   - "low": no config's compiled output changes;
	//   - "medium": outputs change, none of the below;
	//   - "high": a breaking change (a field removed or retyped, a config
	//     removed or moved), a changed output of a config with strict
	//     consistency (its namespace's or its own override), a flag rollout
	//     reshuffled, one library change altering at least the fan-out
	//     threshold of outputs (wide), or a manifest or cue.mod/ change
	//     that alters any output.
	Level string `json:"level"`
	// Configs is how many configs' output changes (or breaks), a config
	// with variants once; Compiled how many outputs (configs and
	// variants) were compiled at head because the change could affect
	// them.
	Configs int `json:"configs"`
	// Variants is how many variants of configs (docs/VARIANTS.md) change;
	// DistinctOutputs how many different outputs they have at head, so
	// "6 variants, 2 distinct outputs" is two things to review.
	Variants        int `json:"variants,omitempty"`
	DistinctOutputs int `json:"distinct_outputs,omitempty"`
	Compiled        int `json:"compiled"`
	// Namespaces is how many namespaces hold a config that counts in
	// Configs (for a renamed config, its old namespace too).
	Namespaces int `json:"namespaces"`
	// Instances is how many distinct live instances run the configs and
	// variants whose output changes, when InstancesCounted says the fleet
	// was counted (CountInstances, cuecast check --fleet); an instance
	// running several of them counts once. Set (0 too) only when counted.
	Instances        *int `json:"instances,omitempty"`
	InstancesCounted bool `json:"instances_counted,omitempty"`
	// Strict lists changed configs that roll out with strict consistency (their
	// namespace's class, or their own override in the manifest).
	Strict []cuecast.ConfigPath `json:"strict,omitempty"`
	// Libraries lists changed library directories and the configs they reach.
	Libraries []Library `json:"libraries,omitempty"`
	// Breaking lists changes that services reading the old output may not
	// survive.
	Breaking []Breaking `json:"breaking,omitempty"`
	// NewFields lists object fields the change adds to existing configs:
	// harmless to services that ignore unknown fields, fatal to those
	// decoding strictly until they learn the field.
	NewFields []Breaking `json:"new_fields,omitempty"`
	// FlagRollouts are the feature flag rollouts the change alters, with
	// the share of users whose variant changes; Reshuffles counts those
	// that move more users than their weights require and do not say they
	// mean to (a reason to fail, like a new error).
	FlagRollouts []FlagRollout `json:"flag_rollouts,omitempty"`
	Reshuffles   int           `json:"reshuffles,omitempty"`
	// NewErrors counts errors at head that the base did not have.
	NewErrors   int `json:"new_errors"`
	PreExisting int `json:"pre_existing_errors"`
}

// Library is a changed directory outside every namespace and the configs that
// import it. Changes counts those whose compiled output the change alters;
// Wide is set when they number at least the fan-out threshold (a library
// many configs import whose change alters no output is not wide).
type Library struct {
	Dir     string               `json:"dir"`
	Configs []cuecast.ConfigPath `json:"configs"`
	Changes int                  `json:"changes"`
	Wide    bool                 `json:"wide,omitempty"`
}

// Breaking is one breaking change: a field removed or retyped, or a whole
// config removed or moved (Path empty).
type Breaking struct {
	Config cuecast.ConfigPath `json:"config"`
	Path   string             `json:"path,omitempty"`
	Reason string             `json:"reason"`
}

// Failed reports whether the change leaves a config invalid that the base
// had valid, or reshuffles a flag rollout's users without saying it means
// to: the check's verdict (exit status 3, check run failure).
func (r *Report) Failed() bool { return r.Risk.NewErrors > 0 || r.Risk.Reshuffles > 0 }

// build fills Configs, Errors, Namespaces and the risk figures from the two
// compiles, in named steps: what happened to each config, the errors at
// head, then the namespaces and the risks.
func (r *Report) build(base, head *compiler.Result, targets []cuecast.ConfigPath) error {
	baseErrs := errorsByConfig(base.Errors)
	if err := r.configChanges(base, head, variantTargets(base, head, targets), baseErrs); err != nil {
		return err
	}
	r.headErrors(base, head, targets, baseErrs)
	r.flagRollouts(outputJSON(base), outputJSON(head))
	r.namespaces(base, head)
	strict := func(cp cuecast.ConfigPath) bool {
		// The class the rollout uses: the config's own override, else its
		// namespace's (Manifest.Policy); the head's manifest, or the base's
		// for a config the change removes.
		for _, m := range []*compiler.Manifest{head.Manifest, base.Manifest} {
			if m == nil {
				continue
			}
			if _, ok := m.Namespaces[cp.Namespace()]; ok {
				_, c := m.Policy(cp)
				return c == cuecast.Strict
			}
		}
		return false
	}
	seen := riskSeen{configs: make(map[cuecast.ConfigPath]bool), outputs: make(map[string]bool), namespaces: make(map[string]bool)}
	for _, cc := range r.Configs {
		r.risks(cc, strict, seen)
	}
	r.Risk.Compiled = len(r.Configs)
	// Not len(r.Namespaces): that lists every namespace a reported config
	// is in, unchanged ones too, and a manifest change reports them all.
	r.Risk.Namespaces = len(seen.namespaces)
	r.judgements(base, head)
	return nil
}

// configChanges fills Configs: each target's status at head against base,
// with the diff of its output, and configs moved unchanged paired up as
// renames.
func (r *Report) configChanges(base, head *compiler.Result, targets []cuecast.ConfigPath, baseErrs map[cuecast.ConfigPath]int) error {
	baseHas, headHas := set(base.Configs), set(head.Configs)
	headErrs := errorsByConfig(head.Errors)
	var added, removed []int
	r.Configs = []ConfigChange{}
	for _, cp := range targets {
		bo, bok := base.Outputs[cp]
		ho, hok := head.Outputs[cp]
		inBase, inHead, bErrs := baseHas[cp], headHas[cp], baseErrs[cp] > 0
		if cp.IsVariant() {
			// A variant exists at a side where its config does and it
			// compiled or failed there (a failed config may have had it).
			b := cp.Base()
			inBase = baseHas[b] && (bok || baseErrs[cp] > 0 || baseErrs[b] > 0)
			inHead = headHas[b] && (hok || headErrs[cp] > 0 || headErrs[b] > 0)
			bErrs = bErrs || baseErrs[b] > 0
		}
		cc := ConfigChange{Config: cp, BaseChecksum: bo.Checksum, HeadChecksum: ho.Checksum, Errors: headErrs[cp]}
		status, ok := configStatus(head.Manifest != nil, inBase, inHead, bok, hok, bErrs, bo.Checksum == ho.Checksum)
		if !ok {
			continue
		}
		cc.Status = status
		switch status {
		case StatusRemoved:
			cc.HeadChecksum = ""
			removed = append(removed, len(r.Configs))
		case StatusAdded:
			added = append(added, len(r.Configs))
		}
		if head.Manifest == nil {
			cc.HeadChecksum = ""
		}
		d, err := outputDiff(status, bo.JSON, ho.JSON)
		if err != nil {
			return fmt.Errorf("diff %s: %w", cp, err)
		}
		if _, ok := flagSet(ho.JSON); ok {
			evaluatorKnows(d)
		}
		cc.Diff = d
		r.Configs = append(r.Configs, cc)
	}
	r.renames(added, removed)
	return nil
}

// configStatus decides a config's status from where it exists (inBase,
// inHead), where it compiled (bok, hok), whether the base had errors in it
// and whether both outputs are equal. ok is false for a config to leave
// out. Without a manifest at head (hasManifest false) there is no list of
// its configs: what the base had cannot compile, which the manifest's
// errors say.
func configStatus(hasManifest, inBase, inHead, bok, hok, baseErrs, same bool) (status Status, ok bool) {
	switch {
	case !hasManifest && !inBase:
		return "", false
	case !hasManifest && !bok && baseErrs:
		return StatusStillInvalid, true
	case !hasManifest:
		return StatusInvalid, true
	case !inBase && !inHead:
		return "", false
	case !inHead:
		return StatusRemoved, true
	case !hok && (!inBase || !bok && !baseErrs):
		return StatusInvalid, true
	case !hok && !bok:
		return StatusStillInvalid, true
	case !hok:
		return StatusInvalid, true
	case !inBase:
		return StatusAdded, true
	case !bok:
		return StatusFixed, true
	case same:
		return StatusUnchanged, true
	default:
		return StatusChanged, true
	}
}

// outputDiff is the diff a config of that status shows: base to head for a
// change, and everything as added for a new or fixed config (no service
// read it before, so no field is new to one).
func outputDiff(status Status, base, head []byte) ([]Difference, error) {
	switch status {
	case StatusChanged:
		return Diff(base, head)
	case StatusAdded, StatusFixed:
		d, err := Diff([]byte("{}"), head)
		if err != nil {
			return nil, err
		}
		for i := range d {
			d[i].NewField = false
		}
		return d, nil
	}
	return nil, nil
}

// headErrors fills Errors and counts new and pre-existing ones: the errors
// at head of the affected configs and those of no config.
func (r *Report) headErrors(base, head *compiler.Result, targets []cuecast.ConfigPath, baseErrs map[cuecast.ConfigPath]int) {
	inTargets := set(targets)
	seen := make(map[string]bool)
	for _, e := range base.Errors {
		seen[findingKey(e)] = true
	}
	r.Errors = []Finding{}
	for _, e := range head.Errors {
		if e.Config != "" && !inTargets[e.Config] && !inTargets[e.Config.Base()] {
			continue
		}
		pre := seen[findingKey(e)]
		if e.Config != "" {
			// The compiler stops at a config's first error, so the
			// base's errors in a broken config are not a full list:
			// what counts is that it was broken already (the variant,
			// or the whole config).
			pre = baseErrs[e.Config] > 0 || baseErrs[e.Config.Base()] > 0
		}
		f := Finding{Error: e, PreExisting: pre}
		if f.PreExisting {
			r.Risk.PreExisting++
		} else {
			r.Risk.NewErrors++
		}
		r.Errors = append(r.Errors, f)
	}
}

// namespaces fills Namespaces: each namespace a reported config (or the
// config it was moved from) is in, with its owners and class as the
// manifest at head says (else at base), sorted.
func (r *Report) namespaces(base, head *compiler.Result) {
	byNS := make(map[string]*Namespace)
	var names []string
	for _, cc := range r.Configs {
		for _, cp := range []cuecast.ConfigPath{cc.Config, cc.From} {
			if cp == "" {
				continue
			}
			ns := cp.Namespace()
			n, ok := byNS[ns]
			if !ok {
				n = &Namespace{Name: ns, Owners: []string{}}
				if m, ok := lookupNamespace(ns, head.Manifest, base.Manifest); ok {
					n.Owners, n.Consistency, n.ImportConfigsFrom = m.Owners, m.Consistency, m.ImportConfigsFrom
				}
				byNS[ns] = n
				names = append(names, ns)
			}
			if !slices.Contains(n.Configs, cp) {
				n.Configs = append(n.Configs, cp)
			}
		}
	}
	slices.Sort(names)
	r.Namespaces = []Namespace{}
	for _, ns := range names {
		n := byNS[ns]
		slices.Sort(n.Configs)
		r.Namespaces = append(r.Namespaces, *n)
	}
}

// riskSeen is what risks has counted so far in one build: configs (a
// config with variants counts once), variants' outputs, and the
// namespaces of the configs that count.
type riskSeen struct {
	configs    map[cuecast.ConfigPath]bool
	outputs    map[string]bool
	namespaces map[string]bool
}

// risks adds what cc contributes to the risk summary: a config whose
// output changes counts, is strict when its namespace is, and its removal,
// move, removed or retyped fields and new fields are listed.
func (r *Report) risks(cc ConfigChange, strict func(cuecast.ConfigPath) bool, seen riskSeen) {
	if !countsAsChange(cc.Status) {
		return
	}
	if cc.Config.IsVariant() {
		r.Risk.Variants++
		if cc.HeadChecksum != "" && !seen.outputs[cc.HeadChecksum] {
			seen.outputs[cc.HeadChecksum] = true
			r.Risk.DistinctOutputs++
		}
	}
	if !seen.configs[cc.Config.Base()] {
		seen.configs[cc.Config.Base()] = true
		r.Risk.Configs++
	}
	// A config moved to another namespace leaves one and enters the
	// other: both change.
	seen.namespaces[cc.Config.Namespace()] = true
	if cc.From != "" {
		seen.namespaces[cc.From.Namespace()] = true
	}
	if strict(cc.Config) {
		r.Risk.Strict = append(r.Risk.Strict, cc.Config)
	}
	switch cc.Status {
	case StatusRemoved:
		r.Risk.Breaking = append(r.Risk.Breaking, Breaking{Config: cc.Config, Reason: "config removed"})
	case StatusRenamed:
		r.Risk.Breaking = append(r.Risk.Breaking, Breaking{Config: cc.From, Reason: "config moved to " + string(cc.Config)})
	case StatusChanged:
		for _, d := range cc.Diff {
			if d.NewField {
				r.Risk.NewFields = append(r.Risk.NewFields, Breaking{Config: cc.Config, Path: d.Path, Reason: "new field"})
			}
			if !d.Breaking {
				continue
			}
			reason := "field removed"
			if d.Op == OpType {
				reason = fmt.Sprintf("type changed: %s → %s", typeOf(d.Old), typeOf(d.New))
			}
			r.Risk.Breaking = append(r.Risk.Breaking, Breaking{Config: cc.Config, Path: d.Path, Reason: reason})
		}
	}
}

// renames pairs removed and added configs whose outputs are identical: a
// config moved without changing what services receive.
func (r *Report) renames(added, removed []int) {
	drop := make(map[int]bool)
	for _, ri := range removed {
		for _, ai := range added {
			a, rm := &r.Configs[ai], r.Configs[ri]
			if drop[ai] || a.Status != StatusAdded || a.HeadChecksum != rm.BaseChecksum || rm.BaseChecksum == "" {
				continue
			}
			a.Status, a.From, a.BaseChecksum, a.Diff = StatusRenamed, rm.Config, rm.BaseChecksum, nil
			drop[ri] = true
			break
		}
	}
	if len(drop) == 0 {
		return
	}
	var kept []ConfigChange
	for i, cc := range r.Configs {
		if !drop[i] {
			kept = append(kept, cc)
		}
	}
	r.Configs = kept
}

// libraries fills Risk.Libraries and Risk.Level. A library is a directory
// outside the namespaces holding a changed file; its reach is what the
// dependency index says at either side.
func (r *Report) libraries(base, head *compiler.Result, changed []string, fanOut int) {
	byDir := make(map[string][]string)
	for _, f := range changed {
		if compiler.AffectsAll(f) {
			continue
		}
		first, _, _ := strings.Cut(f, "/")
		if _, ok := lookupNamespace(first, head.Manifest, base.Manifest); ok {
			continue
		}
		byDir[path.Dir(f)] = append(byDir[path.Dir(f)], f)
	}
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		var reach []cuecast.ConfigPath
		for _, ix := range []*compiler.Index{base.Index, head.Index} {
			if ix != nil {
				reach = union(reach, ix.Affected(byDir[dir]))
			}
		}
		if reach == nil {
			reach = []cuecast.ConfigPath{}
		}
		changed := make(map[cuecast.ConfigPath]bool)
		for _, cc := range r.Configs {
			if _, found := slices.BinarySearch(reach, cc.Config.Base()); found && countsAsChange(cc.Status) {
				changed[cc.Config.Base()] = true
			}
		}
		changes := len(changed)
		r.Risk.Libraries = append(r.Risk.Libraries, Library{Dir: dir, Configs: reach, Changes: changes, Wide: changes >= fanOut})
	}
	r.Risk.Level = "low"
	if r.Risk.Configs > 0 {
		r.Risk.Level = "medium"
	}
	wide := slices.ContainsFunc(r.Risk.Libraries, func(l Library) bool { return l.Wide })
	if len(r.Risk.Breaking) > 0 || len(r.Risk.Strict) > 0 || wide || r.Risk.Reshuffles > 0 || (r.Everything && r.Risk.Configs > 0) {
		r.Risk.Level = "high"
	}
}

func lookupNamespace(ns string, ms ...*compiler.Manifest) (compiler.Namespace, bool) {
	for _, m := range ms {
		if m == nil {
			continue
		}
		if n, ok := m.Namespaces[ns]; ok {
			return n, true
		}
	}
	return compiler.Namespace{}, false
}

// findingKey identifies a finding across revisions: lines move when a file
// above them changes, so they are not part of it.
func findingKey(e compiler.Error) string {
	return e.File + "\x00" + e.ID + "\x00" + e.Message
}

func errorsByConfig(errs []compiler.Error) map[cuecast.ConfigPath]int {
	m := make(map[cuecast.ConfigPath]int)
	for _, e := range errs {
		if e.Config != "" {
			m[e.Config]++
		}
	}
	return m
}

func set[T comparable](xs []T) map[T]bool {
	m := make(map[T]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// typeOf names the JSON type of a compact JSON value.
func typeOf(raw []byte) string {
	v, err := decode(raw)
	if err != nil {
		return "?"
	}
	return jsonType(v)
}

// outputJSON is each compiled config's JSON.
func outputJSON(res *compiler.Result) map[cuecast.ConfigPath][]byte {
	out := make(map[cuecast.ConfigPath][]byte, len(res.Outputs))
	for cp, o := range res.Outputs {
		out[cp] = o.JSON
	}
	return out
}

// variantTargets expands the affected configs into the outputs to diff:
// each config's own path and the paths of its variants at either side. The
// variant index at a config's own path is left out while the config has
// variants at both sides (or is added or removed with them): its variants
// are diffed instead. A config that gains or loses its variants keeps its
// own path, whose output changes kind for every reader.
func variantTargets(base, head *compiler.Result, targets []cuecast.ConfigPath) []cuecast.ConfigPath {
	want := set(targets)
	var out []cuecast.ConfigPath
	for _, res := range []*compiler.Result{base, head} {
		for p := range res.Outputs {
			if p.IsVariant() && want[p.Base()] {
				out = append(out, p)
			}
		}
		for _, e := range res.Errors {
			if e.Config.IsVariant() && want[e.Config.Base()] {
				out = append(out, e.Config)
			}
		}
	}
	isIndex := func(res *compiler.Result, cp cuecast.ConfigPath) (index, present bool) {
		o, ok := res.Outputs[cp]
		if !ok {
			return false, false
		}
		_, index = cuecast.ParseVariantIndex(o.JSON)
		return index, true
	}
	for _, cp := range targets {
		bi, bp := isIndex(base, cp)
		hi, hp := isIndex(head, cp)
		if (bi || !bp) && (hi || !hp) && (bi || hi) {
			continue
		}
		out = append(out, cp)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
