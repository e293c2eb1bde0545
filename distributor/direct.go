package distributor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DirectStream reads one stream by direct get only ($JS.API.DIRECT.GET.<name>),
// never through JetStream's management API: no STREAM.INFO, no consumer. A
// direct get is answered by the stream itself, in the account that holds
// it, so it also works through a service import from an account without
// JetStream, which the operator's account is (docs/SECURITY.md); the
// management API answers such an account "JetStream not enabled". The
// streams must allow direct gets (every cuecast stream and bucket does).
type DirectStream struct {
	nc   *nats.Conn
	name string
}

// NewDirectStream reads the stream name on nc by direct get.
func NewDirectStream(nc *nats.Conn, name string) DirectStream {
	return DirectStream{nc: nc, name: name}
}

// directRequest is the body of a direct get (the server's JSApiMsgGetRequest).
type directRequest struct {
	Seq       uint64   `json:"seq,omitempty"`
	LastFor   string   `json:"last_by_subj,omitempty"`
	NextFor   string   `json:"next_by_subj,omitempty"`
	Batch     int      `json:"batch,omitempty"`
	MaxBytes  int      `json:"max_bytes,omitempty"`
	MultiLast []string `json:"multi_last,omitempty"`
}

// Probe checks that the stream exists: a stream that does not answer
// (no responders) gives an error wrapping jetstream.ErrStreamNotFound.
func (s DirectStream) Probe(ctx context.Context) error {
	_, err := s.get(ctx, directRequest{LastFor: "_cuecast.probe"})
	if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	return err
}

// GetMsg returns the message at seq or, with subject, the first message
// on subject (wildcards allowed) at or after seq. A missing one gives an
// error wrapping jetstream.ErrMsgNotFound.
func (s DirectStream) GetMsg(ctx context.Context, seq uint64, subject string) (*jetstream.RawStreamMsg, error) {
	return s.get(ctx, directRequest{Seq: seq, NextFor: subject})
}

// GetLastMsgForSubject returns the newest message on subject (wildcards
// allowed).
func (s DirectStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return s.get(ctx, directRequest{LastFor: subject})
}

func (s DirectStream) get(ctx context.Context, req directRequest) (*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := boundRequest(ctx, requestTimeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+s.name, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("direct get from %s: %w", s.name, jetstream.ErrStreamNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("direct get from %s: %w", s.name, err)
	}
	msg, _, err := s.decode(m)
	return msg, err
}

// numPendingHeader counts the messages still pending after a batched
// direct get's message (and after its end).
const numPendingHeader = "Nats-Num-Pending"

// errEOB ends a batch: the server's "204 EOB" status.
var errEOB = errors.New("end of batch")

// decode turns one answer of a direct get into a message; a status answer
// gives jetstream.ErrMsgNotFound (404), errEOB (204, with the number of
// messages still pending) or another error.
func (s DirectStream) decode(m *nats.Msg) (*jetstream.RawStreamMsg, uint64, error) {
	if len(m.Data) == 0 {
		if st := m.Header.Get("Status"); st != "" {
			switch st {
			case "404":
				return nil, 0, jetstream.ErrMsgNotFound
			case "204":
				np, _ := strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64)
				return nil, np, errEOB
			}
			return nil, 0, fmt.Errorf("direct get from %s: status %s %s", s.name, st, m.Header.Get("Description"))
		}
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("direct get from %s: bad sequence header: %w", s.name, err)
	}
	tm, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, 0, fmt.Errorf("direct get from %s: bad time stamp header: %w", s.name, err)
	}
	subj := m.Header.Get(jetstream.SubjectHeader)
	if subj == "" {
		return nil, 0, fmt.Errorf("direct get from %s: no subject header", s.name)
	}
	np, _ := strconv.ParseUint(m.Header.Get(numPendingHeader), 10, 64)
	return &jetstream.RawStreamMsg{Subject: subj, Sequence: seq, Header: m.Header, Data: m.Data, Time: tm}, np, nil
}

// directBatch and directBatchBytes bound one batched direct get of Each:
// the server counts the subject's pending messages once per batch, which
// over a report stream of 20,000 instances cost more than reading them
// (BenchmarkReports: 1.9 s for all with batches of 256, 0.4 s with 4096);
// the byte bound keeps a batch of large messages (versions, chunks) well
// inside a subscription's pending limit (64 MiB).
const (
	directBatch      = 4096
	directBatchBytes = 8 << 20
)

// Each calls fn with every message on subject (wildcards allowed) in
// stream order, by batched direct gets ({"seq":N,"batch":B,"next_by_subj":…}
// until the server's end-of-batch status says nothing is pending). On a
// stream keeping one message per subject (the report stream) that is the
// newest message of each subject.
func (s DirectStream) Each(ctx context.Context, subject string, fn func(*jetstream.RawStreamMsg) error) error {
	for seq := uint64(1); ; {
		next, more, err := s.batch(ctx, directRequest{Seq: seq, NextFor: subject, Batch: directBatch, MaxBytes: directBatchBytes}, fn)
		if err != nil || !more {
			return err
		}
		seq = next
	}
}

// LastPerSubject calls fn with the newest message of every subject matching
// subject, by one batched multi-last direct get. A stream with more than
// the server's limit (1024) of such subjects gives an error wrapping
// ErrTooManySubjects.
func (s DirectStream) LastPerSubject(ctx context.Context, subject string, fn func(*jetstream.RawStreamMsg) error) error {
	_, more, err := s.batch(ctx, directRequest{MultiLast: []string{subject}, Batch: 1 << 20}, fn)
	if err == nil && more {
		// The answer stopped at the server's byte limit.
		return fmt.Errorf("multi-last get from %s: %w", s.name, ErrTooManySubjects)
	}
	return err
}

// ErrTooManySubjects: a multi-last direct get matched more subjects than the
// server answers at once.
var ErrTooManySubjects = errors.New("too many subjects for one multi-last get")

// batch makes one batched direct get and calls fn with each message, in
// order. It returns the sequence to continue from and whether messages
// are still pending there.
func (s DirectStream) batch(ctx context.Context, req directRequest, fn func(*jetstream.RawStreamMsg) error) (uint64, bool, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return 0, false, err
	}
	ctx, cancel := boundRequest(ctx, 2*requestTimeout)
	defer cancel()
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, fmt.Errorf("batched direct get from %s: %w", s.name, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+s.name, inbox, body); err != nil {
		return 0, false, fmt.Errorf("batched direct get from %s: %w", s.name, err)
	}
	next := req.Seq
	for first := true; ; first = false {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("batched direct get from %s: %w", s.name, err)
		}
		if first && m.Header.Get("Status") == "503" {
			return 0, false, fmt.Errorf("batched direct get from %s: %w", s.name, jetstream.ErrStreamNotFound)
		}
		if m.Header.Get("Status") == "413" {
			return 0, false, fmt.Errorf("batched direct get from %s: %w", s.name, ErrTooManySubjects)
		}
		msg, np, err := s.decode(m)
		switch {
		case errors.Is(err, errEOB):
			return next, np > 0, nil
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return next, false, nil
		case err != nil:
			return 0, false, err
		}
		next = msg.Sequence + 1
		if err := fn(msg); err != nil {
			return 0, false, err
		}
	}
}
