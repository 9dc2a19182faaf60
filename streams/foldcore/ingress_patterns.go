package foldcore

// patternMatchers holds a Go matcher for each pattern the schemas use, keyed
// by the pattern's text. The Python validator searches with the pattern's `$`
// read as end of string (\Z), so no trailing newline is allowed; these
// matchers are exact for that reading. A pattern missing here is not compiled.
var patternMatchers = map[string]func(string) bool{
	`^[A-Za-z0-9][A-Za-z0-9_-]*$`:                                       isToken,
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`: isDNSSubdomain,
	`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`:                                func(s string) bool { return s == "" || isDNSLabel(s) },
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`:                                   isDNSLabel,
}

func isAlnumLower(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }

// isToken: an ASCII letter or digit, then letters, digits, '_' or '-'.
func isToken(s string) bool {
	if s == "" || tokenByte[s[0]] != tokenAlnum {
		return false
	}
	for i := 1; i < len(s); i++ {
		if tokenByte[s[i]] == 0 {
			return false
		}
	}
	return true
}

// tokenByte classifies the bytes of a token: an ASCII letter or digit, or '_' and '-' (which may
// not start one), or 0 for any other byte.
var tokenByte = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			t[c] = tokenAlnum
		case c == '_' || c == '-':
			t[c] = tokenPunct
		}
	}
	return t
}()

const (
	tokenAlnum = 1
	tokenPunct = 2
)

// isDNSLabel: lower-case letters, digits and '-', starting and ending with a
// letter or digit.
func isDNSLabel(s string) bool {
	if s == "" || !isAlnumLower(s[0]) || !isAlnumLower(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && !isAlnumLower(c) {
			return false
		}
	}
	return true
}

// isDNSSubdomain: DNS labels joined by single dots.
func isDNSSubdomain(s string) bool {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !isDNSLabel(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}
