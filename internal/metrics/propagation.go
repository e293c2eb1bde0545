package metrics

import (
	"slices"
	"time"

	"github.com/cuecast/cuecast"
)

// Coverage thresholds of cuecast_propagation_seconds.
var thresholds = []float64{0.5, 1}

// Point is one sample of a version's propagation.
type Point struct {
	// Elapsed is the time since the version's compile (Version.CompiledAt).
	Elapsed time.Duration `json:"elapsed"`
	// Share of the live instances applying the version, and how many live
	// instances there were.
	Share     float64 `json:"share"`
	Instances int     `json:"instances"`
}

// Series is the propagation of one version: how its share of the fleet grew
// since the commit was picked up.
type Series struct {
	Version cuecast.Version `json:"version"`
	// Points are the samples where the share or the fleet changed, oldest
	// first; the last one is the latest sample while the version is the
	// target.
	Points []Point `json:"points"`
	// Reached is the time to each coverage threshold ("0.5", "1"), once
	// reached.
	Reached map[string]time.Duration `json:"reached,omitempty"`
	// Current is set while the version is its config's target.
	Current bool `json:"current"`
	// Unmeasured: no instance reported when the version became the target,
	// so the instances that came later did not receive it by propagation;
	// its crossings are not observed in cuecast_propagation_seconds.
	Unmeasured bool `json:"unmeasured,omitempty"`
}

type crossing struct {
	coverage string
	elapsed  time.Duration
}

// propagation tracks, per config, the series of its recent target versions.
type propagation struct {
	keep, points int
	configs      map[cuecast.ConfigPath][]*Series
	// ours are the versions this process published (config ▶ number): their
	// crossings are measured even when no sample caught them below the mark.
	ours map[cuecast.ConfigPath]cuecast.Version
	// below remembers, for the current target, which thresholds a sample saw
	// unmet: a crossing of a version this process did not publish counts only
	// when it was witnessed.
	below map[cuecast.ConfigPath]map[string]bool
}

func newPropagation(keep, points int) *propagation {
	return &propagation{keep: keep, points: points,
		configs: map[cuecast.ConfigPath][]*Series{},
		ours:    map[cuecast.ConfigPath]cuecast.Version{},
		below:   map[cuecast.ConfigPath]map[string]bool{}}
}

func (p *propagation) published(v cuecast.Version) {
	if v.Version > p.ours[v.Config].Version {
		p.ours[v.Config] = v
	}
}

// observe adds a sample and returns the thresholds it crossed first.
func (p *propagation) observe(at time.Time, c ConfigSample) []crossing {
	if c.Target.Version == 0 || c.Target.Deleted || c.Target.CompiledAt.IsZero() {
		return nil
	}
	list := p.configs[c.Config]
	var cur *Series
	if n := len(list); n > 0 && list[n-1].Version.Version == c.Target.Version {
		cur = list[n-1]
	} else {
		for _, s := range list {
			s.Current = false
		}
		cur = &Series{Version: c.Target, Current: true, Reached: map[string]time.Duration{}, Unmeasured: c.Instances == 0}
		list = append(list, cur)
		if len(list) > p.keep {
			list = slices.Delete(list, 0, len(list)-p.keep)
		}
		p.configs[c.Config] = list
		p.below[c.Config] = map[string]bool{}
	}
	if c.Instances == 0 {
		return nil // no fleet: nothing to plot, nothing propagates
	}
	elapsed := max(at.Sub(c.Target.CompiledAt), 0)
	if n := len(cur.Points); n > 0 {
		// Samples timed by report arrival and by apply time interleave;
		// the series only moves forward.
		elapsed = max(elapsed, cur.Points[n-1].Elapsed)
	}
	share := c.Share()
	pt := Point{Elapsed: elapsed, Share: share, Instances: c.Instances}
	_, full := cur.Reached["1"]
	if n := len(cur.Points); full && n > 0 && cur.Points[n-1].Share == share && cur.Points[n-1].Instances == c.Instances {
		// Everywhere and nothing changed: the picture is complete.
	} else if n := len(cur.Points); n >= 2 && cur.Points[n-1].Share == share && cur.Points[n-1].Instances == c.Instances &&
		cur.Points[n-2].Share == share && cur.Points[n-2].Instances == c.Instances {
		cur.Points[n-1] = pt // a flat stretch: move its end
	} else {
		cur.Points = append(cur.Points, pt)
	}
	if len(cur.Points) > p.points {
		cur.Points = thin(cur.Points)
	}
	ours := p.ours[c.Config].Version == c.Target.Version
	var out []crossing
	for _, th := range thresholds {
		key := formatCoverage(th)
		if _, done := cur.Reached[key]; done {
			continue
		}
		if share < th {
			p.below[c.Config][key] = true
			continue
		}
		cur.Reached[key] = elapsed
		if !cur.Unmeasured && (ours || p.below[c.Config][key]) {
			out = append(out, crossing{coverage: key, elapsed: elapsed})
		}
	}
	return out
}

// thin halves a series, keeping its first and last points.
func thin(ps []Point) []Point {
	out := make([]Point, 0, len(ps)/2+2)
	for i, pt := range ps {
		if i%2 == 0 || i == len(ps)-1 {
			out = append(out, pt)
		}
	}
	return out
}

func (p *propagation) series(cfg cuecast.ConfigPath) []Series {
	list := p.configs[cfg]
	out := make([]Series, len(list))
	for i, s := range list {
		out[i] = *s
		out[i].Points = slices.Clone(s.Points)
		out[i].Reached = make(map[string]time.Duration, len(s.Reached))
		for k, v := range s.Reached {
			out[i].Reached[k] = v
		}
	}
	return out
}
