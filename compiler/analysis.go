package compiler

import (
	"errors"
	"fmt"

	"cuelang.org/go/cue"

	"github.com/cuecast/cuecast"
)

// metricField names one field of one analysis metric in the manifest:
// of namespace ns's policy, or of config override's (ns's configs:
// entry) when override is set.
type metricField struct {
	ns, override  string
	stage, metric int
	field         string
}

// metricFields are the fields of a metric whose source positions the
// manifest keeps, for errors found after compiling (cuecast check
// --prometheus).
var metricFields = []string{"query", "samples", "min_samples"}

// MetricPosition is where the manifest writes field ("query", "samples"
// or "min_samples") of the metric-th metric of stage stage of cfg's
// rollout policy (the policy Policy returns), or the metric itself when
// it does not write that field: the File, Line and Column of an Error. ok
// is false when the manifest writes no such metric.
func (m *Manifest) MetricPosition(cfg cuecast.ConfigPath, stage, metric int, field string) (at Error, ok bool) {
	cfg = cfg.Base()
	ns, ok := m.Namespaces[cfg.Namespace()]
	if !ok {
		return Error{}, false
	}
	k := metricField{ns: ns.Name, stage: stage, metric: metric, field: field}
	if o, ok := ns.Configs[cfg.Name()]; ok && len(o.Policy.Stages) > 0 {
		k.override = cfg.Name()
	}
	at, ok = m.metricPos[k]
	return at, ok
}

// checkAnalysis validates the analysis metrics of a rollout policy at path
// (cuecast.Metric.Validate), each error at the line of the field it is
// about (its metric's query when it is about the metric), so that a query
// the controller could not use fails `cuecast check` rather than the
// rollout it judges. It records the positions of each metric's fields in
// pos under key's namespace and override.
func checkAnalysis(m cue.Value, path []cue.Selector, pol cuecast.Policy, fallback string, key metricField, pos map[metricField]Error) []Error {
	var errs []Error
	for i, st := range pol.Stages {
		for j, met := range st.Analysis {
			at := append(append([]cue.Selector(nil), path...), cue.Str("stages"), cue.Index(i), cue.Str("analysis"), cue.Index(j))
			whole := m.LookupPath(cue.MakePath(at...))
			fieldAt := func(field string) Error {
				v := m.LookupPath(cue.MakePath(append(at, cue.Str(field))...))
				if !v.Exists() {
					v = whole
				}
				return positionError(v, fallback)
			}
			for _, f := range metricFields {
				k := key
				k.stage, k.metric, k.field = i, j, f
				pos[k] = fieldAt(f)
			}
			err := met.Validate()
			if err == nil && st.Percent >= 100 && met.Compare != cuecast.CompareThreshold {
				// Nobody is left on the old version to be the baseline.
				err = fmt.Errorf("metric %q: the stage covers every instance, so no baseline is left to compare with: "+
					"use compare: \"threshold\" here, or judge the metric in an earlier stage", met.Name)
			}
			if err == nil {
				continue
			}
			field := "query"
			var me *cuecast.MetricError
			if errors.As(err, &me) && me.Field != "" {
				field = me.Field
			}
			e := fieldAt(field)
			e.ID, e.Fix = IDManifestAnalysis, fixFor(IDManifestAnalysis)
			e.Message = "stage " + st.Name + ": " + err.Error()
			errs = append(errs, e)
		}
	}
	return errs
}
