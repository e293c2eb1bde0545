package mutator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/publish"
	"github.com/cuecast/cuecast/internal/termtext"
)

// Trailer is the commit trailer naming the tool that made a commit;
// `cuecast log` and the audit show it.
const Trailer = "Cuecast-Mutator"

// RequestedByTrailer names who asked for a change (Request.Identity).
const RequestedByTrailer = "Cuecast-Requested-By"

// Mode says where a change lands.
type Mode string

const (
	// ModeCommit commits on the branch checked out in the repository (or
	// Request.Branch) and pushes it when the remote exists.
	ModeCommit Mode = "commit"
	// ModeBranch commits on Request.Branch, created from the head when it
	// does not exist, and pushes it when the remote exists.
	ModeBranch Mode = "branch"
	// ModePR commits on a new branch (Request.Branch, default
	// cuecast/set-<commit>), pushes it and opens a GitHub pull request into
	// the branch checked out.
	ModePR Mode = "pr"
)

// Assignment is one PATH=VALUE: a CUE path of the compiled output
// (server.port, hosts[0], labels."app.kubernetes.io/name") and a CUE
// literal (8081, "eu", true, null, 0x1F, 1e3). A bare word is a string
// when the current value is one (region=eu).
type Assignment struct {
	// Config, when set, limits the assignment to this config (a bulk
	// change setting different values in different configs); empty means
	// every config of Request.Configs.
	Config cuecast.ConfigPath `json:"config,omitempty"`
	Path   string             `json:"path"`
	Value  string             `json:"value"`
}

// configs are the configs a takes effect in.
func (a Assignment) configs(all []cuecast.ConfigPath) []cuecast.ConfigPath {
	if a.Config != "" {
		return []cuecast.ConfigPath{a.Config}
	}
	return all
}

// Identity is who asked for a change: the commit's author.
type Identity struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

func (id Identity) String() string {
	if id.Email == "" {
		return id.Name
	}
	return fmt.Sprintf("%s <%s>", id.Name, id.Email)
}

// Request is one change: every assignment applied to every config, as one
// commit.
type Request struct {
	// Configs are the configs to change (a bulk change names many); a
	// variant path (search/suggest/env=prod) names its variant.
	Configs []cuecast.ConfigPath `json:"configs"`
	Set     []Assignment         `json:"set"`
	// Variant is the variant to read the values in ({"env": "prod"}), for
	// configs with variants; the literal found is edited for every variant
	// that shares it, which the report shows.
	Variant map[string]string `json:"variant,omitempty"`
	// Expect are compare-and-set conditions: each path must have this
	// value in every config, or Set fails with a *ConflictError.
	Expect []Assignment `json:"expect,omitempty"`
	// Reason is why; it becomes the commit message's body. Required: plain
	// text (lines and tabs): a control character, a bidi override or a
	// byte not UTF-8 fails Set with ErrBadRequest.
	Reason string `json:"reason"`
	// Identity is who asked: the commit's author. Required.
	Identity Identity `json:"identity"`
	Mode     Mode     `json:"mode"`
	// Branch is the branch for ModeBranch (required) and ModePR
	// (optional); for ModeCommit, empty means the one checked out.
	Branch string `json:"branch,omitempty"`
	// At, when set, is a file in the config's directory (repo-relative)
	// where every value is set by adding a field to it (docs/VARIANTS.md,
	// the specific layer): a value that is not a literal, instead of being
	// refused, and a literal too, instead of being edited where it is
	// (over a concrete value the override conflicts, and Set refuses it).
	At string `json:"at,omitempty"`
	// DryRun verifies the change and reports it without committing.
	DryRun bool `json:"dry_run,omitempty"`
	// Namespaces, when not empty, limit the change to these namespaces
	// (the HTTP API's namespace tokens): a config named, a file edited or
	// a config whose compiled output changes outside them fails the
	// request with a *PolicyError.
	Namespaces []string `json:"namespaces,omitempty"`
	// Tool names the caller in the commit's trailer; default "cuecast set".
	Tool string `json:"tool,omitempty"`
	// Subject is the commit's subject line; default says which values
	// were set ("payments/checkout: set server.port to 8081").
	Subject string `json:"subject,omitempty"`
}

