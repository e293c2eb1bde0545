package distributor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// requestTimeout bounds a plain request whose context has no deadline, as
// jetstream's default API timeout bounds its own calls: nats.go does not
// fail a request whose answer was lost with the connection, and callers
// such as the tailer and the running rollout controller hold contexts
// without one, so the wait would never end (TestRecordReturnsWhenItsAnswerIsLost,
// TestLeaderLatestReturnsWhenItsAnswerIsLost).
const requestTimeout = 5 * time.Second

// boundRequest gives ctx a deadline d from now when it has none.
func boundRequest(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// LeaderLastMsg reads the last message on subject from stream's leader
// with a message get ($JS.API.STREAM.MSG.GET), not a direct get: a direct
// get may be answered by a replica of an R3 stream that has not applied a
// write already acknowledged, the leader has applied every one. A missing
// message gives an error wrapping jetstream.ErrMsgNotFound. It needs the
// JetStream API, which the operator's account does not have (use
// DirectStream there).
func LeaderLastMsg(ctx context.Context, nc *nats.Conn, stream, subject string) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": subject})
	if err != nil {
		return nil, err
	}
	ctx, cancel := boundRequest(ctx, requestTimeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("message get from %s: %w", stream, err)
	}
	var resp struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("message get from %s: decode answer: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return nil, fmt.Errorf("message get from %s: %w", stream, jetstream.ErrMsgNotFound)
	case resp.Error != nil:
		return nil, fmt.Errorf("message get from %s: %s (%d)", stream, resp.Error.Description, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, fmt.Errorf("message get from %s: empty answer", stream)
	}
	msg := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Seq, Data: resp.Message.Data, Time: resp.Message.Time, Header: nats.Header{}}
	if len(resp.Message.Header) > 0 {
		if msg.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("message get from %s: %w", stream, err)
		}
	}
	return msg, nil
}
