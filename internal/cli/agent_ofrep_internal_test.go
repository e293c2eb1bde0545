package cli

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/httpsrv"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/reqbody/reqbodytest"
	"github.com/cuecast/cuecast/internal/webtest"
)

const internalTestToken = "gggggggggggggggggggggggggggggggggggggggg" // reads growth

// serveOFREP serves the agent's OFREP server, built as startOFREP builds
// it over a store holding growth/flags, on a loopback port until the test
// ends; tokens as --ofrep-tokens when withTokens.
func serveOFREP(t *testing.T, bodyTimeout time.Duration, withTokens bool) string {
	t.Helper()
	var tokens *ofrep.Tokens
	if withTokens {
		var err error
		if tokens, err = ofrep.ParseTokens("tokens", []byte("growth "+internalTestToken+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	store := ofrep.NewStore()
	set := `{"schema": "cuecast.flags/v1", "flags": {"b": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "on", "salt": "b"}}}`
	if _, err := store.Apply("growth/flags", 1, []byte(set), false); err != nil {
		t.Fatal(err)
	}
	h, err := ofrep.New(ofrep.Options{Store: store, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ofrepServer(h, httpsrv.Limits{BodyTimeout: bodyTimeout}, true, nil)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestAgentOFREPSlowBody: the agent's OFREP answers a request it refuses
// before reading its body (no token, an unknown one, another namespace's
// key, another path) at once, however little of the body has come; and a body
// that does not arrive in time is a 400 PARSE_ERROR, not a connection
// held for ever. Under a body timeout of an hour, an answer to a refused
// request can only be the refusal's own.
func TestAgentOFREPSlowBody(t *testing.T) {
	patient := serveOFREP(t, time.Hour, true)
	for _, c := range []struct {
		path   string
		header []string
		want   string
	}{
		{"/ofrep/v1/evaluate/flags/growth/flags/b", nil, "401 "},
		{"/ofrep/v1/evaluate/flags", []string{"X-API-Key", strings.Repeat("x", 40)}, "401 "},
		{"/ofrep/v1/evaluate/flags/payments/flags/b", []string{"Authorization", "Bearer " + internalTestToken}, "403 "},
		{"/elsewhere", nil, "404 "},
	} {
		got := poll.Receive(t, c.path+"'s refusal", poll.Patience, reqbodytest.PartialRequest(t, patient, c.path, c.header...))
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("POST %s %v: %s, want %s", c.path, c.header, got, c.want)
		}
	}

	// A body read to its end keeps the connection for the next request.
	req, err := http.NewRequest(http.MethodPost, "http://"+patient+"/ofrep/v1/evaluate/flags/growth/flags/b", strings.NewReader(`{"context": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+internalTestToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Errorf("a whole request: %d, connection closed %v; want 200 on a connection kept", res.StatusCode, res.Close)
	}

	for name, withTokens := range map[string]bool{"token holder": true, "insecure-local": false} {
		hasty := serveOFREP(t, 50*time.Millisecond, withTokens)
		got := poll.Receive(t, name+": the reply to a partial body", poll.Patience,
			reqbodytest.PartialRequest(t, hasty, "/ofrep/v1/evaluate/flags/growth/flags/b", "Authorization", "Bearer "+internalTestToken))
		if !strings.HasPrefix(got, "400 ") || !strings.Contains(got, ofrep.CodeParseError) {
			t.Errorf("%s: got %s, want 400 %s", name, got, ofrep.CodeParseError)
		}
	}
}

// TestAgentOFREPRebinding: a web page on the host, its name rebound to
// 127.0.0.1, reaches the agent's loopback OFREP from the browser (a
// text/plain POST needs no CORS preflight) with its own name as Host; the
// agent answers only requests addressed to a loopback address or
// localhost, so the page reads nothing, with or without tokens.
func TestAgentOFREPRebinding(t *testing.T) {
	addr := serveOFREP(t, time.Hour, false)
	for host, allowed := range rebindHosts(t, addr) {
		code, body := webtest.Do(t, webtest.Request{Method: http.MethodPost, URL: "http://" + addr + "/ofrep/v1/evaluate/flags", Host: host, Body: `{"context": {"targetingKey": "u"}}`})
		b := string(body)
		if code != http.StatusOK && code != http.StatusMisdirectedRequest || (code == http.StatusOK) != allowed {
			t.Errorf("Host %s: %d %s, want answered %v (else 421)", host, code, b, allowed)
		}
		if !allowed && (strings.Contains(b, "growth/flags") || !strings.Contains(b, `"errorCode":"GENERAL"`)) {
			t.Errorf("Host %s: %s, want OFREP's error JSON and no flag", host, b)
		}
	}
}

// rebindHosts are Host headers a loopback listener at addr answers (true)
// or refuses: a rebound page's names, with and without the port, and the
// loopback names.
func rebindHosts(t *testing.T, addr string) map[string]bool {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]bool{
		"rebind.attacker.example:" + port:    false,
		"rebind.attacker.example":            false,
		"localhost.attacker.example:" + port: false,
		"127.0.0.1.nip.io:" + port:           false,
		"192.168.1.10:" + port:               false,
		"127.0.0.1:" + port:                  true,
		"127.0.0.1":                          true,
		"localhost:" + port:                  true,
		"LocalHost":                          true,
		"[::1]:" + port:                      true,
		"[::1]":                              true,
	}
}
