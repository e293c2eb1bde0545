package ci

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/termtext"
)

// Marker is the hidden line that identifies cuecast's PR comment, so a re-run
// edits its comment instead of adding another.
const Marker = "<!-- cuecast-check -->"

// MaxBody is the most a rendered Markdown body may take, in bytes. GitHub
// rejects comment and check-run bodies over 65,536 characters; a byte count
// is never below the character count, and the margin leaves room for the
// note that says what was left out.
const MaxBody = 65_000

// maxValue caps one value shown in a diff line, in characters.
const maxValue = 200

// maxDiffLines caps the lines of one config's diff in Markdown.
const maxDiffLines = 200

// collapseAfter is how many diff lines a config may show before its diff is
// folded into a <details> element.
const collapseAfter = 15

// WriteJSON writes the report as indented JSON, the form `--output json`
// prints.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteText writes the report for a person at a terminal: the risk summary,
// each affected config with its diff, the errors at head as
// file:line:col: message [ID], and the namespaces touched. What a commit
// chose (file names, paths, keys, values, messages, the revisions' names)
// goes through termtext.Line: the text lands in terminals and CI logs,
// which obey the controls in it.
func (r *Report) WriteText(w io.Writer) error {
	t := termtext.Line
	var b strings.Builder
	fmt.Fprintf(&b, "cuecast check %s → %s\n", t(r.Base.describe()), t(r.Head.describe()))
	if r.MergeBase != "" {
		fmt.Fprintf(&b, "compared with merge base %s\n", cuecast.ShortCommit(r.MergeBase))
	}
	fmt.Fprintf(&b, "risk: %s — %s\n", r.Risk.Level, r.headline())
	for _, l := range r.riskLines(func(s string) string { return s }) {
		fmt.Fprintf(&b, "  ! %s\n", t(l))
	}
	if len(r.Configs) > 0 {
		b.WriteString("\nconfigs:\n")
		for _, cc := range r.Configs {
			fmt.Fprintf(&b, "  %-13s %s", cc.Status, t(cc.title()))
			if cc.Instances != nil {
				fmt.Fprintf(&b, "  (%s)", plural(*cc.Instances, "instance"))
			}
			b.WriteString("\n")
			for _, l := range cc.diffLines() {
				fmt.Fprintf(&b, "      %s\n", t(l))
			}
		}
	}
	if len(r.Errors) > 0 {
		b.WriteString("\nerrors at head:\n")
		for _, f := range r.Errors {
			fmt.Fprintf(&b, "  %s", t(f.Error.Error()))
			if f.PreExisting {
				b.WriteString(" (pre-existing)")
			}
			b.WriteString("\n")
			if f.Fix != "" {
				fmt.Fprintf(&b, "      fix: %s\n", t(f.Fix))
			}
		}
	}
	if len(r.Namespaces) > 0 {
		b.WriteString("\nnamespaces:\n")
		for _, n := range r.Namespaces {
			fmt.Fprintf(&b, "  %s  owners: %s", t(n.Name), t(strings.Join(n.Owners, ", ")))
			if n.Consistency != "" {
				fmt.Fprintf(&b, "  consistency: %s", t(string(n.Consistency)))
			}
			fmt.Fprintf(&b, "  imports configs from: %s", t(importsFrom(n)))
			b.WriteString("\n")
		}
	}
	r.analysisText(&b)
	if len(r.Undeclared) > 0 {
		b.WriteString("\nnot compiled (no namespace in cuecast.cue, no config imports it):\n")
		for _, d := range r.Undeclared {
			fmt.Fprintf(&b, "  ! %s/  declare it in cuecast.cue if it holds configs\n", t(d))
		}
	}
	if len(r.Bindings) > 0 {
		b.WriteString("\ntyped bindings change (cuecast gen):\n")
		for _, c := range r.Bindings {
			fmt.Fprintf(&b, "  ! %s  %s\n", t(c.Namespace), t(c.summary()))
		}
	}
	b.WriteString("\n" + r.verdict() + "\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// Markdown renders the report as GitHub-flavoured Markdown of at most limit
// bytes (MaxBody when limit is 0 or more than MaxBody), starting with Marker.
// Long diffs are folded into <details>; when the whole does not fit, whole
// sections are left out from the end and a note says how many, so a code
// block or a <details> element is never cut in half.
func (r *Report) Markdown(limit int) string {
	if limit <= 0 || limit > MaxBody {
		limit = MaxBody
	}
	var blocks []string
	add := func(format string, args ...any) { blocks = append(blocks, fmt.Sprintf(format, args...)) }

	add("%s\n## cuecast check: %s\n\n", Marker, r.verdict())
	add("%s **Risk: %s** — %s\n\n", levelMark(r.Risk.Level), r.Risk.Level, r.headline())
	if lines := r.riskLines(mdCode); len(lines) > 0 {
		for _, l := range lines {
			add("- ⚠️ %s\n", l)
		}
		add("\n")
	}
	cmp := fmt.Sprintf("Compared `%s` (%s) → `%s` (%s)", r.Base.Rev, cuecast.ShortCommit(r.Base.Commit), r.Head.Rev, cuecast.ShortCommit(r.Head.Commit))
	if r.MergeBase != "" {
		cmp += fmt.Sprintf(", from their merge base %s", cuecast.ShortCommit(r.MergeBase))
	}
	add("%s; %d file(s) changed.\n\n", cmp, len(r.ChangedFiles))

	groups := r.groups()
	if len(r.Configs) > 0 {
		if r.Risk.InstancesCounted {
			add("| config | status | compiled output | instances |\n|---|---|---|---|\n")
		} else {
			add("| config | status | compiled output |\n|---|---|---|\n")
		}
		for _, g := range groups {
			row := fmt.Sprintf("| %s | %s | %s |", g.names(mdCode), g[0].Status, mdCell(g[0].outline()))
			if r.Risk.InstancesCounted {
				row += fmt.Sprintf(" %d |", g.instances())
			}
			add("%s\n", row)
		}
		add("\n")
	}
	if len(r.Errors) > 0 {
		add("### Errors at head\n\n| location | error | |\n|---|---|---|\n")
		for _, f := range r.Errors {
			note := "new"
			if f.PreExisting {
				note = "pre-existing"
			}
			msg := mdCell(fmt.Sprintf("%s [%s]", f.Message, f.ID))
			if f.Fix != "" {
				msg += "<br>fix: " + mdCell(f.Fix)
			}
			add("| %s | %s | %s |\n", mdCode(fmt.Sprintf("%s:%d:%d", f.File, f.Line, f.Column)), msg, note)
		}
		add("\n")
	}
	if len(r.Namespaces) > 0 {
		add("### Namespaces touched\n\n| namespace | owners | consistency | imports configs from | configs |\n|---|---|---|---|---|\n")
		for _, n := range r.Namespaces {
			add("| %s | %s | %s | %s | %d |\n", mdCode(n.Name), mdCell(strings.Join(n.Owners, ", ")), n.Consistency, mdCell(importsFrom(n)), len(n.Configs))
		}
		add("\n")
	}
	if len(r.Undeclared) > 0 {
		add("### Not compiled\n\n")
		for _, d := range r.Undeclared {
			add("- ⚠️ %s holds CUE files but is no namespace in `cuecast.cue` and no config imports it, so nothing in it is compiled; declare it if it holds configs\n", mdCode(d+"/"))
		}
		add("\n")
	}
	if len(r.Bindings) > 0 {
		add("### Typed bindings\n\n")
		for _, c := range r.Bindings {
			add("- ⚠️ %s: %s\n", mdCode(c.Namespace), c.summary())
		}
		add("\n")
	}
	if a := r.analysisMarkdown(); a != "" {
		add("%s", a)
	}
	first := true
	for _, g := range groups {
		cc := g[0]
		lines := cc.diffLines()
		if len(lines) == 0 {
			continue
		}
		if first {
			add("### Compiled diffs\n\n")
			first = false
		}
		if len(lines) > maxDiffLines {
			n := len(lines) - maxDiffLines
			lines = append(lines[:maxDiffLines:maxDiffLines], fmt.Sprintf("… %d more line(s); run cuecast check locally for all of them", n))
		}
		body := fence(lines)
		if len(lines) > collapseAfter {
			add("<details><summary>%s %s: %d paths</summary>\n\n%s\n</details>\n\n", g.names(func(s string) string { return "<code>" + htmlEscape(s) + "</code>" }), cc.Status, len(cc.Diff), body)
		} else {
			add("#### %s %s\n\n%s\n", g.names(mdCode), cc.Status, body)
		}
	}
	// Last, so it is the first section left out of a comment too long.
	if o := OriginsMarkdown(r.Origins, limit); o != "" {
		add("%s", o)
	}
	return fit(blocks, limit)
}

// groupAfter is how many configs with the same status and the same diff
// the Markdown report shows one by one; more are one row and one diff: a
// library change that alters 334 configs alike is one line, not 334.
const groupAfter = 3

// configGroup is configs whose change reads the same.
type configGroup []ConfigChange

// names lists a group's configs, the first few by name and the rest as a
// count.
func (g configGroup) names(code func(string) string) string {
	if len(g) == 1 {
		return code(g[0].title())
	}
	var s []string
	for _, cc := range g[:min(len(g), groupAfter)] {
		s = append(s, code(cc.title()))
	}
	out := strings.Join(s, ", ")
	if len(g) > groupAfter {
		out += fmt.Sprintf(" and %d more", len(g)-groupAfter)
	}
	return fmt.Sprintf("%d configs: %s", len(g), out)
}

// instances adds up the instances counted on a group's configs.
func (g configGroup) instances() int {
	n := 0
	for _, cc := range g {
		if cc.Instances != nil {
			n += *cc.Instances
		}
	}
	return n
}

// groups gathers configs with the same status and the same diff, when there
// are more than groupAfter of them, at the place of their first config;
// smaller groups stay one config each, in the report's order.
func (r *Report) groups() []configGroup {
	key := func(cc ConfigChange) string {
		k := string(cc.Status) + "\x00" + strings.Join(cc.diffLines(), "\n")
		if cc.From != "" {
			k += "\x00" + string(cc.Config) // a rename is its own line
		}
		return k
	}
	byKey := make(map[string]configGroup)
	keys := make([]string, len(r.Configs))
	for i, cc := range r.Configs {
		keys[i] = key(cc)
		byKey[keys[i]] = append(byKey[keys[i]], cc)
	}
	var out []configGroup
	done := make(map[string]bool)
	for i, cc := range r.Configs {
		g := byKey[keys[i]]
		switch {
		case len(g) <= groupAfter:
			out = append(out, configGroup{cc})
		case !done[keys[i]]:
			done[keys[i]] = true
			out = append(out, g)
		}
	}
	return out
}

// fit joins blocks while they fit in limit bytes, keeping room for the
// truncation note.
func fit(blocks []string, limit int) string {
	total := 0
	for _, b := range blocks {
		total += len(b)
	}
	if total <= limit {
		return strings.Join(blocks, "")
	}
	note := func(n int) string {
		return fmt.Sprintf("\n\n> [!NOTE]\n> This report was truncated to fit GitHub's size limit: %d more part(s) left out. Run `cuecast check` locally, or read the check run, for everything.\n", n)
	}
	budget := limit - len(note(len(blocks)))
	var b strings.Builder
	i := 0
	for ; i < len(blocks) && b.Len()+len(blocks[i]) <= budget; i++ {
		b.WriteString(blocks[i])
	}
	b.WriteString(note(len(blocks) - i))
	return b.String()
}

// fence puts lines in a ```diff block whose fence is longer than any run of
// backticks inside, so values cannot close it.
func fence(lines []string) string {
	body := strings.Join(lines, "\n")
	n, run := 3, 0
	for _, c := range body {
		if c == '`' {
			run++
			n = max(n, run+1)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", n)
	return f + "diff\n" + body + "\n" + f + "\n"
}

func (rv Revision) describe() string {
	if rv.Rev == rv.Commit || rv.Rev == "" {
		return cuecast.ShortCommit(rv.Commit)
	}
	return fmt.Sprintf("%s (%s)", rv.Rev, cuecast.ShortCommit(rv.Commit))
}

func (r *Report) verdict() string {
	switch {
	case r.Risk.NewErrors > 0:
		return fmt.Sprintf("❌ %d new error(s) at head", r.Risk.NewErrors)
	case r.Risk.Reshuffles > 0:
		return fmt.Sprintf("❌ %d flag rollout(s) move more users than their weights require", r.Risk.Reshuffles)
	case r.Risk.PreExisting > 0:
		return fmt.Sprintf("✅ no new errors (%d pre-existing)", r.Risk.PreExisting)
	default:
		return "✅ valid"
	}
}

func (r *Report) headline() string {
	if len(r.ChangedFiles) == 0 {
		return "no files changed"
	}
	s := fmt.Sprintf("%d config(s) change in %d namespace(s); %d compiled", r.Risk.Configs, r.Risk.Namespaces, r.Risk.Compiled)
	if r.Risk.Variants > 0 {
		s += fmt.Sprintf("; %d variants, %d distinct outputs", r.Risk.Variants, r.Risk.DistinctOutputs)
	}
	if r.Risk.InstancesCounted {
		verb := "run"
		if *r.Risk.Instances == 1 {
			verb = "runs"
		}
		s += fmt.Sprintf("; %s %s them", plural(*r.Risk.Instances, "instance"), verb)
	}
	if r.Everything {
		s += " (the manifest or cue.mod changed: every config)"
	}
	return s
}

func levelMark(level string) string {
	switch level {
	case "high":
		return "🔴"
	case "medium":
		return "🟡"
	default:
		return "🟢"
	}
}

// riskLines are the risk summary's items; code formats a path or name.
// maxRiskItems is how many configs or changes one risk line names before
// it gives the rest as a count: a wide change must not bury the report.
const maxRiskItems = 10

func (r *Report) riskLines(code func(string) string) []string {
	var out []string
	if len(r.Risk.Strict) > 0 {
		s := make([]string, 0, maxRiskItems)
		for _, p := range r.Risk.Strict[:min(len(r.Risk.Strict), maxRiskItems)] {
			s = append(s, code(string(p)))
		}
		if more := len(r.Risk.Strict) - len(s); more > 0 {
			s = append(s, fmt.Sprintf("and %d more", more))
		}
		out = append(out, fmt.Sprintf("strict consistency (%d): %s", len(r.Risk.Strict), strings.Join(s, ", ")))
	}
	for _, l := range r.Risk.Libraries {
		s := fmt.Sprintf("library %s reaches %d config(s), %d output(s) change", code(l.Dir), len(l.Configs), l.Changes)
		if l.Wide {
			s += " (wide)"
		}
		out = append(out, s)
	}
	for i, b := range r.Risk.Breaking {
		if i == maxRiskItems {
			out = append(out, fmt.Sprintf("breaking: and %d more", len(r.Risk.Breaking)-i))
			break
		}
		if b.Path == "" {
			out = append(out, fmt.Sprintf("breaking: %s: %s", code(string(b.Config)), b.Reason))
		} else {
			out = append(out, fmt.Sprintf("breaking: %s %s: %s", code(string(b.Config)), code(b.Path), b.Reason))
		}
	}
	if n := len(r.Risk.NewFields); n > 0 {
		s := make([]string, 0, maxRiskItems)
		for _, b := range r.Risk.NewFields[:min(n, maxRiskItems)] {
			s = append(s, code(string(b.Config))+" "+code(b.Path))
		}
		if n > maxRiskItems {
			s = append(s, fmt.Sprintf("and %d more", n-maxRiskItems))
		}
		out = append(out, fmt.Sprintf("new field(s), which services decoding strictly reject until they know them: %s", strings.Join(s, ", ")))
	}
	for _, f := range r.Risk.FlagRollouts {
		s := fmt.Sprintf("flag %s %s %s: %s of users change variant (the weights require %s)",
			code(string(f.Config)), code(f.Flag), f.Where, pct(f.Changed), pct(f.Required))
		switch {
		case f.Reshuffled && f.Intended:
			s += "; a reshuffle, meant (reshuffle: true)"
		case f.Reshuffled && f.Resalted:
			s += "; the salt or bucketBy changed, so every user is bucketed anew: keep them, or set reshuffle: true on the flag"
		case f.Reshuffled:
			s += "; reshuffled: keep the variants' order in the weights (grow one share at the others' end), or set reshuffle: true on the flag"
		}
		out = append(out, s)
	}
	if r.Risk.NewErrors > 0 {
		out = append(out, fmt.Sprintf("%d new error(s) at head", r.Risk.NewErrors))
	}
	return out
}

func (cc ConfigChange) title() string {
	if cc.From != "" {
		return fmt.Sprintf("%s ← %s", cc.Config, cc.From)
	}
	return string(cc.Config)
}

// plural is n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// outline is the one-cell summary of a config's change.
func (cc ConfigChange) outline() string {
	switch cc.Status {
	case StatusChanged:
		breaking := 0
		for _, d := range cc.Diff {
			if d.Breaking {
				breaking++
			}
		}
		if breaking > 0 {
			return fmt.Sprintf("%d path(s), %d breaking", len(cc.Diff), breaking)
		}
		return fmt.Sprintf("%d path(s)", len(cc.Diff))
	case StatusAdded, StatusFixed:
		return fmt.Sprintf("%d field(s)", len(cc.Diff))
	case StatusRemoved:
		return "gone"
	case StatusRenamed:
		return "moved, same output"
	case StatusUnchanged:
		return "same bytes"
	default:
		if cc.Errors == 0 {
			return "does not compile (see the errors)"
		}
		return fmt.Sprintf("%d error(s)", cc.Errors)
	}
}

// diffLines renders the diff one path per line: "- path: old", "+ path:
// new", a changed value as both.
func (cc ConfigChange) diffLines() []string {
	var out []string
	for _, d := range cc.Diff {
		mark := ""
		if d.Breaking {
			mark = "  # breaking"
		}
		if d.NewField {
			mark = "  # new field"
		}
		switch d.Op {
		case OpAdded:
			out = append(out, fmt.Sprintf("+ %s: %s%s", d.Path, clip(d.New), mark))
		case OpRemoved:
			out = append(out, fmt.Sprintf("- %s: %s%s", d.Path, clip(d.Old), mark))
		default:
			out = append(out, fmt.Sprintf("- %s: %s%s", d.Path, clip(d.Old), mark), fmt.Sprintf("+ %s: %s", d.Path, clip(d.New)))
		}
	}
	return out
}

// clip shortens a value to maxValue characters without splitting one.
func clip(raw json.RawMessage) string {
	s := string(raw)
	if utf8.RuneCountInString(s) <= maxValue {
		return s
	}
	n := 0
	for i := range s {
		if n == maxValue {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

func mdCode(s string) string {
	if strings.Contains(s, "`") {
		return "<code>" + htmlEscape(s) + "</code>"
	}
	return "`" + s + "`"
}

// mdCell makes s safe inside a table cell: HTML escaped, one line, pipes
// escaped.
func mdCell(s string) string {
	s = htmlEscape(strings.ReplaceAll(s, "\r", ""))
	s = strings.ReplaceAll(s, "\n", "<br>")
	return strings.ReplaceAll(s, "|", `\|`)
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// importsFrom says which other namespaces' configs a namespace may import.
func importsFrom(n Namespace) string {
	if len(n.ImportConfigsFrom) == 0 {
		return "none (own namespace only)"
	}
	return strings.Join(n.ImportConfigsFrom, ", ")
}

// pct is a share of users as a percentage with one decimal.
func pct(x float64) string { return fmt.Sprintf("%.1f%%", x*100) }
