// Package githubtest is a fake GitHub REST API for tests of the PR check: an
// httptest server implementing the endpoints cuecast uses (check runs, issue
// comments, pull requests) closely enough for go-github, validating what
// GitHub validates (at most 50 annotations a request, bodies under 65,536
// characters), and recording every request so tests can assert the exact
// sequence and payloads. Failures are injected per route.
//
//	gh := githubtest.New(t)
//	r, _ := ci.NewGitHub(ci.GitHubOptions{APIURL: gh.URL, Token: githubtest.Token, …})
//
// New serves under /api/v3/, as GitHub Enterprise Server does; NewAt serves
// under any root (a proxy's), so a client that rewrites GITHUB_API_URL
// instead of using it as given gets 404s.
package githubtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// Token is the only token the server accepts; any other gets 401.
const Token = "ghs_test_token"

// MaxBody is GitHub's limit on comment and check-run summary bodies, in
// characters.
const MaxBody = 65536

// Request is one request the server received.
type Request struct {
	Method string
	// Path is the path below the API root, such as
	// "/repos/o/r/check-runs/1", with the query string after a '?'.
	Path string
	// Body is the decoded JSON body; nil when there was none.
	Body map[string]any
	// Status is what the server answered.
	Status int
}

// Route names a request kind in Fail and Deny: "POST check-runs",
// "PATCH check-runs", "GET check-runs" (of a commit), "GET comments", "POST comments", "PATCH comments",
// "GET pulls", "GET user".
type Route string

// The routes the server implements.
const (
	CreateCheckRun Route = "POST check-runs"
	UpdateCheckRun Route = "PATCH check-runs"
	ListCheckRuns  Route = "GET check-runs"
	ListComments   Route = "GET comments"
	CreateComment  Route = "POST comments"
	EditComment    Route = "PATCH comments"
	GetPull        Route = "GET pulls"
	CreatePull     Route = "POST pulls"
	GetUser        Route = "GET user"
)

// ActionsBot is the account an Actions GITHUB_TOKEN writes as: comments
// made with Token are by it unless SetUser names a user.
const ActionsBot = "github-actions[bot]"

// CheckRun is the server's state of one check run.
type CheckRun struct {
	ID          int64
	Name        string
	HeadSHA     string
	Status      string
	Conclusion  string
	StartedAt   string
	Title       string
	Summary     string
	Annotations []map[string]any
}

// Comment is one issue comment.
type Comment struct {
	ID   int64
	PR   int
	Body string
	User string
}

// Pull is a pull request the server knows.
type Pull struct {
	Number           int
	HeadSHA, BaseSHA string
	// Head and Base are the branches, Title and Body the text, of a pull
	// request opened through the API (CreatePull).
	Head, Base, Title, Body string
}

type failure struct {
	status int
	header http.Header
	body   string
}

// Server is a fake GitHub API.
type Server struct {
	// URL is the API root to give the client, like GITHUB_API_URL on GitHub
	// Enterprise: "http://127.0.0.1:port/api/v3".
	URL string
	// root is the path prefix the API is served under.
	root string

	// reqMu guards requests alone: a request is recorded while its handler
	// writes the response, which some handlers do holding mu.
	reqMu    sync.Mutex
	requests []Request

	mu       sync.Mutex
	runs     map[int64]*CheckRun
	comments []*Comment
	pulls    map[int]Pull
	nextID   int64
	fail     map[Route][]failure
	// failAfter are failures answered after the request was served: the
	// state changed, the client learns nothing of it.
	failAfter map[Route][]failure
	deny      map[Route]int
	pageSize  int
	// user is the account Token belongs to when it is a personal access
	// token (SetUser); empty, it is an installation token (ActionsBot).
	user string
}

// New starts a server under /api/v3, closed when the test ends.
func New(t testing.TB) *Server { return NewAt(t, "/api/v3") }

