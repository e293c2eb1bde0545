package compiler

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/scanner"
	"cuelang.org/go/cue/token"

	"github.com/cuecast/cuecast"
)

// MaxFileSize caps one .cue file. Anything bigger is generated data that
// makes every compile slow and every review unreadable.
const MaxFileSize = 4 << 20

// repoTree is what the walk learns about the repo without reading every file:
// where the .cue files are, and which entries are symlinks that cannot be used.
type repoTree struct {
	// dirs maps a slash directory ("." for the root) to its .cue files (full
	// slash paths, sorted). Files CUE ignores (names starting with '_' or
	// '.') are left out, so a directory holding only such files is no
	// package and no config, as for cue itself.
	dirs map[string][]string
	// cueFiles counts the files in dirs.
	cueFiles int
	// data maps a directory to its other regular files: the ones a package
	// there may embed with @embed. Only names are listed; a file is read
	// when a package that declares @extern(embed) needs it.
	data map[string][]string
	// modFiles are the files under cue.mod/ (all of them: module.cue and any
	// vendored packages).
	modFiles []string
	errs     []Error
	// bad holds files rejected by a file lint; a config whose packages
	// include one of them is not compiled.
	bad map[string]bool
	// symlinkDirs are symlinks to directories inside the repo. The walk
	// does not follow them (neither does this compiler's loader).
	symlinkDirs []symlinkDir
	// links maps a symlinked file that is read (a .cue file, or one a
	// package may embed) to the file it finally resolves to: a change to
	// the target is a change to every config reading the link.
	links map[string]string
}

type symlinkDir struct{ link, target string }

func resolveLink(rl fs.ReadLinkFS, p string) string {
	target, err := rl.ReadLink(p)
	if err != nil {
		return ""
	}
	return path.Join(path.Dir(p), target)
}

// symlinkDirErrors reports the symlinked directories that could hide
// configs or packages: those below a namespace directory and those whose
// target holds .cue files. A link such as docs/latest -> v2 is left alone.
func (t *repoTree) symlinkDirErrors(namespaces map[string]Namespace) []Error {
	var errs []Error
	for _, s := range t.symlinkDirs {
		ns, _, _ := strings.Cut(s.link, "/")
		_, inNamespace := namespaces[ns]
		hasCUE := false
		for dir := range t.dirs {
			if under(dir, s.target) && s.target != "." {
				hasCUE = true
				break
			}
		}
		if inNamespace || hasCUE {
			errs = append(errs, Error{File: s.link, Line: 1, Column: 1, ID: IDFileSymlinkDir,
				Message: fmt.Sprintf("symlinked directory %s (-> %s) is not followed; its CUE files would be invisible", s.link, s.target),
				Fix:     fixFor(IDFileSymlinkDir)})
		}
	}
	return errs
}

