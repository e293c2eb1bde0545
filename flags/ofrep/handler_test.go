package ofrep_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/flags"
	"github.com/cuecast/cuecast/flags/ofrep"
)

// A flag set with a flag of every type, targeting, a rollout and a
// prerequisite, in two namespaces' configs.
const testSet = `{"schema": "cuecast.flags/v1", "flags": {
	"b": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "b",
		"fallthrough": {"variant": "on"}},
	"s": {"type": "string", "variants": {"hi": "hi", "bye": "bye"}, "on": true, "offVariant": "bye", "defaultVariant": "bye", "salt": "s",
		"rules": [{"id": "nl", "clauses": [{"attribute": "country", "op": "in", "values": ["NL"]}], "variant": "hi"}]},
	"i": {"type": "int", "variants": {"ten": 10, "one": 1}, "on": false, "offVariant": "one", "defaultVariant": "ten", "salt": "i"},
	"f": {"type": "float", "variants": {"half": 0.5}, "on": true, "offVariant": "half", "defaultVariant": "half", "salt": "f"},
	"o": {"type": "object", "variants": {"t": {"title": "x", "n": 3}}, "on": true, "offVariant": "t", "defaultVariant": "t", "salt": "o"},
	"checkout-v2": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off",
		"salt": "checkout-v2", "prerequisites": [{"flag": "b", "variant": "on"}],
		"fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 50000}, {"variant": "off", "weight": 50000}]}}}
}}`

const (
	tokenA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" // reads payments
	tokenB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" // reads growth
)

func newStore(t *testing.T) *ofrep.Store {
	t.Helper()
	st := ofrep.NewStore()
	for _, cfg := range []string{"payments/flags", "growth/flags"} {
		if ok, err := st.Apply(cfg, 3, []byte(testSet), false); !ok || err != nil {
			t.Fatalf("apply %s: %v %v", cfg, ok, err)
		}
	}
	return st
}

