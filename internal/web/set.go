package web

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/mutator"
)

// Setter is what the HTTP API asks of the mutator (docs/CHANGING.md): the
// same operation as `cuecast set` and `cuecast flags set`.
type Setter interface {
	Set(ctx context.Context, req mutator.Request) (*mutator.Result, error)
	FlagAssignments(ctx context.Context, cfg cuecast.ConfigPath, variant map[string]string, change mutator.FlagChange) (set, expect []mutator.Assignment, err error)
}

var _ Setter = (*mutator.Mutator)(nil)

// Token is an HTTP API token limited to namespaces: its holder may change
// the configs of those namespaces and nothing else. Name is who holds it;
// it becomes the commit's author.
type Token struct {
	Name       string
	Namespaces []string
	// SHA256 is the token's SHA-256: the server never holds the token.
	SHA256 [32]byte
}

// ReadTokens reads a tokens file: one token a line, "NAME NS[,NS…]
// SHA256HEX" (the hex SHA-256 of the token, as `printf %s "$TOKEN" |
// sha256sum` prints it); blank lines and lines starting with # are skipped.
func ReadTokens(r io.Reader) ([]Token, error) {
	var out []Token
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("read tokens: line %d: want NAME NAMESPACES SHA256, got %d fields", n, len(f))
		}
		t := Token{Name: f[0], Namespaces: strings.Split(f[1], ",")}
		for _, ns := range t.Namespaces {
			if err := cuecast.ConfigPath(ns + "/x").Validate(); err != nil || ns == "" {
				return nil, fmt.Errorf("read tokens: line %d: namespace %q is not a namespace's name", n, ns)
			}
		}
		h, err := hex.DecodeString(f[2])
		if err != nil || len(h) != len(t.SHA256) {
			return nil, fmt.Errorf("read tokens: line %d: the third field is not a hex SHA-256 (64 hex digits)", n)
		}
		copy(t.SHA256[:], h)
		if slices.ContainsFunc(out, func(o Token) bool { return o.SHA256 == t.SHA256 || o.Name == t.Name }) {
			return nil, fmt.Errorf("read tokens: line %d: token %s repeats a name or a token", n, t.Name)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	return out, nil
}

// setCaller is who sends a set request: the operator (every namespace) or
// a namespace token's holder.
type setCaller struct {
	name       string
	namespaces []string // nil: every namespace
}

// setCaller authenticates r's bearer token: the operator token, or one of
// Options.Tokens. Every token is compared, in constant time, whichever
// matches.
func (s *Server) setCaller(r *http.Request) (setCaller, bool) {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return setCaller{}, false
	}
	got := sha256.Sum256([]byte(h[len(prefix):]))
	var c setCaller
	found := false
	if s.o.OperatorToken != "" && subtle.ConstantTimeCompare(got[:], s.token[:]) == 1 {
		c, found = setCaller{name: "operator"}, true
	}
	for _, t := range s.o.Tokens {
		if subtle.ConstantTimeCompare(got[:], t.SHA256[:]) == 1 {
			c, found = setCaller{name: t.Name, namespaces: t.Namespaces}, true
		}
	}
	return c, found
}

// outside returns a *mutator.PolicyError for the first of cfgs outside
// c's namespaces: a quick answer for the plain case, before anything is
// read; the mutator checks again what the change edits and whose output it
// changes.
func (c setCaller) outside(cfgs []cuecast.ConfigPath) error {
	if c.namespaces == nil {
		return nil
	}
	for _, cfg := range cfgs {
		if !slices.Contains(c.namespaces, cfg.Namespace()) {
			return &mutator.PolicyError{Namespace: cfg.Namespace(), Config: cfg, Rule: "namespace",
				Reason: fmt.Sprintf("token %s may change namespaces %s only", c.name, strings.Join(c.namespaces, ", "))}
		}
	}
	return nil
}

