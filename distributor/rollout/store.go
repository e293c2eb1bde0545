package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// The JetStream layout of the controller (docs/ROLLOUT.md).
const (
	// Bucket is the KV bucket holding one Record per config, keyed by the
	// config's tokens ("payments.checkout").
	Bucket = "cuecast-rollouts"
	// AuditStream is append-only (DenyDelete, DenyPurge): every operator
	// action and every automatic halt, on cca.<ns>.<name>.
	AuditStream = "CUECAST_AUDIT"
)

func auditSubject(cfg cuecast.ConfigPath) string { return "cca." + cfg.Tokens() }

func key(cfg cuecast.ConfigPath) string { return cfg.Tokens() }

// kvOperationHeader marks a deleted or purged key.
const kvOperationHeader = "KV-Operation"

func configOfKey(k string) cuecast.ConfigPath {
	return cuecast.ConfigPath(strings.ReplaceAll(k, ".", "/"))
}

// AuditEntry is one recorded action: who did what to which config, when and why.
type AuditEntry struct {
	At        time.Time          `json:"at"`
	Actor     string             `json:"actor"`
	Action    string             `json:"action"`
	Config    cuecast.ConfigPath `json:"config"`
	Version   uint64             `json:"version,omitempty"`
	Stage     string             `json:"stage,omitempty"`
	Reason    string             `json:"reason"`
	Emergency bool               `json:"emergency,omitempty"`
	Detail    string             `json:"detail,omitempty"`
	Seq       uint64             `json:"seq,omitempty"`
}

func openStore(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "cuecast rollout state, one record per config",
		History:     5,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", Bucket, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        AuditStream,
		Description: "cuecast operator actions and automatic halts; append-only",
		Subjects:    []string{"cca.>"},
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		DenyDelete:  true,
		DenyPurge:   true,
		// Read by direct get only (Audit), which the operator's account
		// reaches through a service import (docs/SECURITY.md).
		AllowDirect: true,
	}); err != nil {
		return nil, fmt.Errorf("open stream %s: %w", AuditStream, err)
	}
	return kv, nil
}

// load reads a config's record and its revision; a config never deployed
// gives a zero Record and revision 0.
func (c *Controller) load(ctx context.Context, cfg cuecast.ConfigPath) (Record, uint64, error) {
	val, rev, err := c.get(ctx, key(cfg))
	return c.decode(ctx, cfg, val, rev, err)
}

// decode is load's record from what a read of cfg's key gave: its value at
// revision rev, or err.
func (c *Controller) decode(ctx context.Context, cfg cuecast.ConfigPath, val []byte, rev uint64, err error) (Record, uint64, error) {
	if err == nil && c.readHook != nil {
		val, rev, err = c.readHook(ctx, key(cfg), val, rev)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{Config: cfg}, 0, nil
	}
	if err != nil {
		return Record{}, 0, fmt.Errorf("read %s/%s: %w", Bucket, key(cfg), err)
	}
	var rec Record
	if err := json.Unmarshal(val, &rec); err != nil {
		return Record{}, 0, fmt.Errorf("decode %s/%s revision %d: %w", Bucket, key(cfg), rev, err)
	}
	return rec, rev, nil
}

// get reads the newest value of key k from the bucket stream's leader. The
// KV client reads with a direct get, which any replica of an R3 bucket may
// answer, also one that has not applied the last acknowledged write: the
// controller then judged a rollout from the state before its own last step
// (a Deploy that moved nothing, or an undone move; issue 15, item 2). The
// leader has applied every write it acknowledged.
//
// A controller from Open reads by direct get instead: the operator's
// account has no JetStream management API (docs/SECURITY.md). It only
// records actions by compare-and-swap, which a stale read fails and retries.
func (c *Controller) get(ctx context.Context, k string) ([]byte, uint64, error) {
	var m *jetstream.RawStreamMsg
	var err error
	if _, ro := c.kv.(*directKV); ro {
		m, err = distributor.NewDirectStream(c.nc, bucketStream).GetLastMsgForSubject(ctx, bucketPrefix+k)
	} else {
		// The running controller's ctx has no deadline, and this read
		// holds its lock: LeaderLastMsg bounds the wait for an answer lost
		// with the connection (TestRecordReturnsWhenItsAnswerIsLost).
		m, err = distributor.LeaderLastMsg(ctx, c.nc, bucketStream, bucketPrefix+k)
	}
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, 0, jetstream.ErrKeyNotFound
	case err != nil:
		return nil, 0, err
	case m.Header.Get(kvOperationHeader) != "":
		return nil, 0, jetstream.ErrKeyNotFound // deleted or purged
	}
	return m.Data, m.Sequence, nil
}