// NewAt starts a server whose API root is the path root ("" for the host's
// root, as api.github.com), closed when the test ends.
func NewAt(t testing.TB, root string) *Server {
	root = strings.TrimSuffix(root, "/")
	s := &Server{
		root:      root,
		runs:      make(map[int64]*CheckRun),
		pulls:     make(map[int]Pull),
		nextID:    1000,
		fail:      make(map[Route][]failure),
		failAfter: make(map[Route][]failure),
		deny:      make(map[Route]int),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+root+"/repos/{owner}/{repo}/check-runs", s.route(CreateCheckRun, s.createRun))
	mux.HandleFunc("PATCH "+root+"/repos/{owner}/{repo}/check-runs/{id}", s.route(UpdateCheckRun, s.updateRun))
	mux.HandleFunc("GET "+root+"/repos/{owner}/{repo}/commits/{ref}/check-runs", s.route(ListCheckRuns, s.listRuns))
	mux.HandleFunc("GET "+root+"/repos/{owner}/{repo}/issues/{n}/comments", s.route(ListComments, s.listComments))
	mux.HandleFunc("POST "+root+"/repos/{owner}/{repo}/issues/{n}/comments", s.route(CreateComment, s.createComment))
	mux.HandleFunc("PATCH "+root+"/repos/{owner}/{repo}/issues/comments/{id}", s.route(EditComment, s.editComment))
	mux.HandleFunc("GET "+root+"/repos/{owner}/{repo}/pulls/{n}", s.route(GetPull, s.getPull))
	mux.HandleFunc("POST "+root+"/repos/{owner}/{repo}/pulls", s.route(CreatePull, s.createPull))
	mux.HandleFunc("GET "+root+"/user", s.route(GetUser, s.getUser))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, nil, http.StatusNotFound)
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + root
	return s
}

// Fail makes the next request on route answer status (with header and a
// JSON body {"message": message}) instead of being served; calls queue up.
func (s *Server) Fail(route Route, status int, header http.Header, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"message": message, "documentation_url": "https://docs.github.com/rest"})
	s.fail[route] = append(s.fail[route], failure{status: status, header: header, body: string(b)})
}

// FailAfterServing makes the next request on route be served (a comment or
// check run is created) and then answered with status, as when a proxy in
// front of GitHub times out after GitHub stored the result; calls queue up.
func (s *Server) FailAfterServing(route Route, status int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"message": message})
	s.failAfter[route] = append(s.failAfter[route], failure{status: status, body: string(b)})
}

// Deny makes every request on route answer status (401 or 403), as GitHub
// does for a token without the permission.
func (s *Server) Deny(route Route, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny[route] = status
}

// AddPull makes a pull request known to GET pulls.
func (s *Server) AddPull(p Pull) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[p.Number] = p
}

// SetUser makes Token a personal access token of user: GET /user answers
// with the login and comments made with it are by user. Without it Token
// is an installation token, as an Actions GITHUB_TOKEN is: GET /user is
// refused (403) and comments are by ActionsBot.
func (s *Server) SetUser(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user = user
}

// AddComment adds a comment by someone else; it returns its ID. A user
// ending in "[bot]" is a bot account, any other a person's.
func (s *Server) AddComment(pr int, user, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.comments = append(s.comments, &Comment{ID: s.nextID, PR: pr, Body: body, User: user})
	return s.nextID
}

// SetPageSize caps comments per page below the client's per_page, to test
// pagination.
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// Requests returns every request so far, in order.
func (s *Server) Requests() []Request {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	return slices.Clone(s.requests)
}

// Sequence returns the requests as "METHOD path" lines, query strings left
// out, for asserting the exact order of calls.
func (s *Server) Sequence() []string {
	var out []string
	for _, r := range s.Requests() {
		p, _, _ := strings.Cut(r.Path, "?")
		out = append(out, fmt.Sprintf("%s %s %d", r.Method, p, r.Status))
	}
	return out
}

// WantSequence fails t unless the requests from the since-th on (Sequence)
// are want, in order.
func (s *Server) WantSequence(t testing.TB, since int, want ...string) {
	t.Helper()
	if got := s.Sequence()[since:]; !slices.Equal(got, want) {
		t.Fatalf("requests from the %dth:\ngot  %q\nwant %q", since, got, want)
	}
}

// Runs returns the check runs, by ID.
func (s *Server) Runs() map[int64]CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64]CheckRun, len(s.runs))
	for id, r := range s.runs {
		c := *r
		c.Annotations = slices.Clone(r.Annotations)
		out[id] = c
	}
	return out
}

// Comments returns the comments on a pull request, oldest first.
func (s *Server) Comments(pr int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.PR == pr {
			out = append(out, *c)
		}
	}
	return out
}

type handler func(w http.ResponseWriter, r *http.Request, body map[string]any) int