// setBody is the part of a request both endpoints share.
type setBody struct {
	Variant map[string]string    `json:"variant,omitempty"`
	Expect  []mutator.Assignment `json:"expect,omitempty"`
	Reason  string               `json:"reason"`
	Mode    mutator.Mode         `json:"mode"`
	Branch  string               `json:"branch,omitempty"`
	DryRun  bool                 `json:"dry_run,omitempty"`
	// Actor is who the caller says is asking, recorded beside the token's
	// name (which is what vouches for it).
	Actor string `json:"actor,omitempty"`
}

// setRequest is the body of POST /api/set: `cuecast set`.
type setRequest struct {
	setBody
	Configs []cuecast.ConfigPath `json:"configs"`
	Set     []mutator.Assignment `json:"set"`
	At      string               `json:"at,omitempty"`
}

// flagSetRequest is the body of POST /api/flags/set: `cuecast flags set`.
type flagSetRequest struct {
	setBody
	Config  cuecast.ConfigPath `json:"config"`
	Flag    string             `json:"flag"`
	Enable  bool               `json:"enable,omitempty"`
	Disable bool               `json:"disable,omitempty"`
	Rollout *float64           `json:"rollout,omitempty"`
	Shares  map[string]float64 `json:"shares,omitempty"`
	Rule    string             `json:"rule,omitempty"`
}

// setEnabled: the API needs a mutator and some token to accept.
func (s *Server) setEnabled() bool {
	return s.o.Mutator != nil && (s.o.OperatorToken != "" || len(s.o.Tokens) > 0)
}

// apiSet is POST /api/set.
func (s *Server) apiSet(w http.ResponseWriter, r *http.Request) {
	var body setRequest
	c, ok := s.setPreamble(w, r, &body)
	if !ok {
		return
	}
	s.doSet(w, r, c, mutator.Request{Configs: body.Configs, Set: body.Set, At: body.At}, body.setBody)
}

// apiFlagSet is POST /api/flags/set: the assignments are read from the
// flag as the head has it, with the values read as expectations, so a
// change made in between is a conflict rather than overwritten.
func (s *Server) apiFlagSet(w http.ResponseWriter, r *http.Request) {
	var body flagSetRequest
	c, ok := s.setPreamble(w, r, &body)
	if !ok {
		return
	}
	if err := body.Config.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "config: "+err.Error())
		return
	}
	if err := c.outside([]cuecast.ConfigPath{body.Config}); err != nil {
		s.setError(w, r, c, err)
		return
	}
	change := mutator.FlagChange{Flag: body.Flag, Enable: body.Enable, Disable: body.Disable, Rollout: body.Rollout, Shares: body.Shares, Rule: body.Rule}
	set, expect, err := s.o.Mutator.FlagAssignments(r.Context(), body.Config, body.Variant, change)
	if err != nil {
		s.setError(w, r, c, err)
		return
	}
	body.Expect = append(body.Expect, expect...)
	s.doSet(w, r, c, mutator.Request{Configs: []cuecast.ConfigPath{body.Config}, Set: set, Tool: "cuecast serve: flags set", Subject: change.Subject(body.Config)}, body.setBody)
}

// setPreamble authenticates r and decodes its body into v; it answers and
// returns false when either fails.
func (s *Server) setPreamble(w http.ResponseWriter, r *http.Request, v any) (setCaller, bool) {
	c, ok := s.setCaller(r)
	if !ok || !s.setEnabled() {
		s.log.Warn("set refused: no or wrong bearer token", "path", r.URL.Path, "remote", r.RemoteAddr, "enabled", s.setEnabled())
		w.Header().Set("WWW-Authenticate", `Bearer realm="cuecast set"`)
		msg := "changes need the operator token or a namespace token as a bearer token"
		switch {
		case s.setEnabled():
		case s.o.OperatorToken != "" || len(s.o.Tokens) > 0:
			// serve gives no mutator where its --repo is a URL.
			msg = "changes through the API are disabled: this serve has no work tree to commit to (its --repo is a URL); serve a local clone of the repository to take changes (docs/CHANGING.md)"
		default:
			msg = "changes through the API are disabled: serve needs --http with --operator-token or --api-tokens"
		}
		writeError(w, http.StatusUnauthorized, msg)
		return c, false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return c, false
	}
	// One object, as strictly as its fields: a second one after it
	// would be ignored, and the caller never told.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "read body: more after the request's JSON object")
		return c, false
	}
	return c, true
}

