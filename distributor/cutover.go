package distributor

import (
	"context"
	"fmt"
	"time"

	"github.com/cuecast/cuecast"
)

// The two-phase cutover of strict configs (docs/ROLLOUT.md): one staged
// pointer and one activation pointer per config, beside the cohort pointers
// in the CUECAST stream and RePublished like them.

// Stage publishes the staged pointer of cfg: instances fetch and validate
// the version it names, then report it in Report.Staged, without applying
// it. p.Seq, Checksum and Size are filled in from the stored version.
// It returns cuecast.ErrNotFound or cuecast.ErrPurged for an unknown version.
func (d *Distributor) Stage(ctx context.Context, cfg cuecast.ConfigPath, p cuecast.Pointer) error {
	if err := d.publishCutover(ctx, cuecast.StagedSubject(cfg), cfg, p, true); err != nil {
		return fmt.Errorf("stage %s@%d: %w", cfg, p.Version, err)
	}
	return nil
}

// Activate publishes the activation pointer of cfg: every instance holding
// the version staged switches to it. The cohort pointers are not changed;
// the caller points them at the same version afterwards so that instances
// that missed the activation catch up on their next read.
func (d *Distributor) Activate(ctx context.Context, cfg cuecast.ConfigPath, p cuecast.Pointer) error {
	if err := d.publishCutover(ctx, cuecast.ActivationSubject(cfg), cfg, p, false); err != nil {
		return fmt.Errorf("activate %s@%d: %w", cfg, p.Version, err)
	}
	return nil
}

func (d *Distributor) publishCutover(ctx context.Context, subj string, cfg cuecast.ConfigPath, p cuecast.Pointer, inline bool) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	p.Config = cfg
	sv, err := d.lookupVersion(ctx, cfg, p.Version)
	if err != nil {
		return err
	}
	body, err := d.describe(ctx, &p, sv)
	if err != nil {
		return err
	}
	if !inline {
		// Instances apply the activation from the copy they staged.
		p.Inline, body = false, nil
	}
	if p.SetAt.IsZero() {
		p.SetAt = time.Now().UTC()
	}
	if p.Revision, err = d.nextRevision(ctx, cfg); err != nil {
		return err
	}
	p.Subject = subj
	enc, err := d.encodePointer(&p)
	if err != nil {
		return err
	}
	if _, err := d.js.PublishMsg(ctx, pointerMsg(subj, enc, body)); err != nil {
		return fmt.Errorf("write %s: %w", subj, err)
	}
	d.log.Info("cutover pointer", "subject", subj, "config", cfg, "version", p.Version, "rev", p.Revision)
	return nil
}