// Result is what a change did.
type Result struct {
	// Base is the commit the change was applied on, Commit the one made
	// (set with DryRun too: it exists only in the object store).
	Base   string `json:"base"`
	Commit string `json:"commit"`
	// Branch is the branch moved to Commit; empty for DryRun.
	Branch string `json:"branch,omitempty"`
	// Pushed is set when the branch was pushed to Options.Remote.
	Pushed bool `json:"pushed,omitempty"`
	// PullRequest is the pull request opened by ModePR.
	PullRequest *PullRequest `json:"pull_request,omitempty"`
	Values      []Value      `json:"values"`
	// Report is the check of the change: compiled diff, risk, variants,
	// flag shares moved; what the PR check posts. Nil when Unchanged.
	Report *ci.Report `json:"report"`
	// Unchanged says every value already was the one asked for: no file
	// changed, so nothing was committed (Commit and Branch are empty).
	Unchanged bool `json:"unchanged,omitempty"`
}

// PullRequest is an opened pull request.
type PullRequest struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
}

// Value is one value set: its old and new JSON and the origin edited.
type Value struct {
	Config cuecast.ConfigPath `json:"config"`
	Path   string             `json:"path"`
	Old    json.RawMessage    `json:"old"`
	New    json.RawMessage    `json:"new"`
	// Origin is the origin explain gave the old value; Edited is where the
	// literal was replaced (or, with Request.At, the field added).
	Origin compiler.Origin   `json:"origin"`
	Edited compiler.Position `json:"edited"`
}

// Options configure a Mutator.
type Options struct {
	// Remote is pushed to after a commit when the repository has it;
	// default "origin".
	Remote string
	// Auth logs in to the remote (serve's Git credentials); nil for local
	// and SSH-agent remotes.
	Auth transport.AuthMethod
	// GitHub is where ModePR opens pull requests; Owner and Name default to
	// the ones the remote's URL names.
	GitHub publish.GitHub
	// Committer commits the changes; the author is the request's
	// Identity. Default "cuecast" <cuecast@localhost>.
	Committer Identity
	// Logger receives debug logs; default discards.
	Logger *slog.Logger
	// Now is the clock for commit times; default time.Now.
	Now func() time.Time
	// Timeout bounds each evaluation (compiler.DefaultTimeout).
	Timeout time.Duration
}

// Mutator changes the values of one repository's configs, one request at a
// time (see the package doc).
type Mutator struct {
	dir  string
	opts Options
	mu   sync.Mutex // the landing strip: one request at a time
}

