package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast/internal/githubtest"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/publish"
	"github.com/cuecast/cuecast/mutator"
)

const (
	operatorToken = "op-secret"
	growthToken   = "growth-secret"
	paymentsToken = "payments-secret"
	weight0       = `flags."new-checkout".fallthrough.rollout.weights[0].weight`
)

// setServer is an operations server with the set API over a copy of
// configs-example whose search namespace takes pull requests only.
type setServer struct {
	repo *gittest.Repo
	url  string
}

func newSetServer(t *testing.T) *setServer {
	t.Helper()
	repo := gittest.New(t)
	repo.CopyDir(filepath.Join("..", "..", "configs-example"))
	man, err := os.ReadFile(filepath.Join(repo.Dir, "cuecast.cue"))
	if err != nil {
		t.Fatal(err)
	}
	repo.Write(map[string]string{"cuecast.cue": string(man) + "\nnamespaces: search: changes: land: \"pr\"\n"})
	repo.Commit("configs-example")
	return serveSet(t, repo, mutator.Options{})
}

// serveSet serves the set API over repo with the test's tokens.
func serveSet(t *testing.T, repo *gittest.Repo, mo mutator.Options) *setServer {
	t.Helper()
	srv := httptest.NewServer(setAPI(t, repo, mo).Handler())
	t.Cleanup(srv.Close)
	return &setServer{repo: repo, url: srv.URL}
}

