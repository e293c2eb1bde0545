package compiler

import (
	"fmt"

	"cuelang.org/go/cue"

	"github.com/cuecast/cuecast"
)

// checkAnalysis validates the analysis metrics of a rollout policy at path
// (cuecast.Metric.Validate), each error at the line of its metric's query,
// so that a query the controller could not use fails `cuecast check`
// rather than the rollout it judges.
func checkAnalysis(m cue.Value, path []cue.Selector, pol cuecast.Policy, fallback string) []Error {
	var errs []Error
	for i, st := range pol.Stages {
		for j, met := range st.Analysis {
			err := met.Validate()
			if err == nil && st.Percent >= 100 && met.Compare != cuecast.CompareThreshold {
				// Nobody is left on the old version to be the baseline.
				err = fmt.Errorf("metric %q: the stage covers every instance, so no baseline is left to compare with: "+
					"use compare: \"threshold\" here, or judge the metric in an earlier stage", met.Name)
			}
			if err == nil {
				continue
			}
			at := append(append([]cue.Selector(nil), path...), cue.Str("stages"), cue.Index(i), cue.Str("analysis"), cue.Index(j))
			v := m.LookupPath(cue.MakePath(append(at, cue.Str("query"))...))
			if !v.Exists() {
				v = m.LookupPath(cue.MakePath(at...))
			}
			e := positionError(v, fallback)
			e.ID, e.Fix = IDManifestAnalysis, fixFor(IDManifestAnalysis)
			e.Message = "stage " + st.Name + ": " + err.Error()
			errs = append(errs, e)
		}
	}
	return errs
}
