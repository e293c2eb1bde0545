package web

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/httpsrv"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/reqbody/reqbodytest"
	"github.com/cuecast/cuecast/mutator"
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

// TestSetAPISlowBody: a valid token's set whose body trickles in holds no
// more than its connection: the landing strip is taken only once the body
// is read, so another writer's change lands meanwhile, and the body that
// does not come in time is a 400 that commits nothing.
func TestSetAPISlowBody(t *testing.T) {
	t.Parallel()
	ss := newSetServer(t)
	front := func(timeout time.Duration) string {
		f := NewFront(nil, nil)
		f.Limit(httpsrv.Limits{BodyTimeout: timeout})
		f.Open(setAPI(t, ss.repo, mutator.Options{}))
		return serveFront(t, f)
	}
	patient, hasty := front(time.Hour), front(50*time.Millisecond)

	slow := reqbodytest.PartialRequest(t, patient, "/api/set", "Authorization", "Bearer "+growthToken)
	other := &setServer{repo: ss.repo, url: "http://" + patient}
	var res mutator.Result
	if code := other.post(t, "/api/set", operatorToken, setReq("payments/checkout", "max_amount_minor", "6000000", nil), &res); code != http.StatusOK || res.Commit != ss.repo.Head() {
		t.Fatalf("a change beside the slow body: %d, main at %s, want %s", code, ss.repo.Head(), res.Commit)
	}
	select {
	case got := <-slow:
		t.Fatalf("the slow body was answered before it came: %s", got)
	default:
	}

	head := ss.repo.Head()
	got := poll.Receive(t, "the reply to a partial body", poll.Patience, reqbodytest.PartialRequest(t, hasty, "/api/set", "Authorization", "Bearer "+growthToken))
	if !strings.HasPrefix(got, "400 ") || !strings.Contains(got, "read body") {
		t.Errorf("got %s, want 400 read body", got)
	}
	if ss.repo.Head() != head {
		t.Errorf("main moved to %s after a body that did not come", ss.repo.Head())
	}
}
