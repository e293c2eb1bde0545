package client

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
)

// decodePointer decodes the Pointer JSON of a pointer message into p.
// Every instance decodes every pointer, and encoding/json was the largest
// part of an instance's work per apply (BENCHMARKS.md, "Distribution"). So
// the encoding the distributor writes (encoding/json's own: no whitespace,
// no escapes in these fields, known keys) is read directly, and anything
// else falls back to encoding/json, which stays the definition of what is
// accepted. It reads the header's string as it is: the pointer's strings
// are substrings of it, not copies. p is written through, not returned, so
// that the watcher's frames stay small (stack_test.go).
func decodePointer(p *cuecast.Pointer, b string) error {
	if scanPointer(p, b) {
		return nil
	}
	return decodePointerJSON(p, b)
}

// decodePointerJSON is decodePointer's fallback, out of line: its pointer
// escapes to encoding/json, and only this copy of it need be on the heap.
func decodePointerJSON(p *cuecast.Pointer, b string) error {
	var q cuecast.Pointer
	err := json.Unmarshal([]byte(b), &q)
	*p = q
	return err
}

// scanPointer reads a flat object of the Pointer's keys into p, which it
// zeroes first; ok is false for anything it does not handle, to be left to
// encoding/json.
func scanPointer(p *cuecast.Pointer, b string) (ok bool) {
	*p = cuecast.Pointer{}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	s := scanner{b: b, i: 1}
	if s.peek() == '}' {
		return s.i == len(b)-1
	}
	for {
		key, ok := s.str()
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		switch key {
		case "config":
			v, ok := s.str()
			if !ok {
				return false
			}
			p.Config = cuecast.ConfigPath(v)
		case "rev":
			if p.Revision, ok = s.uint(); !ok {
				return false
			}
		case "version":
			if p.Version, ok = s.uint(); !ok {
				return false
			}
		case "seq":
			if p.Seq, ok = s.uint(); !ok {
				return false
			}
		case "size":
			n, ok := s.uint()
			if !ok || n > 1<<62 {
				return false
			}
			p.Size = int64(n)
		case "subject", "checksum", "commit", "rollout", "reason", "sig":
			v, ok := s.str()
			if !ok {
				return false
			}
			switch key {
			case "subject":
				p.Subject = v
			case "checksum":
				p.Checksum = v
			case "commit":
				p.Commit = v
			case "rollout":
				p.Rollout = v
			case "reason":
				p.Reason = v
			case "sig":
				p.Signature = v
			}
		case "deleted":
			if p.Deleted, ok = s.bool(); !ok {
				return false
			}
		case "inline":
			if p.Inline, ok = s.bool(); !ok {
				return false
			}
		case "rollback":
			if p.Rollback, ok = s.bool(); !ok {
				return false
			}
		case "set_at":
			start := s.i
			v, ok := s.str()
			if !ok {
				return false
			}
			if p.SetAt, ok = utcTime(v); ok {
				break
			}
			// UnmarshalJSON, not time.Parse: it is what encoding/json
			// accepts. The copy stays on the stack.
			var buf [64]byte
			if p.SetAt.UnmarshalJSON(append(buf[:0], b[start:s.i]...)) != nil {
				return false
			}
		default:
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			return s.i == len(b)-1
		default:
			return false
		}
	}
}

// utcTime reads the one form of time the distributor writes,
// 2006-01-02T15:04:05.999999999Z (UTC, no more than nine decimals), as
// UnmarshalJSON would, without its general layout parser (a microsecond of
// every instance's work per pointer in a fleet's profile); ok is false for
// anything else, including values out of range, which are left to it.
func utcTime(v string) (t time.Time, ok bool) {
	if len(v) < 20 || len(v) > 30 || v[len(v)-1] != 'Z' ||
		v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' {
		return t, false
	}
	num := func(s string) int {
		n := 0
		for i := range len(s) {
			c := s[i]
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(v[0:4]), num(v[5:7]), num(v[8:10])
	hour, minute, sec := num(v[11:13]), num(v[14:16]), num(v[17:19])
	nsec := 0
	if frac := v[19 : len(v)-1]; frac != "" {
		if frac[0] != '.' || len(frac) < 2 {
			return t, false
		}
		if nsec = num(frac[1:]); nsec < 0 {
			return t, false
		}
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 ||
		minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return t, false
	}
	// The last day of the month: day 0 of the next one.
	if day > 28 && day > time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return t, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

type scanner struct {
	b string
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str reads a string of printable ASCII without escapes (encoding/json
// would rewrite invalid UTF-8, so anything else is left to it).
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	end := strings.IndexByte(s.b[s.i+1:], '"')
	if end < 0 {
		return "", false
	}
	v := s.b[s.i+1 : s.i+1+end]
	for i := range len(v) {
		if c := v[i]; c == '\\' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	s.i += end + 2
	return v, true
}

// uint reads a JSON number that is a non-negative integer.
func (s *scanner) uint() (uint64, bool) {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	digits := s.b[start:s.i]
	if len(digits) == 0 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

func (s *scanner) bool() (bool, bool) {
	switch {
	case strings.HasPrefix(s.b[s.i:], "true"):
		s.i += 4
		return true, true
	case strings.HasPrefix(s.b[s.i:], "false"):
		s.i += 5
		return false, true
	}
	return false, false
}