// setAPI is the operations server serveSet serves.
func setAPI(t *testing.T, repo *gittest.Repo, mo mutator.Options) *Server {
	t.Helper()
	tokens, err := ReadTokens(strings.NewReader(
		"# name namespaces sha256\n" +
			"growth-bot growth " + hexSHA(growthToken) + "\n" +
			"payments-bot payments,search " + hexSHA(paymentsToken) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Fleet: fakeFleet{}, OperatorToken: operatorToken, Tokens: tokens, Mutator: mutator.New(repo.Dir, mo)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hexSHA(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// post sends body (a string as it is, anything else as JSON) to the API
// with token, and decodes the answer into out when it is not nil.
func (s *setServer) post(t *testing.T, path, token string, body any, out any) int {
	t.Helper()
	code, err := s.do(path, token, body, out)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// do is post for any goroutine: it returns what post fails the test with.
func (s *setServer) do(path, token string, body any, out any) (int, error) {
	b, ok := body.(string)
	if !ok {
		j, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		b = string(j)
	}
	req, err := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(b))
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: %d %s: %w", path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, nil
}

type obj = map[string]any

func setReq(cfg, path, value string, extra obj) obj {
	b := obj{"configs": []string{cfg}, "set": []obj{{"path": path, "value": value}}, "reason": "test", "mode": "commit"}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// TestSetAPIStatuses: each outcome of a set through the API has its status
// and says what the caller needs: the current value of a conflict, the
// origin of a refusal, the compiler's file:line of a broken config; bad
// input is a 400, never a 500; nothing but a success moves main.
func TestSetAPIStatuses(t *testing.T) {
	t.Parallel()
	s := newSetServer(t)
	head := s.repo.Head()
	for _, c := range []struct {
		name, path, token string
		body              any
		code              int
		check             func(t *testing.T, e setErrorBody)
	}{
		{name: "no token", path: "/api/set", body: setReq("payments/checkout", "currency", `"USD"`, nil), code: 401},
		{name: "wrong token", path: "/api/set", token: "guess", body: setReq("payments/checkout", "currency", `"USD"`, nil), code: 401},
		{name: "not JSON", path: "/api/set", token: operatorToken, body: `{"configs":`, code: 400},
		{name: "more after the body", path: "/api/set", token: operatorToken, body: `{"configs":["payments/checkout"],"set":[{"path":"currency","value":"\"USD\""}],"reason":"x","mode":"commit"} {"mode":"branch"}`, code: 400},
		{name: "unknown field", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"dryrun": true}), code: 400},
		{name: "no reason", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"reason": ""}), code: 400},
		{name: "actor forging a trailer", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"actor": "eve\nCuecast-Requested-By: alice"}), code: 400},
		{name: "actor forging an address", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"actor": "eve <alice@example.com>"}), code: 400},
		{name: "reason retitling a terminal", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"reason": "ok\x1b]0;pwned\x07"}), code: 400},
		{name: "a body over 4 MiB", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"reason": strings.Repeat("x", 4<<20)}), code: 400},
		{name: "nested beyond the decoder's depth", path: "/api/set", token: operatorToken, body: `{"variant":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, code: 400},
		{name: "bad mode", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"mode": "push"}), code: 400},
		{name: "bad config path", path: "/api/set", token: operatorToken, body: setReq("Payments/../x", "currency", `"USD"`, nil), code: 400},
		{name: "unknown config", path: "/api/set", token: operatorToken, body: setReq("payments/nope", "currency", `"USD"`, nil), code: 400},
		{name: "unknown path", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "nope.nope", "1", nil), code: 400},
		{name: "not a literal", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "max_amount_minor", "{", nil), code: 400},
		// A value is one literal: a comment would have been written into
		// the file, commenting out the rest of the line.
		{name: "comment in the value", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "three_ds.required_above_minor", "20 // x", nil), code: 400,
			check: func(t *testing.T, e setErrorBody) {
				if !strings.Contains(e.Error, `value "20 // x": "// x" is a comment`) {
					t.Errorf("error %q does not say the value has a comment", e.Error)
				}
			}},
		// A namespace token naming main.lock would have blocked main.
		{name: "branch git refuses", path: "/api/set", token: paymentsToken, body: setReq("payments/checkout", "currency", `"USD"`, obj{"mode": "branch", "branch": "main.lock"}), code: 400,
			check: func(t *testing.T, e setErrorBody) {
				if !strings.Contains(e.Error, `branch "main.lock" is not a branch name git accepts`) {
					t.Errorf("error %q does not name the branch", e.Error)
				}
			}},
		{name: "--at not a clean path", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "service.timeouts.read", `"3s"`, obj{"at": "payments/checkout/./x.cue"}), code: 400},
		{name: "two values for one shared literal", path: "/api/set", token: operatorToken, code: 400,
			body: obj{"set": []obj{{"config": "payments/checkout", "path": "ledger.port", "value": "7001"}, {"config": "payments/refunds", "path": "ledger.port", "value": "7002"}}, "reason": "test", "mode": "commit"},
			check: func(t *testing.T, e setErrorBody) {
				if !strings.Contains(e.Error, "lib/net/net.cue:13:") {
					t.Errorf("error %q does not name the literal's file:line:col", e.Error)
				}
			}},
		{name: "two literals", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "currency", `"USD" "GBP"`, nil), code: 400},
		{name: "unknown flag", path: "/api/flags/set", token: operatorToken, body: obj{"config": "growth/flags", "flag": "nope", "enable": true, "reason": "x", "mode": "commit"}, code: 400},
		{name: "two flag changes", path: "/api/flags/set", token: operatorToken, body: obj{"config": "growth/flags", "flag": "new-checkout", "enable": true, "rollout": 5, "reason": "x", "mode": "commit"}, code: 400},
		{name: "computed origin", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "service.replicas", "3", nil), code: 422,
			check: func(t *testing.T, e setErrorBody) {
				if e.Refused == nil || e.Refused.Kind != "computed" || len(e.Refused.Positions) == 0 || e.Refused.Positions[0].File != "payments/checkout/checkout.cue" || e.Refused.Positions[0].Line == 0 {
					t.Errorf("refusal %+v, want kind computed at payments/checkout/checkout.cue:N", e.Refused)
				}
			}},
		{name: "breaks the schema", path: "/api/set", token: operatorToken, body: setReq("payments/checkout", "max_amount_minor", "200000000", nil), code: 422,
			check: func(t *testing.T, e setErrorBody) {
				if e.Invalid == nil || len(e.Invalid.Errors) == 0 || e.Invalid.Errors[0].File == "" || e.Invalid.Errors[0].Line == 0 {
					t.Errorf("invalid %+v, want the compiler's errors with file:line", e.Invalid)
				}
			}},
		{name: "stale expectation", path: "/api/set", token: operatorToken, code: 409,
			body: setReq("growth/flags", weight0, "30000", obj{"expect": []obj{{"path": weight0, "value": "10000"}}}),
			check: func(t *testing.T, e setErrorBody) {
				if e.Conflict == nil || string(e.Conflict.Current) != "20000" || string(e.Conflict.Expected) != "10000" {
					t.Errorf("conflict %+v, want current 20000", e.Conflict)
				}
			}},
		{name: "policy: pull requests only", path: "/api/set", token: operatorToken, body: setReq("search/ranking", "weights.freshness", "0.3", nil), code: 403,
			check: func(t *testing.T, e setErrorBody) {
				if e.Policy == nil || e.Policy.Rule != "land" || e.Policy.Namespace != "search" {
					t.Errorf("policy %+v, want rule land of search", e.Policy)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e setErrorBody
			if code := s.post(t, c.path, c.token, c.body, &e); code != c.code || e.Error == "" {
				t.Fatalf("got %d %+v, want %d with an error", code, e, c.code)
			}
			if c.check != nil {
				c.check(t, e)
			}
			if s.repo.Head() != head {
				t.Fatalf("main moved to %s", s.repo.Head())
			}
		})
	}

	t.Run("dry run reports without committing", func(t *testing.T) {
		var res mutator.Result
		if code := s.post(t, "/api/flags/set", growthToken, obj{"config": "growth/flags", "flag": "new-checkout", "rollout": 50, "reason": "half", "mode": "commit", "dry_run": true}, &res); code != 200 {
			t.Fatalf("dry run: %d", code)
		}
		if s.repo.Head() != head || res.Report == nil || len(res.Report.Configs) != 1 || len(res.Report.Configs[0].Diff) == 0 ||
			len(res.Values) != 2 || res.Values[0].Origin == "" || res.Values[0].Edited.File != "growth/flags/flags.cue" {
			t.Errorf("dry run moved main or reported %+v", res)
		}
	})
	t.Run("commit names who asked", func(t *testing.T) {
		var res mutator.Result
		if code := s.post(t, "/api/set", operatorToken, setReq("payments/checkout", "max_amount_minor", "6000000", obj{"actor": "alice"}), &res); code != 200 {
			t.Fatalf("set: %d", code)
		}
		if res.Commit != s.repo.Head() {
			t.Fatalf("main at %s, want %s", s.repo.Head(), res.Commit)
		}
		cm, err := s.repo.Git.CommitObject(plumbing.NewHash(res.Commit))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Author.Name != "web:operator (alice)" || cm.Author.Email != "operator@cuecast.invalid" || !strings.Contains(cm.Message, mutator.RequestedByTrailer+": web:operator (alice)") ||
			!strings.Contains(cm.Message, mutator.Trailer+": cuecast serve: set") {
			t.Errorf("commit by %q:\n%s", cm.Author.Name, cm.Message)
		}
	})
}

// TestNamespaceTokenStaysInItsNamespace plays the holder of the growth
// namespace's token trying to change, or read through a conflict, another
// namespace's config by every door of the API. The oracle: nothing is
// committed, and the payments token's own change after them still lands.
func TestNamespaceTokenStaysInItsNamespace(t *testing.T) {
	t.Parallel()
	s := newSetServer(t)
	head := s.repo.Head()
	checkout := filepath.Join(s.repo.Dir, "payments", "checkout", "checkout.cue")
	before, err := os.ReadFile(checkout)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		body       obj
	}{
		{"another namespace's config", "/api/set", setReq("payments/checkout", "max_amount_minor", "1", nil)},
		{"an assignment naming another config", "/api/set",
			obj{"configs": []string{"growth/flags"}, "set": []obj{{"config": "payments/checkout", "path": "max_amount_minor", "value": "1"}}, "reason": "x", "mode": "commit"}},
		{"an expectation reading another config", "/api/set",
			setReq("growth/flags", weight0, "20000", obj{"expect": []obj{{"config": "payments/checkout", "path": "max_amount_minor", "value": "1"}}})},
		{"both configs at once", "/api/set",
			obj{"configs": []string{"growth/flags", "payments/checkout"}, "set": []obj{{"path": "max_amount_minor", "value": "1"}}, "reason": "x", "mode": "commit"}},
		{"a flag of another namespace", "/api/flags/set", obj{"config": "search/new-ui-flag", "flag": "new-ui", "disable": true, "reason": "x", "mode": "commit"}},
		{"a pull request into another namespace", "/api/set", setReq("payments/checkout", "max_amount_minor", "1", obj{"mode": "branch", "branch": "main"})},
		{"a dry run of another namespace", "/api/set", setReq("payments/checkout", "max_amount_minor", "1", obj{"dry_run": true})},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e setErrorBody
			if code := s.post(t, c.path, growthToken, c.body, &e); code != http.StatusForbidden || e.Policy == nil || e.Policy.Rule != "namespace" {
				t.Errorf("got %d %+v, want 403 for the namespace", code, e)
			}
			if e.Conflict != nil {
				t.Errorf("the answer reads another namespace's value: %+v", e.Conflict)
			}
		})
	}
	t.Run("a config path climbing out", func(t *testing.T) {
		if code := s.post(t, "/api/set", growthToken, setReq("growth/../payments/checkout", "max_amount_minor", "1", nil), nil); code != http.StatusBadRequest {
			t.Errorf("got %d, want 400", code)
		}
	})
	// Another spelling of another namespace's config is not a config (400,
	// or 403 where its first segment is not the token's namespace, which
	// /api/set answers first), or is that namespace's: never the token's
	// own.
	const refused = 0
	for _, c := range []struct {
		name string
		body obj
		code int // refused: 400 or 403
	}{
		{"a variant of another namespace's config", setReq("payments/checkout/env=prod", "max_amount_minor", "1", nil), http.StatusForbidden},
		{"an @ variant of another namespace's config", setReq("payments/checkout@env=prod", "max_amount_minor", "1", nil), refused},
		{"the token's namespace, then @ another's", setReq("growth/flags@payments/checkout", "max_amount_minor", "1", nil), http.StatusBadRequest},
		{"an encoded climb", setReq("growth/%2e%2e/payments/checkout", "max_amount_minor", "1", nil), http.StatusBadRequest},
		{"an encoded slash", setReq("growth%2fflags/../../payments/checkout", "max_amount_minor", "1", nil), refused},
		{"a backslash climb", setReq(`growth\..\payments/checkout`, "max_amount_minor", "1", nil), refused},
		{"a climb below the token's config", setReq("growth/flags/../../payments/checkout", "max_amount_minor", "1", nil), http.StatusBadRequest},
		{"case folded", setReq("Growth/flags", weight0, "1", obj{"set": []obj{{"config": "Payments/checkout", "path": "max_amount_minor", "value": "1"}}}), refused},
		{"a trailing slash", setReq("growth/flags/", weight0, "1", nil), http.StatusBadRequest},
		{"an absolute path", setReq("/payments/checkout", "max_amount_minor", "1", nil), refused},
		{"a field of another config by its path", setReq("growth/flags", "payments.checkout.max_amount_minor", "1", nil), http.StatusBadRequest},
		{"an override in another namespace's directory", setReq("growth/flags", weight0, "1", obj{"at": "payments/checkout/x.cue"}), http.StatusBadRequest},
		{"an override climbing out", setReq("growth/flags", weight0, "1", obj{"at": "growth/flags/../../payments/checkout/x.cue"}), http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e setErrorBody
			code := s.post(t, "/api/set", growthToken, c.body, &e)
			if c.code == refused && (code == http.StatusBadRequest || code == http.StatusForbidden) {
				code = refused
			}
			if code != c.code || e.Error == "" {
				t.Errorf("got %d %+v, want %d", code, e, c.code)
			}
		})
	}
	if s.repo.Head() != head {
		t.Fatalf("main moved to %s", s.repo.Head())
	}
	if after, _ := os.ReadFile(checkout); !bytes.Equal(after, before) {
		t.Fatalf("checkout.cue changed:\n%s", after)
	}
	// Everyone else still gets the next change through.
	var res mutator.Result
	if code := s.post(t, "/api/set", paymentsToken, setReq("payments/checkout", "max_amount_minor", "7000000", nil), &res); code != http.StatusOK || res.Commit != s.repo.Head() {
		t.Fatalf("the payments token's change: %d, main at %s", code, s.repo.Head())
	}
	if after, _ := os.ReadFile(checkout); !strings.Contains(string(after), "max_amount_minor: 7000000") {
		t.Errorf("checkout.cue after the legitimate change:\n%s", after)
	}
	if code := s.post(t, "/api/flags/set", growthToken, obj{"config": "growth/flags", "flag": "new-checkout", "rollout": 30, "reason": "x", "mode": "commit"}, &res); code != http.StatusOK || res.Commit != s.repo.Head() {
		t.Fatalf("the growth token's own change: %d", code)
	}
	cm, err := s.repo.Git.CommitObject(plumbing.NewHash(res.Commit))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cm.Message, "growth/flags: new-checkout rollout to 30% of users\n") || cm.Author.Name != "web:growth-bot" {
		t.Errorf("flag commit by %s:\n%s\nwant the flag's subject, by the token's name", cm.Author.Name, cm.Message)
	}
}

// TestReadTokens: the tokens file holds SHA-256s, never tokens.
func TestReadTokens(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"bot growth " + growthToken,           // the token itself
		"bot growth",                          // no hash
		"bot Growth/x " + hexSHA(growthToken), // not a namespace
		"bot growth " + hexSHA(growthToken) + "\nbot2 payments " + hexSHA(growthToken), // one token twice
	} {
		if _, err := ReadTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestSetAPIPullRequest: in a namespace whose policy takes pull requests
// only, the API's change lands as one: a branch pushed to the remote and a
// pull request opened on (fake) GitHub, its link in the answer; main stays.
func TestSetAPIPullRequest(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	s := newSetServer(t)
	s.repo.Bare()
	s = serveSet(t, s.repo, mutator.Options{GitHub: publish.GitHub{APIURL: gh.URL, Token: githubtest.Token, Owner: "acme", Name: "configs"}})
	head := s.repo.Head()
	var res mutator.Result
	if code := s.post(t, "/api/set", paymentsToken, setReq("search/ranking", "weights.freshness", "0.3", obj{"mode": "pr"}), &res); code != http.StatusOK {
		t.Fatalf("pull request: %d", code)
	}
	if s.repo.Head() != head || res.PullRequest == nil || !res.Pushed || gh.Pulls()[res.PullRequest.Number].Head != res.Branch {
		t.Errorf("main %s (was %s), result %+v: want main unmoved and a pull request of the pushed branch", s.repo.Head(), head, res)
	}
}

// TestSetAPIDisabledSaysWhy: with a token given but no mutator (serve
// follows a --repo URL, which has no work tree to commit to), the 401 says
// so, not that the token is missing, which it is not.
func TestSetAPIDisabledSaysWhy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		o        Options
		want     string
		dontWant string
	}{
		{"token but no work tree", Options{Fleet: fakeFleet{}, OperatorToken: operatorToken}, "no work tree to commit to", "--operator-token or --api-tokens"},
		{"no token", Options{Fleet: fakeFleet{}}, "--operator-token or --api-tokens", "work tree"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := New(c.o)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(s.Handler())
			defer srv.Close()
			var e setErrorBody
			code, err := (&setServer{url: srv.URL}).do("/api/set", operatorToken, setReq("payments/checkout", "currency", `"USD"`, nil), &e)
			if err != nil {
				t.Fatal(err)
			}
			if code != http.StatusUnauthorized || !strings.Contains(e.Error, c.want) || strings.Contains(e.Error, c.dontWant) {
				t.Errorf("got %d %q; want 401 saying %q, not %q", code, e.Error, c.want, c.dontWant)
			}
		})
	}
}

// TestSetAPIUnchanged: a set to the value already there answers 200 with
// unchanged, and main does not move (no empty commit).
func TestSetAPIUnchanged(t *testing.T) {
	t.Parallel()
	s := newSetServer(t)
	head := s.repo.Head()
	var res struct {
		Unchanged bool   `json:"unchanged"`
		Commit    string `json:"commit"`
	}
	code, err := s.do("/api/set", operatorToken, setReq("payments/checkout", "currency", `"EUR"`, nil), &res)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK || !res.Unchanged || res.Commit != "" {
		t.Errorf("got %d %+v, want 200 unchanged without a commit", code, res)
	}
	if s.repo.Head() != head {
		t.Errorf("main moved to %s", s.repo.Head())
	}
}

// TestSetAPIRefusesBeforeTheBody: docs/SECURITY.md, a request without a
// valid token is refused (401) before its body is read: a caller without a
// token announcing a 4 MiB body and sending none gets its answer at once,
// and nothing is committed.
func TestSetAPIRefusesBeforeTheBody(t *testing.T) {
	t.Parallel()
	s := newSetServer(t)
	head := s.repo.Head()
	for _, token := range []string{"", "guess"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		auth := ""
		if token != "" {
			auth = "Authorization: Bearer " + token + "\r\n"
		}
		fmt.Fprintf(c, "POST /api/set HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", auth, 4<<20)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || res.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q, body announced and not sent: %v %v; want 401 at once", token, res, err)
		}
	}
	if s.repo.Head() != head {
		t.Errorf("main moved to %s", s.repo.Head())
	}
}

// TestSetAPIBranchLocked: a branch another writer holds (its .lock there:
// git, a `cuecast set` on the same repository, or one left by a crash) is
// a conflict, 409 as for an expectation, never a 500; and the message says
// the branch is taken, not that a value changed.
func TestSetAPIBranchLocked(t *testing.T) {
	t.Parallel()
	s := newSetServer(t)
	head := s.repo.Head()
	lock := filepath.Join(s.repo.Dir, ".git", "refs", "heads", "main.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var e setErrorBody
	if code := s.post(t, "/api/set", operatorToken, setReq("payments/checkout", "currency", `"USD"`, nil), &e); code != http.StatusConflict {
		t.Errorf("set on a locked main: %d %+v, want 409", code, e)
	}
	if !strings.Contains(e.Error, "main.lock exists") || strings.Contains(e.Error, "value changed") {
		t.Errorf("error %q: want it to name the lock, and not to say a value changed", e.Error)
	}
	if s.repo.Head() != head {
		t.Errorf("main moved to %s", s.repo.Head())
	}
}

// TestSetAPIDryRunWithoutMode: a dry run only verifies, so it needs no
// mode; it was refused 400 `mode "" is none of commit, branch, pr`.
func TestSetAPIDryRunWithoutMode(t *testing.T) {
	t.Parallel()
	s := newSetServer(t)
	head := s.repo.Head()
	body := setReq("payments/checkout", "currency", `"USD"`, obj{"dry_run": true})
	delete(body, "mode")
	var res mutator.Result
	if code := s.post(t, "/api/set", operatorToken, body, &res); code != http.StatusOK || res.Commit == "" || res.Branch != "" {
		t.Errorf("dry run without a mode: %d %+v, want 200 verified and not landed", code, res)
	}
	if s.repo.Head() != head {
		t.Errorf("a dry run moved main to %s", s.repo.Head())
	}
}

// TestSetAPICrossSite plays a web page of another site, open in a browser
// on serve's host: it can send a form or a text/plain POST, with whatever
// the browser attaches on its own (cookies, Basic credentials it cached),
// but no Authorization header of its choosing without a CORS preflight
// the server must not grant. Each is a 401, nothing is committed, and the
// next legitimate change lands.
func TestSetAPICrossSite(t *testing.T) {
	t.Parallel()
	s := newSetServer(t)
	head := s.repo.Head()
	body, err := json.Marshal(setReq("payments/checkout", "max_amount_minor", "1", nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, url, ctype, body string
		header                 []string
	}{
		{"a form", "/api/set", "application/x-www-form-urlencoded", "configs=payments%2Fcheckout&reason=x", nil},
		{"a text/plain JSON body", "/api/set", "text/plain", string(body), nil},
		{"a multipart form", "/api/flags/set", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"config\"\r\n\r\ngrowth/flags\r\n--x--\r\n", nil},
		{"the token as a cookie", "/api/set", "text/plain", string(body), []string{"Cookie", "token=" + operatorToken + "; cuecast_token=" + operatorToken}},
		{"the token as Basic credentials the browser cached", "/api/set", "text/plain", string(body), []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+operatorToken))}},
		{"the token in the query", "/api/set?token=" + operatorToken + "&access_token=" + operatorToken, "text/plain", string(body), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, s.url+c.url, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", c.ctype)
			req.Header.Set("Origin", "https://evil.example")
			for i := 0; i+1 < len(c.header); i += 2 {
				req.Header.Set(c.header[i], c.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("got %d (Access-Control-Allow-Origin %q), want 401 and no CORS", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
			}
		})
	}
	t.Run("the preflight for a bearer token", func(t *testing.T) {
		for _, path := range []string{"/api/set", "/api/flags/set"} {
			req, err := http.NewRequest(http.MethodOptions, s.url+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization,content-type")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for k := range resp.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("OPTIONS %s: %d with %s: %q, want no CORS grant", path, resp.StatusCode, k, resp.Header.Get(k))
				}
			}
			if resp.StatusCode < 400 {
				t.Errorf("OPTIONS %s: %d, want it refused", path, resp.StatusCode)
			}
		}
	})
	if s.repo.Head() != head {
		t.Fatalf("main moved to %s", s.repo.Head())
	}
	var res mutator.Result
	if code := s.post(t, "/api/set", paymentsToken, setReq("payments/checkout", "max_amount_minor", "7000000", nil), &res); code != http.StatusOK || res.Commit != s.repo.Head() {
		t.Fatalf("the legitimate change after: %d, main at %s", code, s.repo.Head())
	}
}
