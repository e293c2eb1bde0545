package ci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/gitfs"
)

// ValueOrigin is where one value a change touched comes from at head: a
// leaf of a changed or added config's output below a path its diff names.
type ValueOrigin struct {
	Config cuecast.ConfigPath `json:"config"`
	compiler.ExplainedValue
}

// maxOriginConfigs bounds how many configs are explained: each is
// evaluated once more, and a library change that alters hundreds of
// configs alike reads the same in the first few.
const maxOriginConfigs = 10

// ExplainChanges sets rep.Origins (see Origins). Check does it itself,
// over the head tree it compiled, when Options.Explain is set.
func ExplainChanges(ctx context.Context, repoDir string, rep *Report) error {
	o, err := Origins(ctx, repoDir, rep)
	if err != nil {
		return err
	}
	rep.Origins = o
	return nil
}

// Origins explains, at the report's head commit, every value below
// a path that the diff of a changed or added config names (removed values
// have no origin at head), with compiler.Explain: literal, default,
// reference, tag or computed, and every position. It evaluates each such
// config once more, so it is a separate step from Check (or
// Options.Explain), for the pull request comment (Report.Markdown shows
// rep.Origins with OriginsMarkdown); at most maxOriginConfigs configs,
// the first in the report's order, all planned at once
// (compiler.ExplainEach).
//
// Errors: opening the repo or the head commit's tree, and those of
// compiler.Explain other than a config that does not compile at head
// (such a config has no values to explain and is skipped).
func Origins(ctx context.Context, repoDir string, rep *Report) ([]ValueOrigin, error) {
	if len(originTodo(rep)) == 0 {
		return nil, nil
	}
	r, _, closeRepo, err := openRepo(repoDir)
	if err != nil {
		return nil, err
	}
	defer closeRepo()
	c, err := r.CommitObject(plumbing.NewHash(rep.Head.Commit))
	if err != nil {
		return nil, fmt.Errorf("explain changes: head commit %s: %w", cuecast.ShortCommit(rep.Head.Commit), err)
	}
	fsys, err := gitfs.NewCache(checkCacheObjects).FS(r.Storer, c.TreeHash, c.Committer.When)
	if err != nil {
		return nil, fmt.Errorf("explain changes: read tree of %s: %w", cuecast.ShortCommit(rep.Head.Commit), err)
	}
	return origins(ctx, repoDir, fsys, rep)
}

// originTodo is the configs Origins explains.
func originTodo(rep *Report) []ConfigChange {
	var todo []ConfigChange
	for _, cc := range rep.Configs {
		if (cc.Status == StatusChanged || cc.Status == StatusAdded) && len(cc.Diff) > 0 {
			todo = append(todo, cc)
		}
	}
	return todo[:min(len(todo), maxOriginConfigs)]
}

