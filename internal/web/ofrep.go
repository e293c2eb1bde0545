package web

import (
	"context"
	"errors"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/flags/ofrep"
)

// publishedFlags serves OFREP (flags/ofrep) over the version of every flag
// set that the fleet is meant to run (ConfigStatus.Target: the newest
// published, unless a pin, an emergency rollback or a halt moving the fleet
// back says otherwise), brought up to date by each fleet sample.
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

// sync applies the target version of each config in status that it has
// not seen: a flag set is compiled into the store, a tombstone or a version
// that is no longer a flag set removes it. The target, not the latest: an
// operator's rollback of a bad flag set pins the instances to the version
// before, and the SDKs reading their flags here must go back with them.
// A version whose content cannot be read now is tried again next sample.
func (s *Server) syncFlags(ctx context.Context, status []distributor.ConfigStatus) {
	pf := s.flags
	vr, ok := s.o.Fleet.(VersionReader)
	if pf == nil || !ok {
		return
	}
	complete := true
	for _, cs := range status {
		target, deleted := cs.Target, false
		if target == 0 || target == cs.Latest.Version {
			target, deleted = cs.Latest.Version, cs.Latest.Deleted
		}
		if target == 0 || pf.seen[cs.Config] == target {
			continue
		}
		var body []byte
		if !deleted {
			var err error
			if _, body, err = vr.Version(ctx, cs.Config, target); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("OFREP: read the target version", "config", cs.Config, "version", target, "err", err)
				}
				complete = false
				continue
			}
		}
		switch _, err := pf.store.Apply(string(cs.Config), target, body, deleted); {
		case errors.Is(err, ofrep.ErrNotFlagSet):
			s.log.Warn("OFREP: no longer a flag set; its flags are no longer served", "config", cs.Config, "version", target, "err", err)
		case err != nil:
			s.log.Warn("OFREP: flag set not served; the version before it is", "config", cs.Config, "version", target, "err", err)
		}
		pf.seen[cs.Config] = target
	}
	// Ready once every config's target version was applied; later, a
	// version not read yet leaves the one before it served until the next
	// sample, as between two samples.
	if complete && !pf.ready {
		pf.store.SetReady()
		pf.ready = true
	}
}