// walkRepo lists the repo. It skips .git and the directories CUE itself
// ignores (names starting with '.' or '_'), checks symlinks, and never reads
// file contents.
func walkRepo(fsys fs.FS) (*repoTree, error) {
	t := &repoTree{dirs: make(map[string][]string), data: make(map[string][]string), bad: make(map[string]bool), links: make(map[string]string)}
	rl, canReadLink := fsys.(fs.ReadLinkFS)
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		name := d.Name()
		if p != "." && d.IsDir() && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return fs.SkipDir
		}
		if d.IsDir() {
			if name == "cue.mod" && p != "cue.mod" {
				return fs.SkipDir // a nested module is not part of this one
			}
			return nil
		}
		inMod := p == "cue.mod" || strings.HasPrefix(p, "cue.mod/")
		// CUE ignores files whose names start with '_' or '.', whatever
		// package they declare.
		isCUE := strings.HasSuffix(name, ".cue") && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".")
		// The symlink rule, the same for compile, check and the tailer
		// (they all list the repo here; configs-example/README.md states
		// it for authors): a symlink is judged only where CUE would read
		// it. A link named like a CUE file, or under cue.mod/, must resolve
		// to a file inside the repo and is then read like one; a link to a
		// directory is never followed (`cue export ./...` does not follow
		// one either) and is an error where it could hide configs or
		// packages (symlinkDirErrors); any other link is not CUE and is
		// left alone, dangling or not, except that a package may embed it
		// when it resolves inside the repo.
		relevant := inMod || isCUE
		if d.Type()&fs.ModeSymlink != 0 {
			ok, isDir, id, msg := checkSymlink(fsys, rl, canReadLink, p)
			switch {
			case !ok && relevant:
				t.reject(Error{File: p, Line: 1, Column: 1, ID: id, Message: msg})
				return nil
			case !ok:
				return nil
			case isDir:
				// Judged once the namespaces are known; see symlinkDirErrors.
				t.symlinkDirs = append(t.symlinkDirs, symlinkDir{p, resolveLink(rl, p)})
				return nil
			}
			t.links[p] = finalTarget(rl, p)
		} else if !d.Type().IsRegular() {
			return nil
		}
		if inMod {
			t.modFiles = append(t.modFiles, p)
			return nil
		}
		dir := path.Dir(p)
		if !isCUE {
			if !strings.HasSuffix(name, ".cue") {
				t.data[dir] = append(t.data[dir], p)
			}
			return nil
		}
		t.dirs[dir] = append(t.dirs[dir], p)
		t.cueFiles++
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, fs := range t.dirs {
		slices.Sort(fs)
	}
	for _, fs := range t.data {
		slices.Sort(fs)
	}
	return t, nil
}

func (t *repoTree) reject(e Error) {
	e.Fix = fixFor(e.ID)
	t.errs = append(t.errs, e)
	t.bad[e.File] = true
}

// finalTarget follows the symlink at p, hop by hop, to the file it names
// (checkSymlink has made sure the chain ends inside the repo).
func finalTarget(rl fs.ReadLinkFS, p string) string {
	for range 40 {
		next := resolveLink(rl, p)
		if next == "" {
			return p
		}
		p = next
		if fi, err := rl.Lstat(p); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return p
		}
	}
	return p
}

// checkSymlink reports whether the symlink at p resolves inside the repo and
// whether it names a directory; when it does not, the lint ID and message
// say why (outside the repo, dangling, a loop). Without fs.ReadLinkFS the
// target cannot be checked, so the link is refused rather than trusted.
// The file systems Compile reads (os.Root, gitfs) refuse links leaving the
// tree at any hop, which is what makes following a link safe.
func checkSymlink(fsys fs.FS, rl fs.ReadLinkFS, canReadLink bool, p string) (ok, isDir bool, id, msg string) {
	if !canReadLink {
		return false, false, IDFileSymlinkEscape, fmt.Sprintf("symlink %s cannot be resolved in this file system", p)
	}
	target, err := rl.ReadLink(p)
	if err != nil {
		return false, false, IDFileSymlinkBroken, fmt.Sprintf("symlink %s: %v", p, err)
	}
	outside := fmt.Sprintf("symlink %s points outside the repo (%s)", p, target)
	if path.IsAbs(target) || strings.HasPrefix(target, "/") {
		return false, false, IDFileSymlinkEscape, outside
	}
	resolved := path.Join(path.Dir(p), target)
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return false, false, IDFileSymlinkEscape, outside
	}
	fi, err := fs.Stat(fsys, p)
	switch {
	case err == nil:
		if real, ok := realPath(rl, p); !ok || hidden(real) {
			// Inside the repo, but where the compiler reads nothing:
			// .git above all, whose config can hold a CI token.
			return false, false, IDFileSymlinkEscape, fmt.Sprintf("symlink %s (-> %s) leads into a hidden path (%s), which the compiler does not read", p, target, real)
		}
		return true, fi.IsDir(), "", ""
	case strings.Contains(err.Error(), "leaves the tree") || strings.Contains(err.Error(), "escapes"):
		// A chain of links whose last hop leaves the repo.
		return false, false, IDFileSymlinkEscape, fmt.Sprintf("symlink %s (-> %s) leads outside the repo", p, target)
	case errors.Is(err, fs.ErrNotExist):
		return false, false, IDFileSymlinkBroken, fmt.Sprintf("symlink %s is dangling: %s does not exist", p, resolved)
	case strings.Contains(err.Error(), "too many levels of symbolic links"):
		return false, false, IDFileSymlinkBroken, fmt.Sprintf("symlink %s (-> %s) is part of a loop of symlinks", p, target)
	default:
		return false, false, IDFileSymlinkBroken, fmt.Sprintf("symlink %s (-> %s) cannot be resolved: %v", p, target, err)
	}
}

