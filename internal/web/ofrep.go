package web

import (
	"context"
	"errors"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/flags/ofrep"
)

// publishedFlags serves OFREP (flags/ofrep) over the newest published
// version of every flag set, brought up to date by each fleet sample.
type publishedFlags struct {
	store   *ofrep.Store
	handler *ofrep.Handler
	// seen is the latest version of each config looked at, flag set or
	// not, so that a config's content is read once per version. Only
	// Sample, which is serialized, touches it.
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

// sync applies the latest version of each config in status that it has
// not seen: a flag set is compiled into the store, a tombstone or a version
// that is no longer a flag set removes it.
// A version whose content cannot be read now is tried again next sample.
func (s *Server) syncFlags(ctx context.Context, status []distributor.ConfigStatus) {
	pf := s.flags
	vr, ok := s.o.Fleet.(VersionReader)
	if pf == nil || !ok {
		return
	}
	complete := true
	for _, cs := range status {
		latest := cs.Latest.Version
		if latest == 0 || pf.seen[cs.Config] == latest {
			continue
		}
		var body []byte
		if !cs.Latest.Deleted {
			var err error
			if _, body, err = vr.Version(ctx, cs.Config, latest); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("OFREP: read the latest version", "config", cs.Config, "version", latest, "err", err)
				}
				complete = false
				continue
			}
		}
		switch _, err := pf.store.Apply(string(cs.Config), latest, body, cs.Latest.Deleted); {
		case errors.Is(err, ofrep.ErrNotFlagSet):
			s.log.Warn("OFREP: no longer a flag set; its flags are no longer served", "config", cs.Config, "version", latest, "err", err)
		case err != nil:
			s.log.Warn("OFREP: flag set not served; the version before it is", "config", cs.Config, "version", latest, "err", err)
		}
		pf.seen[cs.Config] = latest
	}
	// Ready once every config's latest version was applied; later, a
	// version not read yet leaves the one before it served until the next
	// sample, as between two samples.
	if complete && !pf.ready {
		pf.store.SetReady()
		pf.ready = true
	}
}