// New returns a Mutator for the Git repository (a work tree or bare) at
// dir.
func New(dir string, opts Options) *Mutator {
	if opts.Remote == "" {
		opts.Remote = "origin"
	}
	if opts.Committer.Name == "" {
		opts.Committer = Identity{Name: "cuecast", Email: "cuecast@localhost"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Mutator{dir: dir, opts: opts}
}

// Set applies req on top of the current head of its branch, after the
// requests before it: it finds each value's origin, edits the literals,
// recompiles the affected configs and, unless req.DryRun, moves the branch
// and publishes as req.Mode says. Nothing is written when it fails.
//
// Errors: *RequestError, *ConflictError, *RefusedError, *CompileError (see
// the package doc), ctx.Err(), and errors of Git and GitHub.
func (m *Mutator) Set(ctx context.Context, req Request) (*Result, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	res, err := m.set(ctx, req)
	m.opts.Logger.Debug("set", "configs", len(req.Configs), "values", len(req.Set), "elapsed", time.Since(t0), "err", err)
	return res, err
}

func (req *Request) validate() error {
	// Every path in the one spelling CUE reads it in: the policy matches
	// it and the commit message shows it, where the caller's spelling
	// could hide a comment (flags.kill //.on is flags.kill, which the
	// pattern flags.*.on did match) or break the subject line. A path
	// CUE does not read stays as given, for explain to refuse.
	req.Set, req.Expect = normPaths(req.Set), normPaths(req.Expect)
	for _, a := range append(slices.Clone(req.Set), req.Expect...) {
		if a.Config == "" && len(req.Configs) == 0 {
			return badRequest("set: no config named for %s", a.Path)
		}
		if a.Config != "" {
			if err := a.Config.Validate(); err != nil {
				return &RequestError{Err: fmt.Errorf("set: config %q: %w", a.Config, err)}
			}
		}
	}
	// A line ending CRLF (a reason written on Windows) is a line.
	req.Reason = strings.ReplaceAll(req.Reason, "\r\n", "\n")
	switch {
	case len(req.Set) == 0:
		return badRequest("set: no PATH=VALUE given")
	case req.Reason == "":
		return badRequest("set: a reason is required: it is the commit message")
	case badRune(req.Reason) != "":
		return badRequest("set: the reason holds %s, a control character, a bidi override or a byte not UTF-8: git log and terminals would obey it; write the reason as plain text (lines and tabs are fine)", badRune(req.Reason))
	case req.Identity.Name == "":
		return badRequest("set: who asked for the change is required (the commit's author)")
	}
	for _, c := range req.Configs {
		if err := c.Validate(); err != nil {
			return &RequestError{Err: fmt.Errorf("set: config %q: %w", c, err)}
		}
	}
	if req.Mode == "" && req.DryRun {
		// A dry run only verifies: it needs no say in where it lands.
		req.Mode = ModeCommit
	}
	switch req.Mode {
	case ModeCommit, ModePR:
	case ModeBranch:
		if req.Branch == "" {
			return badRequest("set: mode branch needs a branch name")
		}
	default:
		return badRequest("set: mode %q is none of commit, branch, pr", req.Mode)
	}
	if req.Branch != "" {
		if err := checkBranchName(req.Branch); err != nil {
			return &RequestError{Err: fmt.Errorf("set: %w", err)}
		}
	}
	seen := map[string]bool{}
	for _, a := range req.Set {
		for _, c := range a.configs(req.Configs) {
			k := string(c) + " " + normPath(a.Path)
			if seen[k] {
				return badRequest("set: %s %s is assigned twice", c, a.Path)
			}
			seen[k] = true
		}
	}
	if req.Tool == "" {
		req.Tool = "cuecast set"
	}
	return nil
}

// badRune returns, escaped, the first rune of reason a terminal would obey
// (termtext.Line escapes it) other than a line break or a tab; "" when
// there is none. The reason goes into the commit message as it is, and git
// log, GitHub's pull request and a tail of the repository show it so.
func badRune(reason string) string {
	for i := 0; i < len(reason); {
		_, n := utf8.DecodeRuneInString(reason[i:])
		c := reason[i : i+n]
		if e := termtext.Line(c); c != "\n" && c != "\t" && e != c {
			return e
		}
		i += n
	}
	return ""
}

// normPaths returns as, its paths in the spelling CUE reads them in (a
// copy: the caller's slice is left as it was).
func normPaths(as []Assignment) []Assignment {
	if as == nil {
		return nil
	}
	out := slices.Clone(as)
	for i := range out {
		out[i].Path = normPath(out[i].Path)
	}
	return out
}

// errorsAt returns the new errors of rep (those the base did not have).
func errorsAt(rep *ci.Report) []compiler.Error {
	var out []compiler.Error
	for _, f := range rep.Errors {
		if !f.PreExisting {
			out = append(out, f.Error)
		}
	}
	return out
}

// Trailers returns the tool and who asked, as a commit message made by Set
// names them; empty for a commit made by hand. `cuecast log` shows them.
func Trailers(msg string) (tool, requestedBy string) {
	for _, line := range strings.Split(msg, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		switch {
		case !ok:
		case k == Trailer:
			tool = strings.TrimSpace(v)
		case k == RequestedByTrailer:
			requestedBy = strings.TrimSpace(v)
		}
	}
	return tool, requestedBy
}
