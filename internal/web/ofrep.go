package web

import (
	"context"
	"errors"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/flags/ofrep"
)

// publishedFlags serves OFREP (flags/ofrep) over the settled version of
// every flag set (rollout.Record.Settled): the one an instance that no
// stage of a rollout has reached is meant to run, brought up to date by
// each fleet sample.
type publishedFlags struct {
	store   *ofrep.Store
	handler *ofrep.Handler
	// seen is the version of each config looked at, flag set or not, so
	// that a config's content is read once per version. Only Sample,
	// which is serialized, touches it.
	seen map[cuecast.ConfigPath]uint64
	// ready: the store has been filled (Sample only).
	ready bool
}

func newPublishedFlags(tokens *ofrep.Tokens) (*publishedFlags, error) {
	store := ofrep.NewStore()
	h, err := ofrep.New(ofrep.Options{Store: store, Tokens: tokens})
	if err != nil {
		return nil, err
	}
	// Until the first sample fills it, an evaluation would answer
	// FLAG_NOT_FOUND for a flag that exists.
	store.SetNotReady("no fleet sample yet")
	return &publishedFlags{store: store, handler: h, seen: map[cuecast.ConfigPath]uint64{}}, nil
}

// syncFlags applies the settled version of each config in status that it
// has not seen (rollout.Record.Settled, from recs, the records the sample's
// status was worked out from; the latest for a config without one): a flag
// set is compiled into the store, a tombstone or a version that is no
// longer a flag set removes it. Settled, not the latest nor the target:
// serve's OFREP belongs to no cohort, so a staged rollout's new version
// reaches its readers only once a stage covering every instance moves, a
// halt leaves them on its From, and an operator's rollback pins them to
// the version before, as it does the instances. A config settled on
// nothing yet (a first version in its stages) is not served. A version
// whose content cannot be read now is tried again next sample.
func (s *Server) syncFlags(ctx context.Context, status []distributor.ConfigStatus, recs []rollout.Record) {
	pf := s.flags
	vr, ok := s.o.Fleet.(VersionReader)
	if pf == nil || !ok {
		return
	}
	byConfig := make(map[cuecast.ConfigPath]rollout.Record, len(recs))
	for _, rec := range recs {
		byConfig[rec.Config] = rec
	}
	complete := true
	for _, cs := range status {
		settled := cs.Latest.Version
		if rec, ok := byConfig[cs.Config]; ok {
			settled = rec.Settled(cs.Latest.Version)
		}
		deleted := settled == cs.Latest.Version && cs.Latest.Deleted
		if pf.seen[cs.Config] == settled {
			continue
		}
		if settled == 0 {
			// Nothing outside the stages yet: the set is unknown here, as
			// to an instance no stage has reached.
			pf.store.Delete(string(cs.Config))
			delete(pf.seen, cs.Config)
			continue
		}
		var body []byte
		if !deleted {
			var err error
			if _, body, err = vr.Version(ctx, cs.Config, settled); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("OFREP: read the settled version", "config", cs.Config, "version", settled, "err", err)
				}
				complete = false
				continue
			}
		}
		switch _, err := pf.store.Apply(string(cs.Config), settled, body, deleted); {
		case errors.Is(err, ofrep.ErrNotFlagSet):
			s.log.Warn("OFREP: no longer a flag set; its flags are no longer served", "config", cs.Config, "version", settled, "err", err)
		case err != nil:
			s.log.Warn("OFREP: flag set not served; the version before it is", "config", cs.Config, "version", settled, "err", err)
		}
		pf.seen[cs.Config] = settled
	}
	// Ready once every config's settled version was applied (or is none); later, a
	// version not read yet leaves the one before it served until the next
	// sample, as between two samples.
	if complete && !pf.ready {
		pf.store.SetReady()
		pf.ready = true
	}
}