// realPath resolves p through every symlink on its way, component by
// component (a link to a directory in the middle too), as the file system
// will when it is read. ok is false when it cannot be resolved inside the
// tree.
func realPath(rl fs.ReadLinkFS, p string) (string, bool) {
	todo := strings.Split(p, "/")
	var done []string
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", false
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		fi, err := rl.Lstat(cur)
		if err != nil {
			return "", false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		target, err := rl.ReadLink(cur)
		if hops++; err != nil || hops > 40 || path.IsAbs(target) {
			return "", false
		}
		// Relative to the link's directory, which done is.
		todo = append(strings.Split(target, "/"), todo...)
	}
	return path.Join(done...), true
}

// hidden reports whether a repo path has a component starting with a dot:
// discovery skips those (.git, .github, editors' files), so nothing may
// reach them through a link either.
func hidden(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		if strings.HasPrefix(c, ".") && c != "." && c != ".." {
			return true
		}
	}
	return false
}

// readFile reads one .cue file and applies the file lints. It returns nil
// contents when the file is rejected.
func readFile(fsys fs.FS, p string) ([]byte, *Error, error) {
	b, lint, err := readLimited(fsys, p)
	if b == nil {
		return nil, lint, err
	}
	if !utf8.Valid(b) {
		line, col := firstInvalidUTF8(b)
		return nil, &Error{File: p, Line: line, Column: col, ID: IDFileNotUTF8,
			Message: "file is not valid UTF-8"}, nil
	}
	return b, nil, nil
}

// readData reads a file a package may embed. Only the size limit applies:
// embedded data need not be text.
func readData(fsys fs.FS, p string) ([]byte, *Error, error) {
	return readLimited(fsys, p)
}

// readLimited reads p unless it is over MaxFileSize. It opens the file once
// and takes the size from the open file, so a Git-backed file system looks
// the object up once and never reads a blob that is too large.
func readLimited(fsys fs.FS, p string) ([]byte, *Error, error) {
	tooLarge := func(n int64) *Error {
		return &Error{File: p, Line: 1, Column: 1, ID: IDFileTooLarge,
			Message: fmt.Sprintf("file is %d bytes, over the %d-byte limit", n, MaxFileSize)}
	}
	f, err := fsys.Open(p)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if fi.Size() > MaxFileSize {
		return nil, tooLarge(fi.Size()), nil
	}
	// Read one byte past the limit, in case the file grew since Stat.
	b := make([]byte, 0, max(fi.Size(), 0)+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > MaxFileSize {
			return nil, tooLarge(int64(len(b))), nil
		}
		if err == io.EOF {
			return b, nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", p, err)
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, min(len(b), MaxFileSize+1-len(b)))
		}
	}
}

// firstInvalidUTF8 returns the 1-based line and byte column of the first
// byte that is not part of valid UTF-8.
func firstInvalidUTF8(b []byte) (line, col int) {
	line = 1
	lineStart := 0
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return line, i - lineStart + 1
		}
		if b[i] == '\n' {
			line++
			lineStart = i + 1
		}
		i += size
	}
	return line, 1
}