// doSet completes req from the body and the caller, and sets it.
func (s *Server) doSet(w http.ResponseWriter, r *http.Request, c setCaller, req mutator.Request, b setBody) {
	req.Variant, req.Expect, req.Reason, req.Mode, req.Branch, req.DryRun = b.Variant, b.Expect, strings.TrimSpace(b.Reason), b.Mode, b.Branch, b.DryRun
	req.Namespaces = c.namespaces
	// The token vouches for the name; .invalid says the address is no
	// mailbox (RFC 2606) while keeping Git's "Name <email>" form.
	req.Identity = mutator.Identity{Name: "web:" + c.name, Email: c.name + "@cuecast.invalid"}
	if a := strings.TrimSpace(b.Actor); a != "" {
		// The name goes into the commit's author line and a trailer: a line
		// break or a bracket there would forge another one.
		if len(a) > 100 || strings.ContainsFunc(a, func(r rune) bool { return !unicode.IsPrint(r) || strings.ContainsRune("<>()", r) }) {
			writeError(w, http.StatusBadRequest, "actor: at most 100 printable characters, without <>()")
			return
		}
		req.Identity.Name += " (" + a + ")"
	}
	if req.Tool == "" {
		req.Tool = "cuecast serve: set"
	}
	if err := c.outside(configsOf(req)); err != nil {
		s.setError(w, r, c, err)
		return
	}
	res, err := s.o.Mutator.Set(r.Context(), req)
	if err != nil {
		s.setError(w, r, c, err)
		return
	}
	s.log.Info("set", "caller", c.name, "identity", req.Identity.Name, "configs", len(configsOf(req)), "values", len(res.Values),
		"commit", res.Commit, "branch", res.Branch, "dry_run", req.DryRun, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, res)
}

func configsOf(req mutator.Request) []cuecast.ConfigPath {
	out := slices.Clone(req.Configs)
	for _, a := range append(slices.Clone(req.Set), req.Expect...) {
		if a.Config != "" && !slices.Contains(out, a.Config) {
			out = append(out, a.Config)
		}
	}
	return out
}

// setErrorBody is the answer to a set that did not land: Error says why,
// and the field of its kind says the rest.
type setErrorBody struct {
	Error    string                 `json:"error"`
	Conflict *mutator.ConflictError `json:"conflict,omitempty"`
	Refused  *mutator.RefusedError  `json:"refused,omitempty"`
	Invalid  *mutator.CompileError  `json:"invalid,omitempty"`
	Policy   *mutator.PolicyError   `json:"policy,omitempty"`
}

// setError answers a failed set: 409 conflict (with the current value, or
// the branch another writer moved),
// 422 refused (the origin's kind and position) or invalid (the compiler's
// errors, file:line), 403 not allowed, 400 a bad request, 500 otherwise.
func (s *Server) setError(w http.ResponseWriter, r *http.Request, c setCaller, err error) {
	body := setErrorBody{Error: err.Error()}
	code := http.StatusInternalServerError
	switch {
	case errors.As(err, &body.Conflict), errors.Is(err, mutator.ErrConflict):
		// The latter: another writer moved or holds the branch (a CLI set
		// on the same repository, git, a .lock left by a crash).
		code = http.StatusConflict
	case errors.As(err, &body.Refused), errors.As(err, &body.Invalid):
		code = http.StatusUnprocessableEntity
	case errors.As(err, &body.Policy):
		code = http.StatusForbidden
	case errors.Is(err, mutator.ErrBadRequest):
		code = http.StatusBadRequest
	case r.Context().Err() != nil:
		code = http.StatusServiceUnavailable
	}
	if code == http.StatusInternalServerError {
		s.log.Error("set failed", "caller", c.name, "err", err, "remote", r.RemoteAddr)
	} else {
		s.log.Info("set not done", "caller", c.name, "status", code, "err", err, "remote", r.RemoteAddr)
	}
	writeJSON(w, code, body)
}