// origins is Origins over fsys, the head commit's tree.
func origins(ctx context.Context, repoDir string, fsys fs.FS, rep *Report) ([]ValueOrigin, error) {
	todo := originTodo(rep)
	cfgs := make([]cuecast.ConfigPath, len(todo))
	for i, cc := range todo {
		cfgs[i] = cc.Config
	}
	var out []ValueOrigin
	i := 0
	err := compiler.ExplainEach(ctx, repoDir, cfgs, compiler.ExplainOptions{FS: fsys}, func(_ cuecast.ConfigPath, ex *compiler.Explanation, err error) error {
		cc := todo[i]
		i++
		var ce *compiler.CompileError
		if errors.As(err, &ce) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, changedOrigins(cc, ex)...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("explain changes: %w", err)
	}
	return out, nil
}

// changedOrigins picks the explained values below the paths cc's diff
// names.
func changedOrigins(cc ConfigChange, ex *compiler.Explanation) []ValueOrigin {
	doc, err := decode(ex.JSON)
	if err != nil {
		return nil
	}
	var prefixes [][]string
	for _, d := range cc.Diff {
		if d.Op == OpRemoved {
			continue
		}
		if segs, ok := resolveDiffPath(doc, d.Path); ok {
			prefixes = append(prefixes, segs)
		}
	}
	var out []ValueOrigin
	for _, v := range ex.Values {
		segs, ok := cuePathSegments(v.Path)
		if !ok {
			continue
		}
		for _, p := range prefixes {
			if hasPrefix(segs, p) {
				out = append(out, ValueOrigin{Config: cc.Config, ExplainedValue: v})
				break
			}
		}
	}
	return out
}

// A path segment is "k:<key>" for an object key or "i:<index>" for a list
// element, the one form both Diff's paths and CUE's are brought to.

// cuePathSegments splits an explained value's CUE path.
func cuePathSegments(p string) ([]string, bool) {
	if p == "" {
		return nil, true
	}
	cp := cue.ParsePath(p)
	if cp.Err() != nil {
		return nil, false
	}
	var segs []string
	for _, s := range cp.Selectors() {
		switch s.Type() {
		case cue.IndexLabel:
			segs = append(segs, "i:"+strconv.Itoa(s.Index()))
		case cue.StringLabel:
			segs = append(segs, "k:"+s.Unquoted())
		default:
			return nil, false
		}
	}
	return segs, true
}

// resolveDiffPath splits a Diff path (a.b, a["x.y"], list[2],
// list[name="x"]) against doc, the head document, which turns a keyed list
// element into its index.
func resolveDiffPath(doc any, p string) ([]string, bool) {
	if p == "." {
		return nil, true
	}
	var segs []string
	cur := doc
	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
		case p[0] == '[':
			end := closingBracket(p)
			if end < 0 {
				return nil, false
			}
			inner := p[1:end]
			p = p[end+1:]
			if strings.HasPrefix(inner, `"`) {
				k, err := strconv.Unquote(inner)
				if err != nil {
					return nil, false
				}
				m, _ := cur.(map[string]any)
				cur = m[k]
				segs = append(segs, "k:"+k)
				continue
			}
			list, _ := cur.([]any)
			if i, err := strconv.Atoi(inner); err == nil {
				if i < 0 || i >= len(list) {
					return nil, false
				}
				cur = list[i]
				segs = append(segs, "i:"+strconv.Itoa(i))
				continue
			}
			key, val, ok := strings.Cut(inner, "=")
			if !ok {
				return nil, false
			}
			i := keyedIndex(list, key, val)
			if i < 0 {
				return nil, false
			}
			cur = list[i]
			segs = append(segs, "i:"+strconv.Itoa(i))
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			k := p[:end]
			p = p[end:]
			m, _ := cur.(map[string]any)
			cur = m[k]
			segs = append(segs, "k:"+k)
		}
	}
	return segs, true
}

// closingBracket returns the index of the ']' closing p[0]'s '[', skipping
// quoted strings.
func closingBracket(p string) int {
	inStr := false
	for i := 1; i < len(p); i++ {
		switch {
		case inStr && p[i] == '\\':
			i++
		case p[i] == '"':
			inStr = !inStr
		case !inStr && p[i] == ']':
			return i
		}
	}
	return -1
}

// keyedIndex finds the element of list whose field key is val, written as
// Diff writes it (a quoted string, or a number).
func keyedIndex(list []any, key, val string) int {
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		switch v := m[key].(type) {
		case string:
			if strconv.Quote(v) == val {
				return i
			}
		case json.Number:
			if v.String() == val {
				return i
			}
		}
	}
	return -1
}

func hasPrefix(segs, prefix []string) bool {
	if len(prefix) > len(segs) {
		return false
	}
	for i := range prefix {
		if segs[i] != prefix[i] {
			return false
		}
	}
	return true
}

// maxOriginLines bounds the lines OriginsMarkdown shows per config.
const maxOriginLines = 40

// OriginsMarkdown renders origins as a section of the pull request
// comment, one fenced block per config, in at most limit bytes (whole
// configs are left out from the end, and a note says how many); "" when
// there are none. Report.Markdown ends with it.
func OriginsMarkdown(origins []ValueOrigin, limit int) string {
	if len(origins) == 0 {
		return ""
	}
	var blocks []string
	for i := 0; i < len(origins); {
		cfg := origins[i].Config
		var lines []string
		for ; i < len(origins) && origins[i].Config == cfg; i++ {
			lines = append(lines, origins[i].String())
		}
		if len(lines) > maxOriginLines {
			n := len(lines) - maxOriginLines
			lines = append(lines[:maxOriginLines:maxOriginLines], fmt.Sprintf("… %d more value(s); run cuecast explain %s for all of them", n, cfg))
		}
		blocks = append(blocks, fmt.Sprintf("#### %s\n\n%s\n", mdCode(string(cfg)), fence(lines)))
	}
	var b bytes.Buffer
	b.WriteString("### Where the changed values come from\n\n" +
		"Each value the change touched, at head, with its origin (literal, default, reference, tag, computed) and its positions, as `cuecast explain` gives them.\n\n")
	for i, blk := range blocks {
		if b.Len()+len(blk) > limit-100 {
			fmt.Fprintf(&b, "… %d more config(s) left out to fit the comment; run cuecast explain locally.\n", len(blocks)-i)
			break
		}
		b.WriteString(blk)
	}
	return b.String()
}