// route wraps a handler with authentication, injected failures and
// recording.
func (s *Server) route(name Route, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			if len(b) > 0 {
				if err := json.Unmarshal(b, &body); err != nil {
					s.record(r, nil, http.StatusBadRequest)
					writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
					return
				}
			}
		}
		if r.Header.Get("Authorization") != "Bearer "+Token {
			s.record(r, body, http.StatusUnauthorized)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
			return
		}
		s.mu.Lock()
		if st, ok := s.deny[name]; ok {
			s.mu.Unlock()
			s.record(r, body, st)
			writeJSON(w, st, map[string]any{"message": "Resource not accessible by integration"})
			return
		}
		if q := s.fail[name]; len(q) > 0 {
			f := q[0]
			s.fail[name] = q[1:]
			s.mu.Unlock()
			s.record(r, body, f.status)
			for k, vs := range f.header {
				w.Header()[k] = vs
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			io.WriteString(w, f.body)
			return
		}
		if q := s.failAfter[name]; len(q) > 0 {
			f := q[0]
			s.failAfter[name] = q[1:]
			s.mu.Unlock()
			h(httptest.NewRecorder(), r, body)
			s.record(r, body, f.status)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.status)
			io.WriteString(w, f.body)
			return
		}
		s.mu.Unlock()
		// Recorded when the status is written, before the response can
		// reach the client: recorded after the handler returned, a request
		// could be missing from Requests when the client's call has already
		// returned (TestGitHubAnnotationBatches saw its last PATCH missing).
		rw := &recordingWriter{ResponseWriter: w, record: func(st int) { s.record(r, body, st) }}
		if st := h(rw, r, body); !rw.recorded {
			s.record(r, body, st)
		}
	}
}

// recordingWriter records a request when its handler writes the status.
type recordingWriter struct {
	http.ResponseWriter
	record   func(status int)
	recorded bool
}