func newServer(t *testing.T, st *ofrep.Store, tokens *ofrep.Tokens) *httptest.Server {
	t.Helper()
	h, err := ofrep.New(ofrep.Options{Store: st, Tokens: tokens, MaxBody: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type response struct {
	code   int
	header http.Header
	body   map[string]any
	raw    string
}

func post(t *testing.T, url, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := response{code: resp.StatusCode, header: resp.Header, raw: string(b)}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &r.body); err != nil {
			t.Fatalf("POST %s: body %q is not a JSON object: %v", url, b, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("POST %s: Content-Type %q, want application/json (the providers require it)", url, ct)
		}
	}
	return r
}

// TestSingle: each value type, reason and metadata of the single-flag
// endpoint, and each bad input with the spec's status and error code,
// never a 500.
func TestSingle(t *testing.T) {
	srv := newServer(t, newStore(t), nil)
	flag := srv.URL + "/ofrep/v1/evaluate/flags/"
	for _, c := range []struct {
		name, key, body string
		code            int
		want            map[string]any
	}{
		{"bool static", "payments/flags/b", `{"context": {}}`, 200,
			map[string]any{"key": "payments/flags/b", "value": true, "variant": "on", "reason": "STATIC",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0}}},
		{"string targeting", "payments/flags/s", `{"context": {"targetingKey": "u", "country": "NL"}}`, 200,
			map[string]any{"key": "payments/flags/s", "value": "hi", "variant": "hi", "reason": "TARGETING_MATCH",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0, "rule": 0.0, "ruleId": "nl"}}},
		{"string default", "payments/flags/s", `{"context": {"country": "DE"}}`, 200,
			map[string]any{"key": "payments/flags/s", "value": "bye", "variant": "bye", "reason": "DEFAULT",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0}}},
		{"int disabled", "payments/flags/i", `{"context": {}}`, 200,
			map[string]any{"key": "payments/flags/i", "value": 1.0, "variant": "one", "reason": "DISABLED",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0}}},
		{"float", "payments/flags/f", `{"context": {}}`, 200,
			map[string]any{"key": "payments/flags/f", "value": 0.5, "variant": "half", "reason": "STATIC",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0}}},
		{"object", "payments/flags/o", `{"context": {}}`, 200,
			map[string]any{"key": "payments/flags/o", "value": map[string]any{"title": "x", "n": 3.0}, "variant": "t", "reason": "STATIC",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0}}},
		// flags.Position("checkout-v2", "user-1") is 64759: past the 50% "on".
		{"split with its position", "payments/flags/checkout-v2", `{"context": {"targetingKey": "user-1"}}`, 200,
			map[string]any{"key": "payments/flags/checkout-v2", "value": false, "variant": "off", "reason": "SPLIT",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0, "position": 64759.0}}},
		{"a rollout without the key", "payments/flags/checkout-v2", `{"context": {"country": "NL"}}`, 200,
			map[string]any{"key": "payments/flags/checkout-v2", "value": false, "variant": "off", "reason": "DEFAULT",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0}}},
		{"extra fields and nested attributes are read past", "payments/flags/b", `{"context": {"targetingKey": "u", "tags": ["a"], "geo": {"c": "NL"}, "n": null}, "x": 1}`, 200,
			map[string]any{"key": "payments/flags/b", "value": true, "variant": "on", "reason": "STATIC",
				"metadata": map[string]any{"config": "payments/flags", "version": 3.0}}},

		{"unknown flag", "payments/flags/nope", `{"context": {}}`, 404,
			map[string]any{"key": "payments/flags/nope", "errorCode": "FLAG_NOT_FOUND", "errorDetails": `flag "nope" is not in payments/flags@3`}},
		{"unknown set", "payments/other/b", `{"context": {}}`, 404,
			map[string]any{"key": "payments/other/b", "errorCode": "FLAG_NOT_FOUND", "errorDetails": "no flag set payments/other here"}},
		{"a bare flag name", "b", `{"context": {}}`, 404,
			map[string]any{"key": "b", "errorCode": "FLAG_NOT_FOUND", "errorDetails": `flag "b": address a flag as <config path>/<flag>, like growth/flags/new-checkout`}},
		// The spec's flagNotFound requires the key, empty or not: without
		// one, the Node provider reports GENERAL instead.
		{"no key", "", `{"context": {}}`, 404,
			map[string]any{"key": "", "errorCode": "FLAG_NOT_FOUND", "errorDetails": `flag "": address a flag as <config path>/<flag>, like growth/flags/new-checkout`}},
		{"malformed body", "payments/flags/b", `{"context": {`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "PARSE_ERROR", "errorDetails": "request body: unexpected EOF"}},
		{"empty body", "payments/flags/b", ``, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "PARSE_ERROR", "errorDetails": `empty request body: want {"context": {...}}`}},
		{"not an object", "payments/flags/b", `[1]`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "PARSE_ERROR", "errorDetails": `request body must be a JSON object, not array: want {"context": {...}}`}},
		{"two objects", "payments/flags/b", `{"context": {}} {}`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "PARSE_ERROR", "errorDetails": "request body: data after the request object"}},
		{"oversize body", "payments/flags/b", `{"context": {"a": "` + strings.Repeat("x", 2<<10) + `"}}`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "PARSE_ERROR", "errorDetails": "request body over 1024 bytes"}},
		{"no context", "payments/flags/b", `{}`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "INVALID_CONTEXT", "errorDetails": `the request has no context: want {"context": {...}}`}},
		{"null context", "payments/flags/b", `{"context": null}`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "INVALID_CONTEXT", "errorDetails": `the request has no context: want {"context": {...}}`}},
		{"context not an object", "payments/flags/b", `{"context": "user-1"}`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "INVALID_CONTEXT", "errorDetails": "context must be a JSON object, not string"}},
		{"targetingKey a number", "payments/flags/b", `{"context": {"targetingKey": 42}}`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "INVALID_CONTEXT", "errorDetails": "targetingKey must be a string, not a number"}},
		{"targetingKey an object", "payments/flags/b", `{"context": {"targetingKey": {"id": 1}}}`, 400,
			map[string]any{"key": "payments/flags/b", "errorCode": "INVALID_CONTEXT", "errorDetails": "targetingKey must be a string, not an object"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, flag+c.key, c.body)
			if r.code != c.code || !reflect.DeepEqual(r.body, c.want) {
				t.Errorf("POST %s %.60s:\n got %d %v\nwant %d %v", c.key, c.body, r.code, r.body, c.code, c.want)
			}
		})
	}
	t.Run("GET is not an evaluation", func(t *testing.T) {
		resp, err := http.Get(flag + "payments/flags/b")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET: %d, want 405", resp.StatusCode)
		}
	})
}

