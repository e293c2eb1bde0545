package rollout

import (
	"context"
	"errors"
	"fmt"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// Deploy: where a version's rollout starts (or waits behind a pin).

// Deploy starts v's rollout (it is the tailer's Deployer). It is idempotent:
// a version already rolling out, rolled out, or older than the current
// rollout is left alone. A rollout in flight for an older version is
// superseded: the new one starts at stage 1 and cohorts not yet moved stay
// where they are. A pinned config records v as pending instead, unless v's
// content equals the pinned version's, which lifts the pin. Deploy moves the
// first stage's pointers before returning, unless the stage selects by
// label on a summarised tree and a region does not answer the drill-down:
// that fails neither the step nor Deploy, the stage waits for the region,
// or halts (drillShort).
func (c *Controller) Deploy(ctx context.Context, v cuecast.Version) error {
	if err := v.Config.Validate(); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	if c.pol == nil {
		return fmt.Errorf("deploy %s@%d: controller has no policies", v.Config, v.Version)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v.Checksum == "" {
		sv, err := c.version(ctx, v.Config, v.Version)
		if err != nil {
			return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
		}
		v = sv
	}
	for attempt := 1; ; attempt++ {
		rec, rev, err := c.load(ctx, v.Config)
		if err != nil {
			return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
		}
		audits, changed, err := c.start(ctx, &rec, rev, v)
		if err != nil {
			return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
		}
		if changed {
			n, err := c.save(ctx, rec, rev)
			if err != nil {
				if errors.Is(err, cuecast.ErrConflict) && attempt < 5 {
					continue
				}
				return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
			}
			rev = n
			c.recordAll(ctx, audits)
		}
		// Settle from the record just written (or read), not from a new
		// read: a replica answering a read may not hold that write yet, and
		// the rollout would then wait for the next tick to move its first
		// stage (issue 15, item 2).
		if rev == 0 {
			return nil
		}
		_, _, err = c.settleFrom(ctx, v.Config, &rec, rev, true)
		return err
	}
}

// start decides what v does to rec: nothing, a new rollout, a pending
// version behind a pin, or lifting the pin.
func (c *Controller) start(ctx context.Context, rec *Record, rev uint64, v cuecast.Version) ([]AuditEntry, bool, error) {
	now := c.o.Now().UTC()
	if v.Version <= rec.Stable || (rec.Current != nil && v.Version <= rec.Current.Version) {
		return nil, false, nil
	}
	if p := rec.Pin; p != nil {
		if v.Checksum != p.Checksum {
			if rec.Pending >= v.Version {
				return nil, false, nil
			}
			rec.Pending = v.Version
			c.log.Warn("config pinned: new version not rolled out", "config", v.Config, "version", v.Version, "pinned", p.Version)
			return nil, true, nil
		}
		// The commit restored the pinned content: lift the pin and point
		// everyone at the new number for the same bytes.
		r := newRollout(v, cuecast.Policy{Stages: []cuecast.Stage{{Name: "restore", Percent: 100}}}, cuecast.Relaxed, rec, now, c.rules())
		r.Reason = fmt.Sprintf("v%d restores the pinned content of v%d", v.Version, p.Version)
		supersede(rec, r, now)
		rec.Pin, rec.Pending = nil, 0
		return []AuditEntry{{At: now, Actor: c.o.Actor, Action: "unpin", Config: v.Config, Version: v.Version,
			Reason: fmt.Sprintf("commit %s restores the content of pinned v%d", cuecast.ShortCommit(v.Commit), p.Version)}}, true, nil
	}
	if index, err := c.isIndex(ctx, v); err != nil {
		return nil, false, err
	} else if index {
		r := indexRollout(v, rec, now)
		supersede(rec, r, now)
		return nil, true, nil
	}
	pol, cons, err := c.pol.Policy(ctx, v)
	if err != nil {
		return nil, false, fmt.Errorf("read policy: %w", err)
	}
	if rev == 0 && rec.Stable == 0 && v.Version > 1 {
		// A config deployed before the controller kept state runs what its
		// pointer says: that is its stable version. Versions published but
		// never deployed (a tailer's first batch hands over only each
		// config's newest) are not: taken as stable, they made a strict
		// config's first rollout stage a version behind no cohort pointer,
		// which instances never stage (issue 15, item 4).
		if pv, ok, err := c.deployed(ctx, v.Config, v.Version); err != nil {
			return nil, false, err
		} else if ok {
			rec.Stable, rec.StableChecksum = pv.Version, pv.Checksum
			rec.Floor, rec.FloorChecksum = pv.Version, pv.Checksum
		}
	}
	r := newRollout(v, pol, cons, rec, now, c.rules())
	supersede(rec, r, now)
	return nil, true, nil
}

// isIndex reports whether v's content is a variant index: a base path's
// version once its config reads dimensions (docs/VARIANTS.md). Only a
// base path's live version can be one, and an index is never chunked: a
// larger version is not read (its chunks would cost a read each).
func (c *Controller) isIndex(ctx context.Context, v cuecast.Version) (bool, error) {
	if v.Deleted || v.Config.IsVariant() || v.Size > distributor.ChunkThreshold {
		return false, nil
	}
	_, content, err := c.d.Version(ctx, v.Config, v.Version)
	if err != nil {
		return false, fmt.Errorf("read content of v%d: %w", v.Version, err)
	}
	_, ok := cuecast.ParseVariantIndex(content)
	return ok, nil
}

// pointerReader is the distributor's read of a cohort pointer.
type pointerReader interface {
	Pointer(ctx context.Context, cfg cuecast.ConfigPath, bucket int) (cuecast.Pointer, error)
}

// deployed returns the version cfg's cohort pointers name (read from bucket
// 0, which the all-buckets pointer of a deploy covers), ok false when it
// has none. With a distributor that cannot read pointers it assumes the
// version before newest was deployed, as the controller always did.
func (c *Controller) deployed(ctx context.Context, cfg cuecast.ConfigPath, newest uint64) (cuecast.Pointer, bool, error) {
	pr, ok := c.d.(pointerReader)
	if !ok {
		pv, err := c.version(ctx, cfg, newest-1)
		return cuecast.Pointer{Config: cfg, Version: pv.Version, Checksum: pv.Checksum}, err == nil, nil
	}
	p, err := pr.Pointer(ctx, cfg, 0)
	if errors.Is(err, cuecast.ErrNotFound) {
		return cuecast.Pointer{}, false, nil
	}
	if err != nil {
		return cuecast.Pointer{}, false, fmt.Errorf("read deployed pointer: %w", err)
	}
	return p, true, nil
}

func (c *Controller) version(ctx context.Context, cfg cuecast.ConfigPath, n uint64) (cuecast.Version, error) {
	vs, err := c.d.Versions(ctx, cfg)
	if err != nil {
		return cuecast.Version{}, err
	}
	for _, v := range vs {
		if v.Version == n {
			return v, nil
		}
	}
	return cuecast.Version{}, fmt.Errorf("version %d of %s is not retained: %w", n, cfg, cuecast.ErrNotFound)
}
