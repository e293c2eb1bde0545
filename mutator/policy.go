package mutator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
)

// ErrForbidden: the manifest's changes: policy, or the namespaces the
// request is limited to (Request.Namespaces), do not allow the change.
var ErrForbidden = errors.New("change not allowed")

// PolicyError is Set's error for a change the policy does not allow:
// Namespace's changes: entry in the manifest at the head (Rule "paths" or
// "land"), the manifest itself (Rule "manifest": the policy is not changed
// through its own door), or Request.Namespaces (Rule "namespace").
type PolicyError struct {
	Namespace string             `json:"namespace,omitempty"`
	Config    cuecast.ConfigPath `json:"config,omitempty"`
	Path      string             `json:"path,omitempty"`
	Rule      string             `json:"rule"`
	Reason    string             `json:"reason"`
}

func (e *PolicyError) Error() string {
	var b strings.Builder
	if e.Config != "" {
		fmt.Fprintf(&b, "%s: ", e.Config)
	}
	if e.Path != "" {
		fmt.Fprintf(&b, "%s: ", e.Path)
	}
	b.WriteString(e.Reason)
	return b.String()
}

func (e *PolicyError) Unwrap() error { return ErrForbidden }

// checkPolicy enforces the changes: entries of the manifest at the head
// (fsys) and the request's namespaces on what planning found: the
// policy read is the one of the commit the change is applied on, inside
// the landing strip, so a policy change landing first governs the request.
func (m *Mutator) checkPolicy(ctx context.Context, fsys fs.FS, req Request, ch *change) error {
	res, err := compiler.Compile(ctx, m.dir, compiler.Options{FS: fsys, ManifestOnly: true, Timeout: m.opts.Timeout})
	if err != nil {
		return fmt.Errorf("read the manifest's policy: %w", err)
	}
	if res.Manifest == nil {
		// No policy can be read: only a caller not limited to namespaces
		// (the operator, the CLI) may change anything, as by hand.
		if len(req.Namespaces) > 0 {
			return &PolicyError{Rule: "manifest", Reason: "the manifest does not compile at the head, so its changes: policy cannot be read"}
		}
		return nil
	}
	for name := range ch.files {
		if path.Dir(name) == "." {
			return &PolicyError{Rule: "manifest", Path: name,
				Reason: "the change would edit the manifest package at the repo root, which holds the policy: change it by hand, in a reviewed pull request"}
		}
		if err := inScope(req, topDir(name), "", "edit "+name); err != nil {
			return err
		}
	}
	for _, v := range ch.values {
		ns := v.Config.Namespace()
		if err := inScope(req, ns, v.Config, "change "+string(v.Config)); err != nil {
			return err
		}
		pol := res.Manifest.Namespaces[ns].Changes
		ok, err := pathAllowed(pol.Paths, v.Path)
		if err != nil {
			return &PolicyError{Namespace: ns, Config: v.Config, Path: v.Path, Rule: "paths",
				Reason: fmt.Sprintf("namespace %s: changes.paths: %v", ns, err)}
		}
		if !ok {
			return &PolicyError{Namespace: ns, Config: v.Config, Path: v.Path, Rule: "paths",
				Reason: fmt.Sprintf("namespace %s allows changing only %s this way (the manifest's changes.paths)", ns, strings.Join(pol.Paths, ", "))}
		}
		if pol.Land == "pr" && req.Mode != ModePR && !req.DryRun {
			return &PolicyError{Namespace: ns, Config: v.Config, Path: v.Path, Rule: "land",
				Reason: fmt.Sprintf("namespace %s takes changes only as pull requests (the manifest's changes.land): open one: --github-pr, or the API's mode \"pr\"", ns)}
		}
	}
	return nil
}

// checkScope refuses a verified change whose compiled output changes a
// config outside Request.Namespaces: a literal in a library may reach
// other namespaces' configs, which the report names.
func checkScope(req Request, rep *ci.Report) error {
	for _, c := range rep.Configs {
		if c.Status == ci.StatusUnchanged {
			continue
		}
		if err := inScope(req, c.Config.Namespace(), c.Config, "change the output of "+string(c.Config)); err != nil {
			return err
		}
	}
	return nil
}

func inScope(req Request, ns string, cfg cuecast.ConfigPath, what string) error {
	if len(req.Namespaces) == 0 || slices.Contains(req.Namespaces, ns) {
		return nil
	}
	return &PolicyError{Namespace: ns, Config: cfg, Rule: "namespace",
		Reason: fmt.Sprintf("the request may change namespaces %s only; it would %s", strings.Join(req.Namespaces, ", "), what)}
}

func topDir(name string) string {
	top, _, _ := strings.Cut(name, "/")
	return top
}

// pathAllowed reports whether the CUE path p matches one of patterns (all
// paths when there are none).
func pathAllowed(patterns []string, p string) (bool, error) {
	if len(patterns) == 0 {
		return true, nil
	}
	elems, _, err := splitPath(p, false)
	if err != nil {
		return false, fmt.Errorf("path %q: %w", p, err)
	}
	for _, pat := range patterns {
		pe, rest, err := splitPath(pat, true)
		if err != nil {
			return false, fmt.Errorf("pattern %q: %w", pat, err)
		}
		if matchElems(pe, rest, elems) {
			return true, nil
		}
	}
	return false, nil
}

func matchElems(pat []string, rest bool, elems []string) bool {
	if len(elems) < len(pat) || (!rest && len(elems) != len(pat)) {
		return false
	}
	for i, p := range pat {
		if p != "*" && p != elems[i] {
			return false
		}
	}
	return true
}

// splitPath splits a CUE path into its elements: a field's name unquoted,
// an index as its number. With patterns, * (or [*]) stands for any element
// and a final "..." (rest) for any elements below; a quoted "*" is a field
// named *.
func splitPath(s string, pattern bool) (elems []string, rest bool, err error) {
	if pattern {
		if t, ok := strings.CutSuffix(s, "..."); ok {
			s, rest = strings.TrimSuffix(t, "."), true
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '.' && i > 0:
			i++
			if i == len(s) {
				return nil, false, errors.New("ends in a dot")
			}
			continue
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, false, errors.New("unterminated quote")
			}
			name, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, false, fmt.Errorf("quoted name %s: %w", s[i:j+1], err)
			}
			if name == "*" {
				name = `"*"`
			}
			elems, i = append(elems, name), j+1
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, false, errors.New("unterminated [")
			}
			idx := s[i+1 : i+j]
			if _, err := strconv.ParseUint(idx, 10, 32); err != nil && !(pattern && idx == "*") {
				return nil, false, fmt.Errorf("index [%s] is not a number", idx)
			}
			elems, i = append(elems, idx), i+j+1
		default:
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' && s[j] != '"' {
				j++
			}
			name := s[i:j]
			if name == "" || (name == "*" && !pattern) {
				return nil, false, fmt.Errorf("empty or bad element at %d", i)
			}
			elems, i = append(elems, name), j
		}
		if i < len(s) && s[i] != '.' && s[i] != '[' {
			return nil, false, fmt.Errorf("unexpected %q at %d", s[i], i)
		}
	}
	if len(elems) == 0 && !rest {
		return nil, false, errors.New("empty path")
	}
	return elems, rest, nil
}
