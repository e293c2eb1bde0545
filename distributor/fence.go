package distributor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// FenceSubject holds the writer fence in the CUECAST stream
// (docs/PROTOCOL.md §3): one message naming the lease term of the one serve
// that may publish versions. Its second token is no namespace (those start
// with a letter or digit), so no namespace mirror carries it.
const FenceSubject = cuecast.StoredPrefix + "._writer"

// Fence is the writer fence's record.
type Fence struct {
	// Epoch is the lease term's fencing token (leader.Term.Revision):
	// terms taken later have higher epochs.
	Epoch uint64 `json:"epoch"`
	// Holder names the writer (the lease candidate's ID).
	Holder string `json:"holder"`
}

// fence is what this Distributor knows of the fence it claimed.
type fence struct {
	mu   sync.Mutex
	f    Fence // zero: not claimed, publishes are not fenced
	seq  uint64
	lost bool // another writer claimed it since
}

// ClaimFence makes d the only Distributor whose versions the stream takes:
// from its return on, a Publish through any Distributor that claimed the
// fence before is refused by the stream itself, at write time, and a
// Publish through d is refused once another claims it. A claim is a
// compare-and-swap on the fence subject's last sequence, and each fenced
// version expects that sequence still (storeVersion). So whatever a writer
// read after its claim (the tailer's cursor, the latest versions) stays
// true for every version it manages to publish. The claim forgets every
// version cached here, and while fenced, d reads latest versions from the
// stream's leader: a term's numbering starts from the store as the
// previous term left it.
//
// epoch is the lease term's token: a claim against a fence holding a
// later epoch returns an error wrapping cuecast.ErrFenced, so a holder
// that lost its lease without noticing cannot take the fence back.
// A Distributor that never claims publishes unfenced (tests, cuecast
// repair's Renumber).
func (d *Distributor) ClaimFence(ctx context.Context, epoch uint64, holder string) error {
	if epoch == 0 || holder == "" {
		return fmt.Errorf("claim fence: an epoch and a holder are required")
	}
	d.fence.mu.Lock()
	defer d.fence.mu.Unlock()
	for attempt := 1; ; attempt++ {
		cur, seq, err := d.readFence(ctx)
		if err != nil {
			return fmt.Errorf("claim fence for term %d: %w", epoch, err)
		}
		if cur.Epoch > epoch {
			return fmt.Errorf("claim fence for term %d: %s holds term %d: %w", epoch, cur.Holder, cur.Epoch, cuecast.ErrFenced)
		}
		m, err := fenceMsg(Fence{Epoch: epoch, Holder: holder}, seq)
		if err != nil {
			return fmt.Errorf("claim fence: %w", err)
		}
		ack, err := d.js.PublishMsg(ctx, m)
		if isWrongLastSeq(err) && attempt < 5 {
			continue // another claimant in between: read again
		}
		if err != nil {
			return fmt.Errorf("claim fence for term %d: %w", epoch, err)
		}
		d.fence.f, d.fence.seq, d.fence.lost = Fence{Epoch: epoch, Holder: holder}, ack.Sequence, false
		d.fenced.Store(true)
		d.latestCache.Clear()
		d.recent.Clear()
		d.log.Info("writer fence claimed", "epoch", epoch, "holder", holder, "previous_epoch", cur.Epoch,
			"previous_holder", cur.Holder, "seq", ack.Sequence)
		return nil
	}
}

// readFence reads the fence record and its sequence from the stream's
// leader (zero and 0 when there is none).
func (d *Distributor) readFence(ctx context.Context) (Fence, uint64, error) {
	m, err := LeaderLastMsg(ctx, d.nc, cuecast.Stream, FenceSubject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Fence{}, 0, nil
	}
	if err != nil {
		return Fence{}, 0, fmt.Errorf("read fence: %w", err)
	}
	var f Fence
	if err := json.Unmarshal(m.Data, &f); err != nil {
		return Fence{}, 0, fmt.Errorf("read fence: decode message %d: %w", m.Sequence, err)
	}
	return f, m.Sequence, nil
}

