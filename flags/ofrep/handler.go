package ofrep

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cuecast/cuecast/flags"
)

// The spec's error codes (evaluationFailure, flagNotFound).
const (
	CodeParseError          = "PARSE_ERROR"
	CodeTargetingKeyMissing = "TARGETING_KEY_MISSING"
	CodeInvalidContext      = "INVALID_CONTEXT"
	CodeGeneral             = "GENERAL"
	CodeFlagNotFound        = "FLAG_NOT_FOUND"
)

// DefaultMaxBody is Options.MaxBody's default: far more than any context.
const DefaultMaxBody = 64 << 10

// Options configures a Handler.
type Options struct {
	// Store holds the flag sets served. Required.
	Store *Store
	// Tokens, when set, are required on every request; nil serves every
	// set to anyone who can connect (agent on loopback or a Unix socket).
	Tokens *Tokens
	// MaxBody bounds a request body; larger is PARSE_ERROR. Default
	// DefaultMaxBody.
	MaxBody int64
}

// Handler serves OFREP's two endpoints under /ofrep/v1/.
type Handler struct {
	o   Options
	mux *http.ServeMux
}

var _ http.Handler = (*Handler)(nil)

// New returns the handler; it fails only without a Store.
func New(o Options) (*Handler, error) {
	if o.Store == nil {
		return nil, errors.New("new OFREP handler: a Store is required")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	h.mux.HandleFunc("POST /ofrep/v1/evaluate/flags/{key...}", h.single)
	h.mux.HandleFunc("POST /ofrep/v1/evaluate/flags", h.bulk)
	return h, nil
}

// ServeHTTP serves the OFREP endpoints; other paths are 404, other
// methods 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// success is the spec's evaluationSuccess.
type success struct {
	Key      string       `json:"key"`
	Value    any          `json:"value"`
	Reason   flags.Reason `json:"reason"`
	Variant  string       `json:"variant,omitempty"`
	Metadata metadata     `json:"metadata"`
}

// metadata is a flag's flagMetadata. A struct, not a map: encoding a map
// boxes each number and sorts the keys on every response. The fields are
// in the order those sorted keys came in, so the bytes are the same
// (TestWireGolden).
type metadata struct {
	Config   string `json:"config"`
	Position optInt `json:"position,omitzero"`
	Rule     optInt `json:"rule,omitzero"`
	RuleID   string `json:"ruleId,omitempty"`
	Version  uint64 `json:"version"`
}

// optInt is a number that is absent when negative (the evaluator's -1 for
// no rule and no rollout); 0 is a rule index and a position like any other.
type optInt int

func (n optInt) IsZero() bool { return n < 0 }

// failure is the spec's evaluationFailure and flagNotFound: a single
// evaluation's error, whose key the spec requires (and the providers
// check), even when it is empty.
type failure struct {
	Key          string `json:"key"`
	ErrorCode    string `json:"errorCode"`
	ErrorDetails string `json:"errorDetails,omitempty"`
}

// bulkFailure is the spec's bulkEvaluationFailure: no key.
type bulkFailure struct {
	ErrorCode    string `json:"errorCode"`
	ErrorDetails string `json:"errorDetails,omitempty"`
}

// bulkSuccess is the spec's bulkEvaluationSuccess; metadata is each
// set's version by config path.
type bulkSuccess struct {
	Flags    []success         `json:"flags"`
	Metadata map[string]uint64 `json:"metadata"`
}

func (h *Handler) single(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	allowed, ok := h.authenticate(w, r, &key)
	if !ok {
		return
	}
	config, name, addressed := splitKey(key)
	if addressed && allowed != nil && !slices.Contains(allowed, namespaceOf(config)) {
		// From the key alone: a 403 says nothing of whether the flag exists.
		writeError(w, http.StatusForbidden, &key, CodeGeneral, fmt.Sprintf("this token does not read namespace %q", namespaceOf(config)))
		return
	}
	evalCtx, code, err := h.readContext(w, r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, failure{Key: key, ErrorCode: code, ErrorDetails: err.Error()})
		return
	}
	snap := h.o.Store.sets.Load()
	if snap.notReady != "" {
		writeError(w, http.StatusInternalServerError, &key, CodeGeneral, "not ready: "+snap.notReady)
		return
	}
	if addressed && slices.Contains(snap.pending, config) {
		writeError(w, http.StatusInternalServerError, &key, CodeGeneral, waitingFor([]string{config}))
		return
	}
	if !addressed {
		writeJSON(w, http.StatusNotFound, failure{Key: key, ErrorCode: CodeFlagNotFound,
			ErrorDetails: fmt.Sprintf("flag %q: address a flag as <config path>/<flag>, like growth/flags/new-checkout", key)})
		return
	}
	st := snap.sets[config]
	if st == nil {
		writeJSON(w, http.StatusNotFound, failure{Key: key, ErrorCode: CodeFlagNotFound,
			ErrorDetails: fmt.Sprintf("no flag set %s here", config)})
		return
	}
	if _, ok := st.ev.Type(name); !ok {
		writeJSON(w, http.StatusNotFound, failure{Key: key, ErrorCode: CodeFlagNotFound,
			ErrorDetails: fmt.Sprintf("flag %q is not in %s@%d", name, config, st.version)})
		return
	}
	writeJSON(w, http.StatusOK, st.evaluate(key, name, evalCtx))
}