// TestBulk: every flag of every set, keyed by config path and flag, with
// the sets' versions as metadata; the ETag is answered with 304 until the
// content for this context changes, and the body errors are the spec's
// bulkEvaluationFailure (no key).
func TestBulk(t *testing.T) {
	st := newStore(t)
	srv := newServer(t, st, nil)
	bulk := srv.URL + "/ofrep/v1/evaluate/flags"
	r := post(t, bulk, `{"context": {"targetingKey": "user-1", "country": "NL"}}`)
	if r.code != 200 {
		t.Fatalf("bulk: %d %s", r.code, r.raw)
	}
	var keys []string
	for _, f := range r.body["flags"].([]any) {
		keys = append(keys, f.(map[string]any)["key"].(string))
	}
	want := []string{"growth/flags/b", "growth/flags/checkout-v2", "growth/flags/f", "growth/flags/i", "growth/flags/o", "growth/flags/s",
		"payments/flags/b", "payments/flags/checkout-v2", "payments/flags/f", "payments/flags/i", "payments/flags/o", "payments/flags/s"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("bulk keys %v, want %v", keys, want)
	}
	if md := r.body["metadata"]; !reflect.DeepEqual(md, map[string]any{"growth/flags": 3.0, "payments/flags": 3.0}) {
		t.Errorf("bulk metadata %v", md)
	}
	etag := r.header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("ETag %q: want a quoted strong tag", etag)
	}

	t.Run("same content: 304", func(t *testing.T) {
		r := post(t, bulk, `{"context": {"country": "NL", "targetingKey": "user-1"}}`, "If-None-Match", etag)
		if r.code != http.StatusNotModified || r.raw != "" || r.header.Get("ETag") != etag {
			t.Errorf("got %d %q ETag %q, want 304, no body, the same ETag", r.code, r.raw, r.header.Get("ETag"))
		}
	})
	t.Run("weak and listed tags match", func(t *testing.T) {
		r := post(t, bulk, `{"context": {"country": "NL", "targetingKey": "user-1"}}`, "If-None-Match", `"x", W/`+etag)
		if r.code != http.StatusNotModified {
			t.Errorf("got %d, want 304", r.code)
		}
	})
	t.Run("another context: 200", func(t *testing.T) {
		r := post(t, bulk, `{"context": {"targetingKey": "user-2"}}`, "If-None-Match", etag)
		if r.code != 200 || r.header.Get("ETag") == etag {
			t.Errorf("got %d ETag %q, want 200 and another ETag", r.code, r.header.Get("ETag"))
		}
	})
	t.Run("a new version: 200", func(t *testing.T) {
		if _, err := st.Apply("growth/flags", 4, []byte(strings.Replace(testSet, `"hi": "hi"`, `"hi": "hello"`, 1)), false); err != nil {
			t.Fatal(err)
		}
		r := post(t, bulk, `{"context": {"targetingKey": "user-1", "country": "NL"}}`, "If-None-Match", etag)
		if r.code != 200 || r.body["metadata"].(map[string]any)["growth/flags"] != 4.0 {
			t.Errorf("got %d %v, want 200 with growth/flags@4", r.code, r.body["metadata"])
		}
	})
	t.Run("a deleted set leaves", func(t *testing.T) {
		st.Apply("growth/flags", 5, nil, true)
		r := post(t, bulk, `{"context": {}}`)
		if r.code != 200 || len(r.body["flags"].([]any)) != 6 {
			t.Errorf("got %d with %d flags, want 200 with payments' 6", r.code, len(r.body["flags"].([]any)))
		}
	})
	for _, c := range []struct {
		name, body, code string
	}{
		{"malformed", `{"context": `, "PARSE_ERROR"},
		{"oversize", `{"context": {"a": "` + strings.Repeat("x", 2<<10) + `"}}`, "PARSE_ERROR"},
		{"no context", `{"ctx": {}}`, "INVALID_CONTEXT"},
		{"context an array", `{"context": []}`, "INVALID_CONTEXT"},
		{"targetingKey a bool", `{"context": {"targetingKey": true}}`, "INVALID_CONTEXT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, bulk, c.body)
			if r.code != 400 || r.body["errorCode"] != c.code || r.body["key"] != nil || r.header.Get("ETag") != "" {
				t.Errorf("got %d %v ETag %q, want 400 %s without a key or ETag", r.code, r.body, r.header.Get("ETag"), c.code)
			}
		})
	}
}