func fenceMsg(f Fence, lastSeq uint64) (*nats.Msg, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode fence: %w", err)
	}
	m := nats.NewMsg(FenceSubject)
	m.Data = b
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastSeq, 10))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject) // one record, whatever the number of terms
	return m, nil
}

// checkFence returns an error wrapping cuecast.ErrFenced when d claimed the
// writer fence and a later term has claimed it since; nil while d holds it
// (or never claimed it). Pointer writes call it before they write
// (nextRevisions): a pointer message already expects its own subject's last
// sequence (a compare-and-swap against other writers of that pointer, an
// operator's rollback among them), and a message can expect only one, so
// the store cannot check the fence on it as it does on a version. A writer
// deposed before it checks is refused; one deposed between its check and
// its write (the time of a round trip) is not (docs/SCALING.md, "Replicated
// serve").
func (d *Distributor) checkFence(ctx context.Context) error {
	d.fence.mu.Lock()
	f, seq, lost := d.fence.f, d.fence.seq, d.fence.lost
	d.fence.mu.Unlock()
	if f.Epoch == 0 {
		return nil
	}
	if lost {
		return fmt.Errorf("a later term holds the writer fence: %w", cuecast.ErrFenced)
	}
	cur, curSeq, err := d.readFence(ctx)
	if err != nil {
		return fmt.Errorf("check the writer fence: %w", err)
	}
	if curSeq == seq {
		return nil
	}
	d.fence.mu.Lock()
	if d.fence.seq == seq { // not claimed again meanwhile
		d.fence.lost = true
	}
	d.fence.mu.Unlock()
	d.log.Warn("writer fence lost", "epoch", f.Epoch, "holder", cur.Holder, "holder_epoch", cur.Epoch)
	return fmt.Errorf("%s holds the writer fence since term %d (this writer's: %d): %w", cur.Holder, cur.Epoch, f.Epoch, cuecast.ErrFenced)
}

// hdrExpectedLastSubjSeqSubject points a message's
// Nats-Expected-Last-Subject-Sequence at another subject (nats-server 2.11
// and later).
const hdrExpectedLastSubjSeqSubject = "Nats-Expected-Last-Subject-Sequence-Subject"

// storeVersion writes the version message m. Unfenced, m expects its own
// subject's last sequence (create-only). Fenced, it expects the fence
// subject's instead, which only a claim moves: the store takes it while no
// later term has claimed the fence and refuses it after, and the error
// wraps cuecast.ErrFenced. One writer per term, starting from the versions
// it read after its claim (ClaimFence empties the cache), keeps the
// numbering create-only; the message ID backs that up.
func (d *Distributor) storeVersion(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	d.fence.mu.Lock()
	defer d.fence.mu.Unlock()
	if d.fence.f.Epoch == 0 {
		return d.js.PublishMsg(ctx, m)
	}
	if d.fence.lost {
		return nil, fmt.Errorf("a later term holds the writer fence: %w", cuecast.ErrFenced)
	}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(d.fence.seq, 10))
	m.Header.Set(hdrExpectedLastSubjSeqSubject, FenceSubject)
	ack, err := d.js.PublishMsg(ctx, m)
	if !isWrongLastSeq(err) {
		return ack, err
	}
	d.fence.lost = true
	cur, _, ferr := d.readFence(ctx)
	if ferr != nil {
		return nil, fmt.Errorf("the writer fence moved (%w): %w", ferr, cuecast.ErrFenced)
	}
	d.log.Warn("writer fence lost", "epoch", d.fence.f.Epoch, "holder", cur.Holder, "holder_epoch", cur.Epoch)
	return nil, fmt.Errorf("%s holds the writer fence since term %d (this writer's: %d): %w", cur.Holder, cur.Epoch, d.fence.f.Epoch, cuecast.ErrFenced)
}
