package client

import (
	"context"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// The wire layout of docs/PROTOCOL.md is spelled in the root package
// (stream, subjects, cuecast's own headers); what is the client's own is the
// direct-get subject and the headers NATS adds to what it reads.
const (
	directGet  = "$JS.API.DIRECT.GET." + cuecast.Stream
	headerSeq  = "Nats-Sequence"
	headerLast = "Nats-Last-Sequence"
	headerSubj = "Nats-Subject"
)

// errNoMessage is a direct get's 404.
var errNoMessage = fmt.Errorf("no such message: %w", cuecast.ErrNotFound)

// getBySeq reads one stored message by sequence with a direct get.
// prefix is the direct-get subject of the stream read (see WithStream).
func getBySeq(ctx context.Context, nc *nats.Conn, prefix string, seq uint64) (*nats.Msg, error) {
	return direct(ctx, nc, prefix, []byte(`{"seq":`+strconv.FormatUint(seq, 10)+`}`))
}

// getLast reads the last stored message on subj with a direct get.
func getLast(ctx context.Context, nc *nats.Conn, prefix, subj string) (*nats.Msg, error) {
	return direct(ctx, nc, prefix+"."+subj, nil)
}

func direct(ctx context.Context, nc *nats.Conn, subj string, body []byte) (*nats.Msg, error) {
	m, err := nc.RequestWithContext(ctx, subj, body)
	if err != nil {
		return nil, fmt.Errorf("direct get: %w", err)
	}
	if st := m.Header.Get("Status"); st != "" && len(m.Data) == 0 {
		if st == "404" {
			return nil, errNoMessage
		}
		return nil, fmt.Errorf("direct get: status %s %s", st, m.Header.Get("Description"))
	}
	return m, nil
}

// seqHeaders returns a message's stream sequence and the previous sequence
// on its subject (from RePublish or direct get headers).
func seqHeaders(m *nats.Msg) (seq, last uint64, err error) {
	seq, err = strconv.ParseUint(m.Header.Get(headerSeq), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse %s: %w", headerSeq, err)
	}
	if l := m.Header.Get(headerLast); l != "" {
		if last, err = strconv.ParseUint(l, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("parse %s: %w", headerLast, err)
		}
	}
	return seq, last, nil
}