// save writes rec if the stored revision is still rev (0: not yet stored);
// a concurrent writer gives an error wrapping cuecast.ErrConflict.
func (c *Controller) save(ctx context.Context, rec Record, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode record of %s: %w", rec.Config, err)
	}
	var n uint64
	if rev == 0 {
		n, err = c.kv.Create(ctx, key(rec.Config), b)
	} else {
		n, err = c.kv.Update(ctx, key(rec.Config), b, rev)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongSeq(err) {
		return 0, fmt.Errorf("write %s/%s: %w", Bucket, key(rec.Config), cuecast.ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("write %s/%s: %w", Bucket, key(rec.Config), err)
	}
	c.ownMu.Lock()
	c.own[key(rec.Config)] = n
	c.ownMu.Unlock()
	return n, nil
}

// ownWrite reports whether revision rev of key k is one this controller
// wrote (its watch then has nothing new to act on).
func (c *Controller) ownWrite(k string, rev uint64) bool {
	c.ownMu.Lock()
	defer c.ownMu.Unlock()
	return c.own[k] == rev
}

func isWrongSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Records returns the record of every config the controller has seen,
// sorted, from the answer that lists them: `cuecast status` reads them,
// and every dashboard sample twice. It read each record again after the
// list (the running controller from the bucket's leader, a JetStream API
// request per config; TestRecordsReadsTheBucketOnce). A direct get may be
// answered by a replica of an R3 bucket that has not applied the last
// acknowledged write: what acts on a record reads it with Record, as the
// controller itself and the tailer's check of deployed versions do.
func (c *Controller) Records(ctx context.Context) ([]Record, error) {
	// By direct get over the bucket's subjects (no consumer, which the
	// operator's account could not create): the newest revision of each
	// key in one answer or, beyond the server's limit of subjects for
	// that, every revision the bucket keeps, in order, the newest last.
	newest := map[string]*jetstream.RawStreamMsg{}
	collect := func(m *jetstream.RawStreamMsg) error {
		newest[strings.TrimPrefix(m.Subject, bucketPrefix)] = m
		return nil
	}
	rd := distributor.NewDirectStream(c.nc, bucketStream)
	err := rd.LastPerSubject(ctx, bucketPrefix+">", collect)
	if errors.Is(err, distributor.ErrTooManySubjects) {
		clear(newest)
		err = rd.Each(ctx, bucketPrefix+">", collect)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", Bucket, err)
	}
	var out []Record
	for k, m := range newest {
		if m.Header.Get(kvOperationHeader) != "" {
			continue // deleted or purged
		}
		rec, rev, err := c.decode(ctx, configOfKey(k), m.Data, m.Sequence, nil)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			continue // none yet: the test read hook played a replica behind its write
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(string(a.Config), string(b.Config)) })
	return out, nil
}

// Record returns the record of one config; a config with no rollout yet
// returns an error wrapping ErrNoRollout.
func (c *Controller) Record(ctx context.Context, cfg cuecast.ConfigPath) (Record, error) {
	rec, rev, err := c.load(ctx, cfg)
	if err != nil {
		return Record{}, err
	}
	if rev == 0 {
		return Record{}, fmt.Errorf("read rollout of %s: %w", cfg, ErrNoRollout)
	}
	return rec, nil
}

// audit appends e to the audit stream (acknowledged: an action that cannot
// be recorded is reported as failed to the operator).
func (c *Controller) audit(ctx context.Context, e AuditEntry) error {
	if e.At.IsZero() {
		e.At = c.o.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	if _, err := c.js.Publish(ctx, auditSubject(e.Config), b); err != nil {
		return fmt.Errorf("append audit entry: %w", err)
	}
	c.log.Info("audit", "actor", e.Actor, "action", e.Action, "config", e.Config, "version", e.Version, "reason", e.Reason, "emergency", e.Emergency)
	return nil
}

// Audit returns the recorded actions on cfg (every config when cfg is ""),
// oldest first.
func (c *Controller) Audit(ctx context.Context, cfg cuecast.ConfigPath) ([]AuditEntry, error) {
	subj := "cca.>"
	if cfg != "" {
		subj = auditSubject(cfg)
	}
	// By batched direct gets: the operator's account reaches the audit
	// stream by direct get only (docs/SECURITY.md).
	var out []AuditEntry
	err := distributor.NewDirectStream(c.nc, AuditStream).Each(ctx, subj, func(m *jetstream.RawStreamMsg) error {
		var e AuditEntry
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return fmt.Errorf("decode audit entry %d: %w", m.Sequence, err)
		}
		e.Seq = m.Sequence
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read audit of %q: %w", cfg, err)
	}
	return out, nil
}

// AppendAudit appends e to the audit trail, for actions taken outside the
// controller (`cuecast repair`).
func (c *Controller) AppendAudit(ctx context.Context, e AuditEntry) error { return c.audit(ctx, e) }
