package web

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/httpsrv"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/reqbody/reqbodytest"
)

// serveFront serves f on a loopback port until the test ends.
func serveFront(t *testing.T, f *Front) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// TestSlowBody: serve's --http answers a request it refuses before
// reading the body (no token, an unknown token, starting) at once, however
// little of the body has come; and a body that does not arrive in time is
// a 400, not a connection held for ever. Under a body timeout of an hour,
// an answer to a refused request can only be the refusal's own.
func TestSlowBody(t *testing.T) {
	const token = "gggggggggggggggggggggggggggggggggggggggg"
	tokens, err := ofrep.ParseTokens("tokens", []byte("growth "+token+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	newFront := func(timeout time.Duration) string {
		s, err := New(Options{Fleet: fakeFleet{}, OFREPTokens: tokens, OperatorToken: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		f := NewFront(nil, nil)
		f.Limit(httpsrv.Limits{BodyTimeout: timeout})
		f.Open(s)
		return serveFront(t, f)
	}
	patient, hasty := newFront(time.Hour), newFront(50*time.Millisecond)

	t.Run("refused before the body: at once", func(t *testing.T) {
		for _, c := range []struct {
			path   string
			header []string
			want   string
		}{
			{"/ofrep/v1/evaluate/flags/growth/flags/new-checkout", nil, "401 "},
			{"/ofrep/v1/evaluate/flags", []string{"Authorization", "Bearer " + strings.Repeat("x", 40)}, "401 "},
			{"/ofrep/v1/evaluate/flags/payments/flags/b", []string{"Authorization", "Bearer " + token}, "403 "},
			{"/api/set", nil, "401 "},
			{"/api/flags/set", []string{"Authorization", "Bearer wrong"}, "401 "},
			{"/api/rollouts/halt/growth/flags", nil, "401 "},
		} {
			got := poll.Receive(t, c.path+"'s refusal", poll.Patience, reqbodytest.PartialRequest(t, patient, c.path, c.header...))
			if !strings.HasPrefix(got, c.want) {
				t.Errorf("POST %s %v: %s, want %s", c.path, c.header, got, c.want)
			}
		}
	})
	t.Run("a body that does not come: 400", func(t *testing.T) {
		got := poll.Receive(t, "the reply to a partial body", poll.Patience,
			reqbodytest.PartialRequest(t, hasty, "/ofrep/v1/evaluate/flags", "Authorization", "Bearer "+token))
		if !strings.HasPrefix(got, "400 ") || !strings.Contains(got, ofrep.CodeParseError) {
			t.Errorf("got %s, want 400 %s", got, ofrep.CodeParseError)
		}
	})
	t.Run("starting: at once", func(t *testing.T) {
		f := NewFront(nil, nil)
		f.Limit(httpsrv.Limits{BodyTimeout: time.Hour})
		got := poll.Receive(t, "the reply while starting", poll.Patience, reqbodytest.PartialRequest(t, serveFront(t, f), "/api/set"))
		if !strings.HasPrefix(got, "503 ") {
			t.Errorf("got %s, want 503", got)
		}
	})
}
