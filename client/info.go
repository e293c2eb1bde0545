package client

import (
	"cmp"
	"slices"

	"github.com/cuecast/cuecast"
)

// Info is what an instance runs of one config it watches, the labels of
// its cuecast_config_info series (client/prominfo).
type Info struct {
	Instance string
	// Config is the path the instance applies: the variant path when the
	// config has variants (payments/checkout/env=prod).
	Config  cuecast.ConfigPath
	Version uint64
	// Bucket is the instance's cohort bucket in the config's namespace.
	Bucket int
}

// Info lists what the client's watchers run now, one entry per config,
// sorted by config; a watcher with no version yet (or whose config was
// deleted) is left out. It does no I/O.
func (c *Client) Info() []Info {
	c.mu.Lock()
	ws := make([]*Watcher, 0, len(c.watchers))
	for w := range c.watchers {
		ws = append(ws, w)
	}
	c.mu.Unlock()
	out := make([]Info, 0, len(ws))
	for _, w := range ws {
		s := w.Current()
		if s.Version == 0 || s.Deleted {
			continue
		}
		out = append(out, Info{Instance: c.o.instance, Config: w.cfg, Version: s.Version, Bucket: w.bucket})
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.Config, b.Config) })
	return slices.CompactFunc(out, func(a, b Info) bool { return a.Config == b.Config })
}
