package ci

import (
	"context"
	"fmt"
	"slices"

	"github.com/cuecast/cuecast"
)

// Fleet knows which instances run a config: the live reports they send
// (`cuecast check --fleet` reads them from serve's NATS). It is defined here,
// by its one consumer, so that ci does not depend on the distributor.
type Fleet interface {
	// Instances returns, for each of paths (a plain config's path or one
	// variant's, search/suggest/env=prod/region=eu), the IDs of the live
	// instances that run it; a path nobody runs may be missing. All paths
	// come in one call, so that the fleet can read them together.
	Instances(ctx context.Context, paths []cuecast.ConfigPath) (map[cuecast.ConfigPath][]string, error)
}

// CountInstances fills each affected config's Instances and the risk's
// Instances from the live fleet: how many instances run each affected path
// (a config with variants is counted per variant, the paths services
// receive), and how many distinct instances run the outputs the change
// alters. A renamed config counts the instances on its old path and its new
// one. An error leaves the report as it was: never a silent zero.
func (r *Report) CountInstances(ctx context.Context, f Fleet) error {
	var paths []cuecast.ConfigPath
	for _, cc := range r.Configs {
		for _, cp := range []cuecast.ConfigPath{cc.Config, cc.From} {
			if cp != "" && !slices.Contains(paths, cp) {
				paths = append(paths, cp)
			}
		}
	}
	byPath, err := f.Instances(ctx, paths)
	if err != nil {
		return fmt.Errorf("count the instances: %w", err)
	}
	per := make([]int, len(r.Configs))
	changed := make(map[string]bool)
	for i, cc := range r.Configs {
		ids := make(map[string]bool)
		for _, cp := range []cuecast.ConfigPath{cc.Config, cc.From} {
			for _, id := range byPath[cp] {
				ids[id] = true
			}
		}
		per[i] = len(ids)
		if countsAsChange(cc.Status) {
			for id := range ids {
				changed[id] = true
			}
		}
	}
	for i := range r.Configs {
		n := per[i]
		r.Configs[i].Instances = &n
	}
	n := len(changed)
	r.Risk.Instances = &n
	r.Risk.InstancesCounted = true
	return nil
}

// countsAsChange reports whether a config of that status counts in the
// blast radius: its output changes or breaks (as risks counts it).
func countsAsChange(s Status) bool {
	return s != StatusUnchanged && s != StatusStillInvalid
}