func (h *Handler) bulk(w http.ResponseWriter, r *http.Request) {
	allowed, ok := h.authenticate(w, r, nil)
	if !ok {
		return
	}
	evalCtx, code, err := h.readContext(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, nil, code, err.Error())
		return
	}
	snap := h.o.Store.sets.Load()
	if snap.notReady != "" {
		writeError(w, http.StatusInternalServerError, nil, CodeGeneral, "not ready: "+snap.notReady)
		return
	}
	// The answer is a cache the provider takes as complete: without a set
	// still to come it would stand for that set's flags not existing.
	var waiting []string
	for _, config := range snap.pending {
		if allowed == nil || slices.Contains(allowed, namespaceOf(config)) {
			waiting = append(waiting, config)
		}
	}
	if waiting != nil {
		writeError(w, http.StatusInternalServerError, nil, CodeGeneral, waitingFor(waiting))
		return
	}
	out := bulkSuccess{Flags: []success{}, Metadata: map[string]uint64{}}
	for _, config := range snap.configs {
		st := snap.sets[config]
		if allowed != nil && !slices.Contains(allowed, st.namespace) {
			continue
		}
		out.Metadata[config] = st.version
		for _, name := range st.keys {
			out.Flags = append(out.Flags, st.evaluate(config+"/"+name, name, evalCtx))
		}
	}
	body, err := json.Marshal(out)
	if err != nil {
		writeError(w, http.StatusInternalServerError, nil, CodeGeneral, err.Error())
		return
	}
	// The ETag is the response's own digest: it changes exactly when what
	// this context gets changes (a new version, another context, another
	// token's namespaces), so a 304 is never stale.
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	w.Header().Set("ETag", etag)
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// waitingFor is the "not ready" details of an evaluation held up by
// configs whose first version has not come (Store.Pending).
func waitingFor(configs []string) string {
	return "not ready: waiting for the first version of " + strings.Join(configs, ", ")
}

// evaluate is one flag's evaluationSuccess. The evaluator's reasons are
// OpenFeature's and pass through unchanged (DEFAULT and
// PREREQUISITE_FAILED too, which the spec's enum omits and every provider
// passes on).
func (st *set) evaluate(key, name string, evalCtx flags.Context) success {
	res := st.ev.Evaluate(name, evalCtx)
	md := metadata{Config: st.config, Version: st.version, Rule: optInt(res.Rule), Position: optInt(res.Position)}
	if res.Rule >= 0 {
		md.RuleID = res.RuleID
	}
	val := res.Value
	if f, ok := val.(float64); ok {
		val = float(f)
	}
	return success{Key: key, Value: val, Reason: res.Reason, Variant: res.Variant, Metadata: md}
}

// float is a float flag's value: always written with a fraction or an
// exponent (2.0, not 2), so that a provider telling integers from floats by
// the JSON number (OFREP's ADR 3) reads a float flag as a float.
type float float64

func (f float) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(float64(f))
	if err == nil && !bytes.ContainsAny(b, ".eE") {
		b = append(b, ".0"...)
	}
	return b, err
}