// header is what the compiler needs from a file before loading it: its
// package name, its imports, whether a build attribute (@if) leaves it out
// and whether it embeds files. Parse errors are left for the loader, which
// reports them with positions.
type header struct {
	pkg     string
	imports []string
	// importAt holds the line and column of each import.
	importAt [][2]int
	// excluded is set when the file's build attribute (buildAttr) is
	// false or @ignore(). Compile sets no build tags, so @if(prod)
	// excludes a file as it does for a plain `cue export`; the loader
	// skips the file and so does every check made before loading (one
	// package per directory, the wrapper's package).
	excluded bool
	// ifNames are the build tag names the file's build attribute reads,
	// in order: the values of dimensions a config may vary along
	// (docs/VARIANTS.md).
	ifNames []string
	// embeds is set by @extern(embed): the package may read other files
	// of its directory with @embed.
	embeds bool
}

func parseHeader(name string, src []byte) header {
	if h, ok := scanHeader(name, src); ok {
		return h
	}
	return parseHeaderAST(name, src)
}

// parseHeaderAST is parseHeader through the parser, for any header.
func parseHeaderAST(name string, src []byte) header {
	f, err := parser.ParseFile(name, src, parser.ImportsOnly)
	if err != nil && f == nil {
		return header{}
	}
	h := header{pkg: f.PackageName()}
	h.excluded, h.ifNames = buildAttr(f.Decls)
	// File attributes come before the package clause; the CUE runtime
	// reads @extern only there.
	for _, d := range f.Decls {
		if _, ok := d.(*ast.Package); ok {
			break
		}
		if a, ok := d.(*ast.Attribute); ok && a.Name() == "extern" {
			h.embeds = h.embeds || externEmbed(a)
		}
	}
	for spec := range f.ImportSpecs() {
		if p, ok := importPath(spec); ok {
			h.imports = append(h.imports, p)
			pos := spec.Pos()
			h.importAt = append(h.importAt, [2]int{pos.Line(), pos.Column()})
		}
	}
	return h
}

// scanHeader reads a header with the CUE scanner alone, without building
// and resolving a syntax tree: the plan of a check reads every file's
// header, and the parser took most of that time (BENCHMARKS.md,
// Compiler). It accepts only a header written the plain way (attributes,
// a package clause, import declarations, each ended by a comma or a
// newline) and reports ok false for anything else, which parseHeader then
// parses; TestScanHeaderAgrees holds the two to the same answer.
func scanHeader(name string, src []byte) (h header, ok bool) {
	var s scanner.Scanner
	bad := false
	s.Init(token.NewFile(name, 0, len(src)), src, func(token.Pos, string, []any) { bad = true }, 0)
	pos, tok, lit := s.Scan()
	next := func() { pos, tok, lit = s.Scan() }
	// endDecl consumes the comma (or newline) ending a declaration.
	endDecl := func() bool {
		switch tok {
		case token.COMMA:
			next()
			return true
		case token.EOF:
			return true
		}
		return false
	}
	// attrs reads attributes; build is set before the package clause,
	// where an @if selects the file (buildAttr) and @extern counts.
	seenIf := false
	attrs := func(build bool) bool {
		for tok == token.ATTRIBUTE {
			key, body := (&ast.Attribute{Text: lit}).Split()
			switch key {
			case "if":
				if !build {
					break
				}
				included, ok := buildTagsTrue(body)
				if !ok || seenIf {
					return false
				}
				seenIf = true
				h.excluded = !included
				h.ifNames = ifIdents(body)
			case "ignore":
				if build {
					return false
				}
			case "extern":
				if build {
					h.embeds = h.embeds || externEmbed(&ast.Attribute{Text: lit})
				}
			case "experiment":
				return false // changes how the file parses
			}
			next()
			if !endDecl() {
				return false
			}
		}
		return true
	}
	spec := func() bool {
		at := pos // a named import starts at its name, as ast.ImportSpec.Pos

		if tok == token.IDENT {
			next()
		}
		if tok != token.STRING {
			return false
		}
		p, ok := importPath(&ast.ImportSpec{Path: &ast.BasicLit{Value: lit}})
		if !ok || !strings.HasPrefix(lit, "\"") {
			return false
		}
		h.imports = append(h.imports, p)
		h.importAt = append(h.importAt, [2]int{at.Line(), at.Column()})
		next()
		return tok == token.COMMA
	}
	if !attrs(true) {
		return header{}, false
	}
	if tok == token.IDENT && lit == "package" {
		next()
		if tok != token.IDENT || lit == "_" || strings.HasPrefix(lit, "#") || strings.HasPrefix(lit, "_#") {
			return header{}, false
		}
		h.pkg = lit
		next()
		if !endDecl() || !attrs(false) {
			return header{}, false
		}
	}
	for tok == token.IDENT && lit == "import" {
		next()
		if tok != token.LPAREN {
			if !spec() {
				return header{}, false
			}
			next()
			continue
		}
		next()
		for tok != token.RPAREN {
			if !spec() {
				return header{}, false
			}
			next()
		}
		next()
		if !endDecl() {
			return header{}, false
		}
	}
	return h, !bad
}