// TestTokens plays a caller holding growth's token: it reads growth's
// flags, gets 403 for any payments key (whether the flag exists or not)
// and none of payments' flags in bulk; without a token, or with a wrong
// one, 401. The store is unchanged by it all, and payments' own token
// still reads payments.
func TestTokens(t *testing.T) {
	tokens, err := ofrep.ParseTokens("tokens", []byte("# who reads what\npayments "+tokenA+"\n\ngrowth "+tokenB+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	srv := newServer(t, st, tokens)
	flag, bulk := srv.URL+"/ofrep/v1/evaluate/flags/", srv.URL+"/ofrep/v1/evaluate/flags"
	ctx := `{"context": {"targetingKey": "user-1"}}`
	for _, c := range []struct {
		name, url string
		header    []string
		code      int
	}{
		{"own namespace, bearer", flag + "growth/flags/b", []string{"Authorization", "Bearer " + tokenB}, 200},
		{"own namespace, X-API-Key", flag + "growth/flags/b", []string{"X-API-Key", tokenB}, 200},
		{"own namespace, lower-case scheme", flag + "growth/flags/b", []string{"Authorization", "bearer " + tokenB}, 200},
		{"other namespace's flag", flag + "payments/flags/b", []string{"Authorization", "Bearer " + tokenB}, 403},
		{"other namespace's missing flag: 403 too", flag + "payments/flags/nope", []string{"Authorization", "Bearer " + tokenB}, 403},
		{"other namespace's missing set: 403 too", flag + "payments/nothing/nope", []string{"Authorization", "Bearer " + tokenB}, 403},
		{"no token", flag + "growth/flags/b", nil, 401},
		{"no token, bulk", bulk, nil, 401},
		{"wrong token", flag + "growth/flags/b", []string{"Authorization", "Bearer " + strings.Repeat("c", 48)}, 401},
		{"a token's prefix", flag + "growth/flags/b", []string{"Authorization", "Bearer " + tokenB[:40]}, 401},
		{"a token as Basic", flag + "growth/flags/b", []string{"Authorization", "Basic " + tokenB}, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := post(t, c.url, ctx, c.header...)
			if r.code != c.code {
				t.Errorf("got %d %s, want %d", r.code, r.raw, c.code)
			}
			if c.code == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			// A single evaluation's error carries its key, as the
			// providers expect; a bulk one none.
			key, hasKey := r.body["key"]
			if single := strings.HasPrefix(c.url, flag); c.code != 200 && (hasKey != single || single && !strings.HasSuffix(c.url, "/"+fmt.Sprint(key))) {
				t.Errorf("error body %s: key %v (present %v), want it present on a single evaluation only", r.raw, key, hasKey)
			}
		})
	}
	t.Run("bulk reads only its namespace", func(t *testing.T) {
		r := post(t, bulk, ctx, "Authorization", "Bearer "+tokenB)
		if r.code != 200 {
			t.Fatalf("got %d %s", r.code, r.raw)
		}
		for _, f := range r.body["flags"].([]any) {
			if k := f.(map[string]any)["key"].(string); !strings.HasPrefix(k, "growth/") {
				t.Errorf("growth's token read %s", k)
			}
		}
		if md := r.body["metadata"].(map[string]any); len(md) != 1 || md["growth/flags"] != 3.0 {
			t.Errorf("metadata %v names more than growth/flags", md)
		}
	})
	if v, _ := st.Version("payments/flags"); v != 3 {
		t.Errorf("payments/flags at %d after the attack, want 3", v)
	}
	if r := post(t, flag+"payments/flags/b", ctx, "Authorization", "Bearer "+tokenA); r.code != 200 || r.body["value"] != true {
		t.Errorf("payments' own token: %d %s", r.code, r.raw)
	}
}

func TestParseTokens(t *testing.T) {
	for _, c := range []struct{ name, file, err string }{
		{"one field", "payments\n", "tokens:1: want NAMESPACE TOKEN"},
		{"bad namespace", "Payments " + tokenA, `tokens:1: namespace "Payments" must match`},
		{"short token", "payments abc", "tokens:1: token shorter than 32"},
		{"empty", "# nothing\n", "tokens: no token"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ofrep.ParseTokens("tokens", []byte(c.file))
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("got %v, want an error containing %q", err, c.err)
			}
		})
	}
}

