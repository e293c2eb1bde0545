package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/tailer"
)

// deployer is the rollout controller as the tailer's Deployer, with the
// records of deployed versions the tailer checks the stream against at start
// (tailer.DeployedVersions).
type deployer struct{ *rollout.Controller }

// DeployedVersions is the highest version each rollout record names. Each
// record is read again with Record, from the bucket's leader: Records'
// answer may come from a replica without the last acknowledged write, and
// these numbers are the tailer's witnesses, at start, of versions the
// stream may have lost: one read short of the last write misses a loss. It
// runs once a start, so a read per config costs little.
func (d deployer) DeployedVersions(ctx context.Context) (map[cuecast.ConfigPath]uint64, error) {
	listed, err := d.Records(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[cuecast.ConfigPath]uint64, len(listed))
	for _, l := range listed {
		r, err := d.Record(ctx, l.Config)
		if errors.Is(err, rollout.ErrNoRollout) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, err
		}
		n := max(r.Stable, r.Pending)
		for _, ro := range []*rollout.Rollout{r.Current, r.Superseded} {
			if ro != nil {
				n = max(n, ro.Version)
			}
		}
		if r.Pin != nil {
			n = max(n, r.Pin.Version)
		}
		out[r.Config] = n
	}
	return out, nil
}

// Repair rebuilds the configs whose version stream lost versions
// (tailer.Tailer.Repair), re-deploys them, and appends an audit entry per
// renumbered config naming actor and reason. Run it while the pipeline is
// not running (a serve over the same data directory holds its lock).
func (p *Pipeline) Repair(ctx context.Context, actor, reason string) (tailer.RepairReport, error) {
	rep, err := p.Tailer.Repair(ctx, p.Distributor)
	if err != nil {
		return rep, err
	}
	for _, r := range rep.Renumbered {
		e := rollout.AuditEntry{
			Actor: actor, Action: "repair", Config: r.Config, Version: r.Version, Reason: reason,
			Detail: fmt.Sprintf("the stream held v%d but v%d was published; rebuilt from commit %s as v%d", r.Stored, r.Published, rep.Commit, r.Version),
		}
		if r.Deleted {
			e.Detail += " (a tombstone: the commit has no such config)"
		}
		if err := p.Rollout.AppendAudit(ctx, e); err != nil {
			return rep, fmt.Errorf("repair: %w", err)
		}
	}
	return rep, nil
}

// registerIntegrity adds cuecast_versions_inconsistent to the metrics.
func (p *Pipeline) registerIntegrity() error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cuecast_versions_inconsistent",
		Help: "1 while publishing is refused because the version stream holds fewer versions than were published (run `cuecast repair`).",
	}, func() float64 {
		if p.Tailer.Inconsistent() != nil {
			return 1
		}
		return 0
	})
	if err := p.Metrics.Registry().Register(g); err != nil {
		return fmt.Errorf("start pipeline: register metric: %w", err)
	}
	return nil
}
