package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/distributor"
)

// bucketStream is the stream holding Bucket.
const bucketStream = "KV_" + Bucket

// bucketPrefix starts the subject of every key of Bucket.
const bucketPrefix = "$KV." + Bucket + "."

// ErrReadOnly is returned by what a controller from Open cannot do
// through the operator's account: everything needing JetStream's
// management API (watching the bucket, running rollouts).
var ErrReadOnly = errors.New("rollout state opened read-only (rollout.Open)")

// openDirect opens the bucket and the audit stream for Open without
// JetStream's management API (no STREAM.INFO, no consumer): reads go by
// direct get, writes are publishes with the expected last revision, which
// the operator's account reaches through service imports
// (docs/SECURITY.md). It returns an error wrapping
// jetstream.ErrBucketNotFound or jetstream.ErrStreamNotFound when serve has
// not created them yet.
func openDirect(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) (jetstream.KeyValue, error) {
	rd := distributor.NewDirectStream(nc, bucketStream)
	if err := rd.Probe(ctx); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = errors.Join(jetstream.ErrBucketNotFound, err)
		}
		return nil, fmt.Errorf("bucket %s: %w", Bucket, err)
	}
	if err := distributor.NewDirectStream(nc, AuditStream).Probe(ctx); err != nil {
		return nil, fmt.Errorf("stream %s: %w", AuditStream, err)
	}
	return &directKV{js: js}, nil
}

// directKV is the bucket of a controller from Open: it writes a key by
// compare-and-swap with a plain publish, and implements nothing else (the
// controller reads by direct get, see Controller.get, and lists the keys
// the same way, see Controller.Records).
type directKV struct {
	jetstream.KeyValue
	js jetstream.JetStream
}

func (kv *directKV) Bucket() string { return Bucket }

// Create writes key if it holds nothing (it never did, or was deleted:
// the controller never deletes a record).
func (kv *directKV) Create(ctx context.Context, key string, value []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	return kv.Update(ctx, key, value, 0)
}

// Update writes key if its newest revision is still last.
func (kv *directKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	m := nats.NewMsg(bucketPrefix + key)
	m.Data = value
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	ack, err := kv.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

func (kv *directKV) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return nil, fmt.Errorf("watch %s: %w", Bucket, ErrReadOnly)
}

func (kv *directKV) ListKeys(context.Context, ...jetstream.WatchOpt) (jetstream.KeyLister, error) {
	return nil, fmt.Errorf("list %s: %w", Bucket, ErrReadOnly)
}
