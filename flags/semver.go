package flags

// version is a parsed semantic version (semver.org 2.0.0); pre is the
// pre-release part without its "-", build metadata is dropped. A leading
// "v" is accepted.
type version struct {
	major, minor, patch uint64
	pre                 string
}

// parseVersion parses s without allocating.
func parseVersion(s string) (version, bool) {
	var v version
	if len(s) > 0 && s[0] == 'v' {
		s = s[1:]
	}
	var ok bool
	if v.major, s, ok = num(s); !ok || len(s) == 0 || s[0] != '.' {
		return v, false
	}
	if v.minor, s, ok = num(s[1:]); !ok || len(s) == 0 || s[0] != '.' {
		return v, false
	}
	if v.patch, s, ok = num(s[1:]); !ok {
		return v, false
	}
	if len(s) > 0 && s[0] == '-' {
		end := len(s)
		for i := 1; i < len(s); i++ {
			if s[i] == '+' {
				end = i
				break
			}
		}
		v.pre, s = s[1:end], s[end:]
		if !identifiers(v.pre) || !noLeadingZero(v.pre) {
			return v, false
		}
	}
	if len(s) > 0 {
		if s[0] != '+' || !identifiers(s[1:]) {
			return v, false
		}
	}
	return v, true
}

// num reads a numeric identifier (no leading zero unless it is "0").
func num(s string) (uint64, string, bool) {
	i := 0
	var n uint64
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if n > (1<<63)/10 {
			return 0, s, false
		}
		n = n*10 + uint64(s[i]-'0')
		i++
	}
	if i == 0 || (i > 1 && s[0] == '0') {
		return 0, s, false
	}
	return n, s[i:], true
}

// identifiers reports whether s is dot-separated non-empty identifiers of
// [0-9A-Za-z-].
func identifiers(s string) bool {
	if s == "" {
		return false
	}
	prev := byte('.')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if prev == '.' {
				return false
			}
		case c == '-', c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		default:
			return false
		}
		prev = c
	}
	return prev != '.'
}

// noLeadingZero reports whether no numeric identifier of pre (a
// pre-release) has a leading zero, which semver.org forbids there (and
// not in build metadata): "1.0.0-01" is no version, where read as one it
// would sit after "1.0.0-1", which is the same number.
func noLeadingZero(pre string) bool {
	for pre != "" {
		var id string
		id, pre = cut(pre)
		if len(id) > 1 && id[0] == '0' && numeric(id) {
			return false
		}
	}
	return true
}

// compareVersions orders a and b by semver precedence: -1, 0 or 1.
func compareVersions(a, b version) int {
	switch {
	case a.major != b.major:
		return cmpU(a.major, b.major)
	case a.minor != b.minor:
		return cmpU(a.minor, b.minor)
	case a.patch != b.patch:
		return cmpU(a.patch, b.patch)
	}
	switch {
	case a.pre == b.pre:
		return 0
	case a.pre == "":
		return 1
	case b.pre == "":
		return -1
	}
	x, y := a.pre, b.pre
	for {
		if x == "" || y == "" {
			switch {
			case x == "" && y == "":
				return 0
			case x == "":
				return -1
			default:
				return 1
			}
		}
		var ix, iy string
		ix, x = cut(x)
		iy, y = cut(y)
		if c := compareIdent(ix, iy); c != 0 {
			return c
		}
	}
}

func cut(s string) (string, string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func compareIdent(a, b string) int {
	an, bn := numeric(a), numeric(b)
	switch {
	case an && bn:
		if len(a) != len(b) {
			return cmpInt(len(a), len(b))
		}
	case an:
		return -1
	case bn:
		return 1
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func numeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func cmpU(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

func cmpInt(a, b int) int {
	if a < b {
		return -1
	}
	return 1
}
