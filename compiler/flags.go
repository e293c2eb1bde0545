package compiler

import (
	"cuelang.org/go/cue"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/flags"
)

// IDFlagInvalid: a flag set (a config whose schema field is flags.Schema)
// that flags.Validate refuses: a weight sum, a variant that does not exist
// or has the wrong type, a missing or cyclic prerequisite. CUE alone
// cannot say these readably; every evaluator would refuse the set, so the
// compile does.
const IDFlagInvalid = "flags/invalid"

// lintFlagSet reports, at the position of each field at fault, what
// flags.Validate finds wrong with v when v is a flag set; b is its
// canonical JSON.
func (c *compilation) lintFlagSet(cfg cuecast.ConfigPath, v cue.Value, b []byte) []Error {
	if s, err := v.LookupPath(cue.ParsePath("schema")).String(); err != nil || s != flags.Schema {
		return nil
	}
	_, err := flags.Compile(b)
	if err == nil {
		return nil
	}
	var fes []*flags.FieldError
	collectFieldErrors(err, &fes)
	if len(fes) == 0 { // not a field of the set: report it at the config
		return []Error{{Config: cfg, File: firstOr(c.tree.dirs[string(cfg)], string(cfg)), Line: 1, Column: 1,
			ID: IDFlagInvalid, Message: err.Error(), Fix: fixFor(IDFlagInvalid)}}
	}
	var out []Error
	for _, fe := range fes {
		e := Error{Config: cfg, ID: IDFlagInvalid, Message: fe.Error(), Fix: fixFor(IDFlagInvalid),
			File: firstOr(c.tree.dirs[string(cfg)], string(cfg)), Line: 1, Column: 1}
		// The field itself, or the nearest parent that exists (a missing
		// field's flag, say).
		for p := cue.ParsePath(fe.Path()); p.Err() == nil && len(p.Selectors()) > 0; p = cue.MakePath(p.Selectors()[:len(p.Selectors())-1]...) {
			if pos := v.LookupPath(p).Pos(); pos.IsValid() {
				e.File, e.Line, e.Column = relFile(pos.Filename()), pos.Line(), pos.Column()
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// collectFieldErrors gathers the *flags.FieldError in err's tree (Compile
// joins one per problem).
func collectFieldErrors(err error, out *[]*flags.FieldError) {
	if fe, ok := err.(*flags.FieldError); ok {
		*out = append(*out, fe)
		return
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			collectFieldErrors(e, out)
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			collectFieldErrors(e, out)
		}
	}
}