// TestStoreApply: a config that is not a flag set is left out; a flag set
// that does not compile is refused and the store keeps its version.
func TestStoreApply(t *testing.T) {
	st := newStore(t)
	if ok, err := st.Apply("payments/checkout", 1, []byte(`{"currency": "EUR"}`), false); ok || err != nil {
		t.Errorf("a plain config: %v %v, want false, nil", ok, err)
	}
	bad := strings.Replace(testSet, `"offVariant": "off", "defaultVariant": "off", "salt": "b"`, `"offVariant": "gone", "defaultVariant": "off", "salt": "b"`, 1)
	if ok, err := st.Apply("payments/flags", 4, []byte(bad), false); !ok || err == nil {
		t.Errorf("an invalid set: %v %v, want true and an error", ok, err)
	}
	if v, _ := st.Version("payments/flags"); v != 3 {
		t.Errorf("version %d after an invalid set, want 3 kept", v)
	}
	// Evaluable says beforehand what Apply would refuse.
	for _, c := range []struct {
		content string
		want    error
	}{
		{testSet, nil}, {`{"currency": "EUR"}`, nil}, {`not JSON`, nil},
		{bad, flags.ErrInvalid}, {`{"schema": "cuecast.flags/v2", "flags": {}}`, flags.ErrUnsupportedSchema},
	} {
		if err := ofrep.Evaluable([]byte(c.content)); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Evaluable(%.40s): %v, want %v", c.content, err, c.want)
		}
	}
}

// TestStoreApplyNoLongerASet: a config whose new version is not a flag set
// (its namespace's schema removed, say) no longer has its old set served,
// as a deleted config has not; Apply says so with ErrNotFlagSet, for the
// caller to log. A config that never was a set is no error.
func TestStoreApplyNoLongerASet(t *testing.T) {
	st := newStore(t)
	srv := newServer(t, st, nil)
	_, err := st.Apply("payments/flags", 4, []byte(`{"flags": {}}`), false)
	if !errors.Is(err, ofrep.ErrNotFlagSet) {
		t.Errorf("payments/flags@4 without a schema: %v, want ErrNotFlagSet", err)
	}
	if v, ok := st.Version("payments/flags"); ok {
		t.Errorf("payments/flags@%d still held after a version that is not a flag set", v)
	}
	if r := post(t, srv.URL+"/ofrep/v1/evaluate/flags/payments/flags/b", `{"context": {}}`); r.code != 404 || r.body["errorCode"] != "FLAG_NOT_FOUND" {
		t.Errorf("payments/flags/b: %d %s, want 404 FLAG_NOT_FOUND", r.code, r.raw)
	}
	r := post(t, srv.URL+"/ofrep/v1/evaluate/flags", `{"context": {}}`)
	if md := r.body["metadata"]; r.code != 200 || !reflect.DeepEqual(md, map[string]any{"growth/flags": 3.0}) {
		t.Errorf("bulk: %d metadata %v, want growth/flags@3 alone", r.code, md)
	}
	if ok, err := st.Apply("payments/flags", 5, []byte(`{"currency": "EUR"}`), false); ok || err != nil {
		t.Errorf("again not a set, with no set held: %v %v, want false, nil", ok, err)
	}
}

// vectors is testdata/flags/v1.json (its README.md describes it).
type vectors struct {
	Sets  map[string]json.RawMessage `json:"sets"`
	Cases []struct {
		Name    string          `json:"name"`
		Set     string          `json:"set"`
		Flag    string          `json:"flag"`
		Type    string          `json:"type"`
		Context json.RawMessage `json:"context"`
		Want    struct {
			Value     any    `json:"value"`
			Variant   string `json:"variant"`
			Reason    string `json:"reason"`
			ErrorCode string `json:"errorCode"`
			Rule      *int   `json:"rule"`
			Position  *int   `json:"position"`
		} `json:"want"`
	} `json:"cases"`
}

