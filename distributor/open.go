package distributor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// Open returns a Distributor over the CUECAST and CUECAST_REPORTS streams
// that must already exist, without creating or updating them: for readers
// such as `cuecast status`, whose credentials may only read (docs/SCALING.md).
// It reads by direct get only, never through JetStream's management API
// (no consumer; one best-effort STREAM.INFO of the report stream for its
// max age, see reportTTL), so it works from the operator's account, which
// reaches the streams through service imports of their direct gets alone
// (docs/SECURITY.md). It returns an error wrapping
// jetstream.ErrStreamNotFound when serve has not created the streams yet.
// Options.SigningKey is ignored: an opened Distributor is not meant to
// publish; its writes that need the management API (purges) fail with
// ErrReadOnly. Close it like one from New.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Distributor, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("open distributor: %w", err)
	}
	o.setDefaults()
	o.SigningKey = nil
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("open distributor: %w", err)
	}
	d := &Distributor{nc: nc, js: js, o: o, log: o.Logger,
		stream:   readOnlyStream{},
		versions: NewDirectStream(nc, cuecast.Stream), reportsRd: NewDirectStream(nc, cuecast.ReportStream)}
	for _, s := range []DirectStream{d.versions, d.reportsRd} {
		if err := s.Probe(ctx); err != nil {
			return nil, fmt.Errorf("open distributor: stream %s: %w", s.name, err)
		}
	}
	// Best effort, for the report stream's max age (how long a report
	// stays live, reportTTL): credentials with JetStream's management API
	// read the stream's information; the operator's account reads it
	// under cuecast.OperatorAPIPrefix, its one import of that API
	// (docs/SECURITY.md). Without either, Options.Heartbeat decides. The
	// stream stays read-only either way.
	d.reports = readOnlyStream{info: reportStreamInfo(ctx, js, nc)}
	// Like New: the pointer cache follows the RePublished pointers.
	if err := d.followPointers(); err != nil {
		return nil, fmt.Errorf("open distributor: %w", err)
	}
	return d, nil
}

// ErrReadOnly is returned by the writes of an opened Distributor that need
// JetStream's management API.
var ErrReadOnly = errors.New("distributor opened read-only (distributor.Open)")

// readOnlyStream stands in for a stream an opened Distributor does not
// manage: its cached information is what Open read, if anything (else the
// report TTL follows Options.Heartbeat), and what the distributor calls on it fails with
// ErrReadOnly. It implements nothing else: the distributor calls nothing
// else: the embedded Stream is nil, and a method it would answer panics,
// which a test (TestOpenedIsReadOnly) keeps from happening for these three.
type readOnlyStream struct {
	jetstream.Stream
	info *jetstream.StreamInfo // read once by Open, or nil
}

func (s readOnlyStream) CachedInfo() *jetstream.StreamInfo { return s.info }

func (readOnlyStream) Info(context.Context, ...jetstream.StreamInfoOpt) (*jetstream.StreamInfo, error) {
	return nil, ErrReadOnly
}

func (readOnlyStream) Purge(context.Context, ...jetstream.StreamPurgeOpt) error { return ErrReadOnly }

func (readOnlyStream) GetLastMsgForSubject(context.Context, string) (*jetstream.RawStreamMsg, error) {
	return nil, ErrReadOnly
}

// reportStreamInfo reads the report stream's information under the
// operator's prefix (no responders at once for other credentials), else
// through the JetStream API; nil when neither answers within a second.
func reportStreamInfo(ctx context.Context, js jetstream.JetStream, nc *nats.Conn) *jetstream.StreamInfo {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if ojs, err := jetstream.NewWithAPIPrefix(nc, cuecast.OperatorAPIPrefix); err == nil {
		if st, err := ojs.Stream(ctx, cuecast.ReportStream); err == nil {
			return st.CachedInfo()
		}
	}
	if st, err := js.Stream(ctx, cuecast.ReportStream); err == nil {
		return st.CachedInfo()
	}
	return nil
}