// buildTagsTrue evaluates the expression of an @if attribute with no build
// tag set, as Compile sets none: a tag name is false, and !, && and ||
// combine as in CUE. ok is false for an expression it cannot read; the
// file is then kept and the loader reports what is wrong with it.
func buildTagsTrue(expr string) (value, ok bool) {
	x, err := parser.ParseExpr("@if", expr)
	if err != nil {
		return false, false
	}
	var eval func(ast.Expr) (bool, bool)
	eval = func(x ast.Expr) (bool, bool) {
		switch x := x.(type) {
		case *ast.Ident:
			return false, true
		case *ast.ParenExpr:
			return eval(x.X)
		case *ast.UnaryExpr:
			if x.Op != token.NOT {
				return false, false
			}
			v, ok := eval(x.X)
			return !v, ok
		case *ast.BinaryExpr:
			l, ok1 := eval(x.X)
			r, ok2 := eval(x.Y)
			switch x.Op {
			case token.LAND:
				return l && r, ok1 && ok2
			case token.LOR:
				return l || r, ok1 && ok2
			}
		}
		return false, false
	}
	return eval(x)
}

// ifIdents returns the tag names an @if expression reads, in order.
func ifIdents(expr string) []string {
	x, err := parser.ParseExpr("@if", expr)
	if err != nil {
		return nil
	}
	var out []string
	ast.Walk(x, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			out = append(out, id.Name)
		}
		return true
	}, nil)
	return out
}

func importPath(spec *ast.ImportSpec) (string, bool) {
	if spec == nil || spec.Path == nil {
		return "", false
	}
	s := spec.Path.Value
	if len(s) < 2 {
		return "", false
	}
	s = s[1 : len(s)-1]
	// "example.com/configs/lib:net" names the package explicitly; the
	// directory is the part before the colon.
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	return s, s != ""
}

// configPathOf reports whether dir holds a config, that is, lies below a
// declared namespace directory, and the config's path if so. The path may
// still have invalid segments; the caller validates it.
func configPathOf(dir string, namespaces map[string]Namespace) (cuecast.ConfigPath, bool) {
	ns, rest, found := strings.Cut(dir, "/")
	if !found || rest == "" {
		return "", false
	}
	if _, ok := namespaces[ns]; !ok {
		return "", false
	}
	return cuecast.ConfigPath(dir), true
}

// ancestors returns dir's ancestors from the root down, excluding dir and
// excluding the root itself (whose .cue files are the manifest).
func ancestors(dir string) []string {
	var out []string
	for d := path.Dir(dir); d != "." && d != "/"; d = path.Dir(d) {
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	return dir == "." || p == dir || strings.HasPrefix(p, dir+"/")
}