// loadVectors reads the shared vectors and a store holding each of their
// sets as config vectors/NAME, version 1.
func loadVectors(t *testing.T) (vectors, *ofrep.Store) {
	t.Helper()
	b, err := os.ReadFile("../../testdata/flags/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	st := ofrep.NewStore()
	for name, set := range v.Sets {
		if _, err := st.Apply("vectors/"+name, 1, set, false); err != nil {
			t.Fatal(err)
		}
	}
	return v, st
}

// TestVectors runs testdata/flags/v1.json, the vectors every SDK runs,
// through the single-flag endpoint: the same value, variant, reason, rule
// and position as in-process. OFREP's context has a string targetingKey,
// so the cases with another one are INVALID_CONTEXT here; it carries no
// type, so a typed case's mismatch is the value's JSON type, as providers
// check it.
func TestVectors(t *testing.T) {
	v, st := loadVectors(t)
	srv := newServer(t, st, nil)
	jsonType := map[string]string{"bool": "bool", "string": "string", "int": "float64", "float": "float64", "object": "map[string]interface {}"}
	for i, c := range v.Cases {
		ctx := c.Context
		if len(ctx) == 0 || string(ctx) == "null" {
			ctx = json.RawMessage(`{}`)
		}
		var m map[string]any
		json.Unmarshal(ctx, &m)
		r := post(t, srv.URL+"/ofrep/v1/evaluate/flags/vectors/"+c.Set+"/"+c.Flag, `{"context": `+string(ctx)+`}`)
		if tk, ok := m["targetingKey"]; ok {
			if _, isString := tk.(string); !isString {
				if r.code != 400 || r.body["errorCode"] != "INVALID_CONTEXT" {
					t.Errorf("case %d %q: targetingKey %v: %d %v, want 400 INVALID_CONTEXT", i, c.Name, tk, r.code, r.body)
				}
				continue
			}
		}
		switch c.Want.ErrorCode {
		case "FLAG_NOT_FOUND":
			if r.code != 404 || r.body["errorCode"] != "FLAG_NOT_FOUND" {
				t.Errorf("case %d %q: %d %v, want 404 FLAG_NOT_FOUND", i, c.Name, r.code, r.body)
			}
			continue
		case "TYPE_MISMATCH":
			if (c.Type == "int" || c.Type == "float") && r.code == 200 && isFloat(r.raw) != (c.Type == "float") {
				continue // an int written without a fraction, a float with one
			}
			if r.code != 200 || reflect.TypeOf(r.body["value"]).String() == jsonType[c.Type] {
				t.Errorf("case %d %q: %d %v: want 200 with a value that is not a %s", i, c.Name, r.code, r.body, c.Type)
			}
			continue
		}
		md, _ := r.body["metadata"].(map[string]any)
		if r.code != 200 || !reflect.DeepEqual(r.body["value"], c.Want.Value) || r.body["variant"] != c.Want.Variant ||
			r.body["reason"] != c.Want.Reason || !sameInt(md["rule"], c.Want.Rule) || !sameInt(md["position"], c.Want.Position) {
			t.Errorf("case %d %q: %d %s\nwant %+v", i, c.Name, r.code, r.raw, c.Want)
		}
	}
}

// sameInt compares a metadata number with a vector's optional int (absent
// from metadata when the vector says -1 or nothing).
func sameInt(got any, want *int) bool {
	if want == nil || *want < 0 {
		return got == nil
	}
	f, ok := got.(float64)
	return ok && f == float64(*want)
}

// isFloat reports whether a response's value is written as a float (with
// a fraction or an exponent), as a float flag's always is.
func isFloat(raw string) bool {
	var v struct{ Value json.RawMessage }
	json.Unmarshal([]byte(raw), &v)
	return strings.ContainsAny(string(v.Value), ".eE")
}

// TestStoreNotReady: a store not yet filled answers every evaluation with
// 500 GENERAL "not ready", in the shape the providers read (a key on a
// single evaluation), never a FLAG_NOT_FOUND or an empty bulk that a
// caller would take for the truth; tokens are still checked first. Once
// ready, it evaluates.
func TestStoreNotReady(t *testing.T) {
	tokens, err := ofrep.ParseTokens("tokens", []byte("growth "+tokenB+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := ofrep.NewStore()
	st.SetNotReady("no fleet sample yet")
	srv := newServer(t, st, tokens)
	flag, bulk := srv.URL+"/ofrep/v1/evaluate/flags/growth/flags/b", srv.URL+"/ofrep/v1/evaluate/flags"
	bearer := []string{"Authorization", "Bearer " + tokenB}
	r := post(t, flag, `{"context": {}}`, bearer...)
	want := map[string]any{"key": "growth/flags/b", "errorCode": "GENERAL", "errorDetails": "not ready: no fleet sample yet"}
	if r.code != 500 || !reflect.DeepEqual(r.body, want) {
		t.Errorf("single: %d %s, want 500 %v", r.code, r.raw, want)
	}
	r = post(t, bulk, `{"context": {}}`, bearer...)
	delete(want, "key")
	if r.code != 500 || !reflect.DeepEqual(r.body, want) || r.header.Get("ETag") != "" {
		t.Errorf("bulk: %d %s ETag %q, want 500 %v without an ETag", r.code, r.raw, r.header.Get("ETag"), want)
	}
	if r := post(t, flag, `{"context": {}}`); r.code != 401 {
		t.Errorf("no token: %d, want 401", r.code)
	}

	if _, err := st.Apply("growth/flags", 1, []byte(testSet), false); err != nil {
		t.Fatal(err)
	}
	if r := post(t, flag, `{"context": {}}`, bearer...); r.code != 500 {
		t.Errorf("filled, not yet ready: %d %s, want 500", r.code, r.raw)
	}
	st.SetReady()
	if r := post(t, flag, `{"context": {}}`, bearer...); r.code != 200 || r.body["value"] != true {
		t.Errorf("ready: %d %s, want 200 true", r.code, r.raw)
	}
}

// TestStorePending: a config marked pending answers a single evaluation
// of its keys with 500 GENERAL "not ready: waiting for the first version
// of <config>", not FLAG_NOT_FOUND, while a config beside it that has come
// answers; a bulk evaluation is that 500, naming the configs still to
// come, for a caller who may read one of their namespaces, and evaluates
// for a caller who may not. Any version ends the wait: a flag set, one
// that is not a flag set, a deletion, one that does not compile.
func TestStorePending(t *testing.T) {
	tokens, err := ofrep.ParseTokens("tokens", []byte("payments "+tokenA+"\ngrowth "+tokenB+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	st := ofrep.NewStore()
	st.Pending("growth/flags", "growth/flagz", "payments/flags", "payments/checkout", "payments/gone", "payments/broken")
	srv := newServer(t, st, tokens)
	single := func(key string) string { return srv.URL + "/ofrep/v1/evaluate/flags/" + key }
	bulk := srv.URL + "/ofrep/v1/evaluate/flags"
	growth, payments := []string{"Authorization", "Bearer " + tokenB}, []string{"Authorization", "Bearer " + tokenA}
	ctx := `{"context": {}}`
	notReady := func(key, configs string) map[string]any {
		m := map[string]any{"errorCode": "GENERAL", "errorDetails": "not ready: waiting for the first version of " + configs}
		if key != "" {
			m["key"] = key
		}
		return m
	}

	if r := post(t, single("growth/flags/b"), ctx, growth...); r.code != 500 || !reflect.DeepEqual(r.body, notReady("growth/flags/b", "growth/flags")) {
		t.Errorf("a key of a pending config: %d %s, want 500 not ready", r.code, r.raw)
	}
	if r := post(t, single("growth/flags/b"), ctx); r.code != 401 {
		t.Errorf("a pending config without a token: %d %s, want 401 (tokens first)", r.code, r.raw)
	}
	if r := post(t, single("growth/flags/b"), ctx, payments...); r.code != 403 {
		t.Errorf("a pending config, another namespace's token: %d %s, want 403", r.code, r.raw)
	}

	if _, err := st.Apply("growth/flags", 1, []byte(testSet), false); err != nil {
		t.Fatal(err)
	}
	if r := post(t, single("growth/flags/b"), ctx, growth...); r.code != 200 || r.body["value"] != true {
		t.Errorf("growth/flags come, growth/flagz pending: %d %s, want 200 true", r.code, r.raw)
	}
	if r := post(t, single("growth/flags/nope"), ctx, growth...); r.code != 404 || r.body["errorCode"] != ofrep.CodeFlagNotFound {
		t.Errorf("an unknown flag of a config that has come: %d %s, want 404", r.code, r.raw)
	}
	if r := post(t, single("growth/flagz/b"), ctx, growth...); r.code != 500 || !reflect.DeepEqual(r.body, notReady("growth/flagz/b", "growth/flagz")) {
		t.Errorf("a key of the config still pending beside it: %d %s, want 500 naming growth/flagz", r.code, r.raw)
	}
	if r := post(t, single("growth/other/b"), ctx, growth...); r.code != 404 || r.body["errorCode"] != ofrep.CodeFlagNotFound {
		t.Errorf("a config never marked pending: %d %s, want 404", r.code, r.raw)
	}
	r := post(t, bulk, ctx, growth...)
	if r.code != 500 || !reflect.DeepEqual(r.body, notReady("", "growth/flagz")) || r.header.Get("ETag") != "" {
		t.Errorf("bulk, growth's token, growth/flagz pending: %d %s ETag %q, want 500 naming growth/flagz only", r.code, r.raw, r.header.Get("ETag"))
	}
	r = post(t, bulk, ctx, payments...)
	if r.code != 500 || !reflect.DeepEqual(r.body, notReady("", "payments/broken, payments/checkout, payments/flags, payments/gone")) {
		t.Errorf("bulk, payments' token: %d %s, want 500 naming payments' pending configs", r.code, r.raw)
	}

	// Every kind of version ends a config's wait.
	if _, err := st.Apply("growth/flagz", 1, []byte(`{"schema": "cuecast.flags/v1"`), false); err != nil {
		t.Fatal(err) // not JSON: not a flag set
	}
	if r := post(t, bulk, ctx, growth...); r.code != 200 || len(r.body["flags"].([]any)) != 6 {
		t.Errorf("bulk, growth's token, growth's configs come: %d %s, want 200 with growth/flags' 6 flags", r.code, r.raw)
	}
	if r := post(t, single("growth/flagz/b"), ctx, growth...); r.code != 404 {
		t.Errorf("a config come that is not a flag set: %d %s, want 404", r.code, r.raw)
	}
	if _, err := st.Apply("payments/flags", 2, []byte(testSet), false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply("payments/checkout", 4, []byte(`{"currency": "EUR"}`), false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply("payments/gone", 5, nil, true); err != nil {
		t.Fatal(err)
	}
	if r := post(t, bulk, ctx, payments...); r.code != 500 || !reflect.DeepEqual(r.body, notReady("", "payments/broken")) {
		t.Errorf("bulk, payments/broken still pending: %d %s", r.code, r.raw)
	}
	if _, err := st.Apply("payments/broken", 6, []byte(`{"schema": "cuecast.flags/v1", "flags": {"x": {"type": "bool"}}}`), false); err == nil {
		t.Fatal("payments/broken compiled; the test needs a flag set that does not")
	}
	if r := post(t, single("payments/broken/x"), ctx, payments...); r.code != 404 {
		t.Errorf("a config come whose flag set does not compile: %d %s, want 404 (no set served)", r.code, r.raw)
	}
	r = post(t, bulk, ctx, payments...)
	if r.code != 200 || len(r.body["flags"].([]any)) != 6 || !reflect.DeepEqual(r.body["metadata"], map[string]any{"payments/flags": 2.0}) {
		t.Errorf("bulk, payments' configs all come: %d %s, want 200 with payments/flags@2 alone", r.code, r.raw)
	}
}

// TestStorePendingAndNotReady: SetNotReady, serve's, answers before a
// pending config and outlasts it; Pending leaves it as it was.
func TestStorePendingAndNotReady(t *testing.T) {
	st := ofrep.NewStore()
	st.SetNotReady("no fleet sample yet")
	st.Pending("growth/flags")
	srv := newServer(t, st, nil)
	flag := srv.URL + "/ofrep/v1/evaluate/flags/growth/flags/b"
	if r := post(t, flag, `{"context": {}}`); r.code != 500 || r.body["errorDetails"] != "not ready: no fleet sample yet" {
		t.Errorf("not ready and pending: %d %s, want SetNotReady's 500", r.code, r.raw)
	}
	if _, err := st.Apply("growth/flags", 1, []byte(testSet), false); err != nil {
		t.Fatal(err)
	}
	if r := post(t, flag, `{"context": {}}`); r.code != 500 || r.body["errorDetails"] != "not ready: no fleet sample yet" {
		t.Errorf("not ready, no longer pending: %d %s, want SetNotReady's 500", r.code, r.raw)
	}
	st.SetReady()
	if r := post(t, flag, `{"context": {}}`); r.code != 200 {
		t.Errorf("ready: %d %s, want 200", r.code, r.raw)
	}
}
