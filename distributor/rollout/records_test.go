package rollout_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestRecordsReadsTheBucketOnce: Records, which `cuecast status` calls
// and every dashboard sample twice, takes every record from the one answer
// that lists them, for the running controller and a read-only one alike.
// It listed the keys and then read each record again (the running
// controller from the bucket's leader, a JetStream API request each): 3
// requests for 2 configs, 9 for 8, every sample.
func TestRecordsReadsTheBucketOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeStages(time.Hour), cuecast.Relaxed)
	ctx := t.Context()
	deploy := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			c := cuecast.ConfigPath(fmt.Sprintf("payments/svc%d", i))
			v := cuecast.Version{Config: c, Version: 1, Commit: fmt.Sprintf("c%039d", i), Author: "ann", Message: "change"}
			if err := e.d.Publish(ctx, v, content(i)); err != nil {
				t.Fatal(err)
			}
			if err := e.c.Deploy(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	readers := recordReaders(t, e.srv, e.d, e.pol)
	records := func(c *rollout.Controller, nc *nats.Conn, configs int) uint64 {
		t.Helper()
		before := nc.Stats().OutMsgs
		recs, err := c.Records(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sent := nc.Stats().OutMsgs - before
		if len(recs) != configs {
			t.Fatalf("%d records, want %d", len(recs), configs)
		}
		for i, rec := range recs {
			if want := cuecast.ConfigPath(fmt.Sprintf("payments/svc%d", i)); rec.Config != want || rec.Current == nil || rec.Current.Version != 1 {
				t.Errorf("record %d: %s, rollout %+v; want %s rolling out v1", i, rec.Config, rec.Current, want)
			}
		}
		return sent
	}
	deploy(0, 2)
	var two [2]uint64
	for i, r := range readers {
		two[i] = records(r.c, r.nc, 2)
	}
	deploy(2, 8)
	for i, r := range readers {
		eight := records(r.c, r.nc, 8)
		t.Logf("%s controller: Records sent %d requests for 2 configs, %d for 8", r.name, two[i], eight)
		if eight > two[i] {
			t.Errorf("%s controller: Records of 8 configs sent %d requests, of 2 configs %d: one more per config", r.name, eight, two[i])
		}
	}
}

// TestRecordsPastOneAnswer: past the subjects one multi-last get answers
// (the server's 1,024), Records reads every revision the bucket keeps and
// takes each key's newest, leaving out a deleted key, for the running
// controller and a read-only one. Since TestRecordsReadsTheBucketOnce
// that read is where the records come from, not only their names.
func TestRecordsPastOneAnswer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	d, err := distributor.New(ctx, nc, distributor.Options{Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	readers := recordReaders(t, srv, d, nil) // New creates the bucket
	kv, err := natstest.JetStream(t, nc).KeyValue(ctx, rollout.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	const configs = 1030
	name := func(i int) cuecast.ConfigPath { return cuecast.ConfigPath(fmt.Sprintf("payments/svc%04d", i)) }
	put := func(i int, stable uint64) {
		t.Helper()
		b, err := json.Marshal(rollout.Record{Config: name(i), Stable: stable})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, name(i).Tokens(), b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range configs {
		put(i, 1)
	}
	put(7, 2) // a second revision, after every other key's first
	if err := kv.Delete(ctx, name(9).Tokens()); err != nil {
		t.Fatal(err)
	}
	for _, r := range readers {
		before := r.nc.Stats().OutMsgs
		recs, err := r.c.Records(ctx)
		if err != nil {
			t.Fatalf("%s controller: %v", r.name, err)
		}
		if sent := r.nc.Stats().OutMsgs - before; sent < 2 {
			t.Errorf("%s controller: Records sent %d request: the one multi-last get held every record, so its fallback was not tried", r.name, sent)
		}
		if len(recs) != configs-1 {
			t.Fatalf("%s controller: %d records, want %d (every config but the deleted svc0009)", r.name, len(recs), configs-1)
		}
		for j, rec := range recs {
			i := j
			if i >= 9 {
				i++ // after the deleted svc0009
			}
			want := uint64(1)
			if i == 7 {
				want = 2
			}
			if rec.Config != name(i) || rec.Stable != want {
				t.Errorf("%s controller: record %d is %s stable v%d, want %s stable v%d", r.name, j, rec.Config, rec.Stable, name(i), want)
			}
		}
	}
}

// recordReader is a controller reading the rollout records on a
// connection of its own, so that what the connection sends is what
// Records asked.
type recordReader struct {
	name string
	c    *rollout.Controller
	nc   *nats.Conn
}

// recordReaders starts the running controller's kind (New) and a
// read-only one (Open) on srv, each on its own connection.
func recordReaders(t *testing.T, srv *natstest.Server, d rollout.Distributor, pol rollout.Policies) []recordReader {
	t.Helper()
	runNC, openNC := srv.Connect(t), srv.Connect(t)
	running, err := rollout.New(t.Context(), runNC, d, pol, rollout.Options{Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	readOnly, err := rollout.Open(t.Context(), openNC, d, nil, rollout.Options{Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return []recordReader{{"running", running, runNC}, {"read-only", readOnly, openNC}}
}