// authenticate returns the namespaces the request's token reads, nil for
// all when there are no Tokens; it answers 401 and returns false when a
// token is required and none known is given. key is a single evaluation's
// key, nil for a bulk evaluation.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, key *string) ([]string, bool) {
	if h.o.Tokens == nil {
		return nil, true
	}
	tok := r.Header.Get("X-API-Key")
	if a := r.Header.Get("Authorization"); a != "" {
		const prefix = "Bearer "
		if len(a) > len(prefix) && strings.EqualFold(a[:len(prefix)], prefix) {
			tok = a[len(prefix):]
		}
	}
	ns := h.o.Tokens.namespaces(tok)
	if ns == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ofrep"`)
		writeError(w, http.StatusUnauthorized, key, CodeGeneral, "a token is required: Authorization: Bearer <token> or X-API-Key: <token>")
		return nil, false
	}
	return ns, true
}

// readContext decodes the request's evaluation context; on failure it
// returns the spec's error code for it.
func (h *Handler) readContext(w http.ResponseWriter, r *http.Request) (flags.Context, string, error) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	// Numbers stay json.Numbers: an integer buckets as that integer, as
	// `cuecast flags eval --ctx` does (docs/FLAGS.md, "Bucketing").
	dec.UseNumber()
	var req struct {
		Context *map[string]any `json:"context"`
	}
	err := dec.Decode(&req)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("data after the request object")
	}
	if err != nil {
		code, err := readError(err)
		return nil, code, err
	}
	if req.Context == nil {
		return nil, CodeInvalidContext, errors.New("the request has no context: want {\"context\": {...}}")
	}
	c := *req.Context
	if tk, ok := c[flags.DefaultBucketBy]; ok {
		if _, isString := tk.(string); !isString {
			return nil, CodeInvalidContext, fmt.Errorf("targetingKey must be a string, not %s", jsonKind(tk))
		}
	}
	return c, "", nil
}

// readError is the spec's error code for a request body that did not
// decode, and what to tell the caller. Apart from readContext, so that the
// errors.As targets are allocated only for a bad request.
func readError(err error) (string, error) {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return CodeParseError, fmt.Errorf("request body over %d bytes", tooBig.Limit)
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return CodeInvalidContext, fmt.Errorf("context must be a JSON object, not %s", typeErr.Value)
	case errors.As(err, &typeErr):
		// The body itself is not an object: say so in JSON's words, not
		// in the Go type it failed to decode into.
		return CodeParseError, fmt.Errorf("request body must be a JSON object, not %s: want {\"context\": {...}}", typeErr.Value)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return CodeParseError, errors.New("request body not received in time")
	case errors.Is(err, io.EOF):
		return CodeParseError, errors.New("empty request body: want {\"context\": {...}}")
	}
	return CodeParseError, fmt.Errorf("request body: %v", err)
}

// splitKey splits an OFREP key into its config path and flag name.
func splitKey(key string) (config, name string, ok bool) {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 || i == len(key)-1 || !strings.Contains(key[:i], "/") {
		return "", "", false
	}
	return key[:i], key[i+1:], true
}

// etagMatch reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 asks of If-None-Match) or is "*".
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// NotReady answers r, a request to an OFREP path of a server that cannot
// evaluate yet (still starting, its store not filled), with 500 GENERAL
// "not ready: why": the spec's status for a server that cannot evaluate,
// in the body the providers read as an error, so that they return the
// caller's default and say why. Not 503 and Retry-After, which the spec
// does not list and the providers do not read.
func NotReady(w http.ResponseWriter, r *http.Request, why string) {
	Error(w, r, http.StatusInternalServerError, "not ready: "+why)
}

// Error answers r, a request to an OFREP path that a server refuses before
// evaluating, with status and OFREP's error JSON: GENERAL and details,
// with the key of a single evaluation, as the providers expect.
func Error(w http.ResponseWriter, r *http.Request, status int, details string) {
	var key *string
	if k, single := strings.CutPrefix(r.URL.Path, "/ofrep/v1/evaluate/flags/"); single {
		key = &k
	}
	writeError(w, status, key, CodeGeneral, details)
}

// writeError answers an error: the spec's evaluationFailure with the key of
// a single evaluation, bulkEvaluationFailure for a bulk one (key nil). The
// spec gives 401 and 403 no body; they get one too, so that a person
// reading it learns why.
func writeError(w http.ResponseWriter, status int, key *string, code, details string) {
	if key == nil {
		writeJSON(w, status, bulkFailure{ErrorCode: code, ErrorDetails: details})
		return
	}
	writeJSON(w, status, failure{Key: *key, ErrorCode: code, ErrorDetails: details})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(`{"errorDetails":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}
