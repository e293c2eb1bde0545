package distributor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	// mu is held from reading seq to recording the next one: a fenced
	// publish writes the fence message too, so publishes of one
	// Distributor go one at a time.
	mu   sync.Mutex
	f    Fence // zero: not claimed, publishes are not fenced
	seq  uint64
	lost bool // another writer claimed it since
}

// ClaimFence makes d the only Distributor whose versions the stream takes:
// from its return on, a Publish through any Distributor that claimed the
// fence before is refused by the stream itself, at write time, and a
// Publish through d is refused once another claims it. A fenced publish is
// one atomic batch of two messages: the fence record again, expecting the
// fence subject's last sequence to be the one d wrote, and the version,
// expecting its own subject's (create-only, as ever); a claim is a
// compare-and-swap on the fence's sequence. So whatever a writer read
// after its claim (the tailer's cursor, the latest versions) stays true
// for every version it manages to publish.
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
			continue // another claimant or a publish in between: read again
		}
		if err != nil {
			return fmt.Errorf("claim fence for term %d: %w", epoch, err)
		}
		d.fence.f, d.fence.seq, d.fence.lost = Fence{Epoch: epoch, Holder: holder}, ack.Sequence, false
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
	m.Header.Set("Nats-Rollup", "sub") // one record, whatever the number of publishes
	return m, nil
}

// Batch headers of JetStream's atomic publish (nats-server 2.12 and later).
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// errCodeBatchDuplicate is the server's JSAtomicPublishContainsDuplicateMessageErr:
// a batch holding a message ID still in the duplicate window.
const errCodeBatchDuplicate jetstream.ErrorCode = 10201

// storeVersion writes the version message m: alone when d holds no fence,
// else in one atomic batch after the fence record (see ClaimFence). A batch
// refused by the fence's check returns an error wrapping cuecast.ErrFenced;
// a duplicate message ID comes back as a duplicate ack, as for a plain
// publish.
func (d *Distributor) storeVersion(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	d.fence.mu.Lock()
	defer d.fence.mu.Unlock()
	if d.fence.f.Epoch == 0 {
		return d.js.PublishMsg(ctx, m)
	}
	if d.fence.lost {
		return nil, fmt.Errorf("%s holds the writer fence: %w", d.fence.f.Holder, cuecast.ErrFenced)
	}
	for attempt := 1; ; attempt++ {
		ack, err := d.storeBatch(ctx, m)
		if isDuplicateBatch(err) {
			return &jetstream.PubAck{Stream: cuecast.Stream, Duplicate: true}, nil
		}
		if !isWrongLastSeq(err) {
			return ack, err
		}
		// The fence's check or the version's: only the fence tells.
		cur, seq, ferr := d.readFence(ctx)
		switch {
		case ferr != nil:
			return nil, fmt.Errorf("%w (and %w)", err, ferr)
		case cur != d.fence.f:
			d.fence.lost = true
			d.log.Warn("writer fence lost", "epoch", d.fence.f.Epoch, "holder", cur.Holder, "holder_epoch", cur.Epoch)
			return nil, fmt.Errorf("%s holds the writer fence since term %d (this writer's: %d): %w", cur.Holder, cur.Epoch, d.fence.f.Epoch, cuecast.ErrFenced)
		case seq != d.fence.seq && attempt < 3:
			// Still ours, written by a batch whose ack was lost.
			d.fence.seq = seq
			continue
		}
		return ack, err
	}
}

// storeBatch publishes the fence record and m as one atomic batch and
// records the fence's new sequence.
func (d *Distributor) storeBatch(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	fm, err := fenceMsg(d.fence.f, d.fence.seq)
	if err != nil {
		return nil, err
	}
	id, err := batchID()
	if err != nil {
		return nil, err
	}
	fm.Header.Set(hdrBatchID, id)
	fm.Header.Set(hdrBatchSeq, "1")
	// The first message unacknowledged: the commit's answer covers both,
	// and one connection delivers them in order.
	if err := d.nc.PublishMsg(fm); err != nil {
		return nil, fmt.Errorf("store fence record: %w", err)
	}
	bm := nats.NewMsg(m.Subject)
	bm.Data = m.Data
	for k, v := range m.Header {
		bm.Header[k] = v
	}
	bm.Header.Set(hdrBatchID, id)
	bm.Header.Set(hdrBatchSeq, "2")
	bm.Header.Set(hdrBatchCommit, "1")
	ack, err := d.js.PublishMsg(ctx, bm)
	if err != nil {
		return nil, err
	}
	d.fence.seq = ack.Sequence - 1 // a batch's messages take consecutive sequences
	return ack, nil
}

func batchID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("batch id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func isDuplicateBatch(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchDuplicate
}