func (w *recordingWriter) WriteHeader(status int) {
	if !w.recorded {
		w.recorded = true
		w.record(status)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if !w.recorded {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (s *Server) record(r *http.Request, body map[string]any, status int) {
	p := strings.TrimPrefix(r.URL.Path, s.root)
	if r.URL.RawQuery != "" {
		p += "?" + r.URL.RawQuery
	}
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: p, Body: body, Status: status})
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
	return status
}

func unprocessable(w http.ResponseWriter, msg string) int {
	return writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": []any{map[string]any{"message": msg}}})
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func (s *Server) runJSON(r *CheckRun) map[string]any {
	return map[string]any{
		"id": r.ID, "name": r.Name, "head_sha": r.HeadSHA, "status": r.Status,
		"conclusion": r.Conclusion, "started_at": r.StartedAt,
		"output": map[string]any{"title": r.Title, "summary": r.Summary, "annotations_count": len(r.Annotations)},
	}
}

// applyOutput validates and applies a check-run output object.
func applyOutput(run *CheckRun, body map[string]any) string {
	out, ok := body["output"].(map[string]any)
	if !ok {
		return ""
	}
	if str(out, "title") == "" || str(out, "summary") == "" {
		return "output needs a title and a summary"
	}
	if utf8.RuneCountInString(str(out, "summary")) > MaxBody {
		return "output.summary is too long (maximum is 65535 characters)"
	}
	anns, _ := out["annotations"].([]any)
	if len(anns) > 50 {
		return "output.annotations: at most 50 per request"
	}
	for _, a := range anns {
		m, _ := a.(map[string]any)
		if str(m, "path") == "" || m["start_line"] == nil || m["end_line"] == nil || str(m, "annotation_level") == "" || str(m, "message") == "" {
			return "annotation needs path, start_line, end_line, annotation_level and message"
		}
		run.Annotations = append(run.Annotations, m)
	}
	run.Title, run.Summary = str(out, "title"), str(out, "summary")
	return ""
}

func validStatus(run *CheckRun, body map[string]any) string {
	if st := str(body, "status"); st != "" {
		run.Status = st
	}
	if c := str(body, "conclusion"); c != "" {
		run.Conclusion = c
		run.Status = "completed"
	}
	if run.Status == "completed" && run.Conclusion == "" {
		return "conclusion is required when status is completed"
	}
	return ""
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request, body map[string]any) int {
	if str(body, "name") == "" || str(body, "head_sha") == "" {
		return unprocessable(w, "name and head_sha are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	run := &CheckRun{ID: s.nextID, Name: str(body, "name"), HeadSHA: str(body, "head_sha"), Status: "queued", StartedAt: str(body, "started_at")}
	if msg := validStatus(run, body); msg != "" {
		return unprocessable(w, msg)
	}
	if msg := applyOutput(run, body); msg != "" {
		return unprocessable(w, msg)
	}
	s.runs[run.ID] = run
	return writeJSON(w, http.StatusCreated, s.runJSON(run))
}

func (s *Server) updateRun(w http.ResponseWriter, r *http.Request, body map[string]any) int {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	run, ok := s.runs[id]
	if !ok {
		return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
	next := *run
	next.Annotations = slices.Clone(run.Annotations)
	if msg := validStatus(&next, body); msg != "" {
		return unprocessable(w, msg)
	}
	if msg := applyOutput(&next, body); msg != "" {
		return unprocessable(w, msg)
	}
	*run = next
	return writeJSON(w, http.StatusOK, s.runJSON(run))
}

// listRuns serves the check runs of a commit, newest first, filtered by
// check_name and status as GitHub does.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request, _ map[string]any) int {
	ref := r.PathValue("ref")
	name, status := r.URL.Query().Get("check_name"), r.URL.Query().Get("status")
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for id, run := range s.runs {
		if run.HeadSHA == ref && (name == "" || run.Name == name) && (status == "" || run.Status == status) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	runs := []map[string]any{}
	for _, id := range ids {
		runs = append(runs, s.runJSON(s.runs[id]))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
}

func commentJSON(c *Comment) map[string]any {
	return map[string]any{"id": c.ID, "body": c.Body, "user": userJSON(c.User)}
}

// userJSON is an account as GitHub shows it: logins ending in "[bot]" are
// apps' (type Bot), which no person can register.
func userJSON(login string) map[string]any {
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	return map[string]any{"login": login, "type": typ}
}

// getUser answers GET /user as GitHub does: the login for a personal
// access token, 403 for an installation token.
func (s *Server) getUser(w http.ResponseWriter, _ *http.Request, _ map[string]any) int {
	s.mu.Lock()
	user := s.user
	s.mu.Unlock()
	if user == "" {
		return writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration"})
	}
	return writeJSON(w, http.StatusOK, userJSON(user))
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request, _ map[string]any) int {
	pr, _ := strconv.Atoi(r.PathValue("n"))
	per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
	if per <= 0 {
		per = 30
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pageSize > 0 {
		per = min(per, s.pageSize)
	}
	var all []map[string]any
	for _, c := range s.comments {
		if c.PR == pr {
			all = append(all, commentJSON(c))
		}
	}
	lo, hi := min((page-1)*per, len(all)), min(page*per, len(all))
	if hi < len(all) {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(page+1))
		u.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<http://%s%s>; rel="next"`, r.Host, u.String()))
	}
	page0 := all[lo:hi]
	if page0 == nil {
		page0 = []map[string]any{}
	}
	return writeJSON(w, http.StatusOK, page0)
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request, body map[string]any) int {
	pr, _ := strconv.Atoi(r.PathValue("n"))
	b := str(body, "body")
	if b == "" || utf8.RuneCountInString(b) > MaxBody {
		return unprocessable(w, "body is empty or too long (maximum is 65536 characters)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	user := s.user
	if user == "" {
		user = ActionsBot
	}
	c := &Comment{ID: s.nextID, PR: pr, Body: b, User: user}
	s.comments = append(s.comments, c)
	return writeJSON(w, http.StatusCreated, commentJSON(c))
}

func (s *Server) editComment(w http.ResponseWriter, r *http.Request, body map[string]any) int {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	b := str(body, "body")
	if b == "" || utf8.RuneCountInString(b) > MaxBody {
		return unprocessable(w, "body is empty or too long (maximum is 65536 characters)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if c.ID == id {
			// An installation token edits only its own comments; a
			// personal access token (a maintainer's) may edit anyone's.
			if s.user == "" && c.User != ActionsBot {
				return writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration"})
			}
			c.Body = b
			return writeJSON(w, http.StatusOK, commentJSON(c))
		}
	}
	return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
}

// Pulls returns the pull requests the server knows, by number.
func (s *Server) Pulls() map[int]Pull {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]Pull, len(s.pulls))
	for n, p := range s.pulls {
		out[n] = p
	}
	return out
}

func (s *Server) createPull(w http.ResponseWriter, r *http.Request, body map[string]any) int {
	str := func(k string) string { v, _ := body[k].(string); return v }
	s.mu.Lock()
	n := len(s.pulls) + 1
	p := Pull{Number: n, Head: str("head"), Base: str("base"), Title: str("title"), Body: str("body")}
	s.pulls[n] = p
	s.mu.Unlock()
	return writeJSON(w, http.StatusCreated, map[string]any{
		"number": n, "html_url": fmt.Sprintf("https://github.example/%s/%s/pull/%d", r.PathValue("owner"), r.PathValue("repo"), n),
	})
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request, _ map[string]any) int {
	n, _ := strconv.Atoi(r.PathValue("n"))
	s.mu.Lock()
	p, ok := s.pulls[n]
	s.mu.Unlock()
	if !ok {
		return writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
	return writeJSON(w, http.StatusOK, map[string]any{
		"number": p.Number, "head": map[string]any{"sha": p.HeadSHA}, "base": map[string]any{"sha": p.BaseSHA},
	})
}
