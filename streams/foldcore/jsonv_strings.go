package foldcore

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// String scanning shared by Parse and Encode, and the parser's decoding of
// strings with its cache of repeated ones.

// stringByte classifies bytes inside a string: 0 is plain ASCII, 1 ends the
// fast scan ('"', '\\', controls), 2 is non-ASCII (needs a UTF-8 check).
var stringByte = func() (t [256]uint8) {
	for c := 0; c < 0x20; c++ {
		t[c] = 1
	}
	t['"'], t['\\'] = 1, 1
	for c := 0x80; c < 0x100; c++ {
		t[c] = 2
	}
	return t
}()

// String scans go eight bytes at a time. specialBytes has a byte's high bit
// set when that byte is below 0x20, a quote, a backslash or non-ASCII; a
// borrow can set more bits, but only above a byte that is itself special, so
// the lowest bit set always marks the first special byte.
const ones, highs = 0x0101010101010101, 0x8080808080808080

func specialBytes(x uint64) uint64 {
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x | (quote-ones)&^quote | (backslash-ones)&^backslash | x) & highs
}

// scanPlain returns the position of the first byte of s from i on that is
// not plain ASCII (see stringByte), or len(s).
func scanPlain(s []byte, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(s) && stringByte[s[i]] == 0 {
		i++
	}
	return i
}

// scanPlainString is scanPlain for a string.
func scanPlainString(s string, i int) int {
	n := len(s)
	for ; i+8 <= n; i += 8 {
		if m := specialBytes(stringWord(s[i : i+8])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	if i < n && n >= 8 {
		// The last eight bytes overlap bytes already found plain, which
		// cannot mark anything: one more word covers the tail.
		if m := specialBytes(stringWord(s[n-8:])); m != 0 {
			return n - 8 + bits.TrailingZeros64(m)/8
		}
		return n
	}
	if i == 0 && n >= 4 && specialBytes(shortWord(s)) == 0 {
		return n // four to seven bytes, all plain
	}
	for i < n && stringByte[s[i]] == 0 {
		i++
	}
	return i
}

// shortWord packs the first four and the last four bytes of s (four to seven bytes long, so they
// cover it all) into one word.
func shortWord(s string) uint64 {
	n := len(s)
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[n-4])<<32 | uint64(s[n-3])<<40 | uint64(s[n-2])<<48 | uint64(s[n-1])<<56
}

// stringWord reads the first eight bytes of w as a little-endian word.
func stringWord(w string) uint64 {
	_ = w[7]
	return uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
		uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
}

// internSlots is the size of the per-parser cache of repeated string values (a
// power of two); pod JSON repeats enum values and UIDs on every line.
const internSlots = 4096

// keySlots is the size of the per-parser cache of keys: apart, the few keys of
// pod JSON are never pushed out by the many values, and their cache stays small.
const keySlots = 512

// internMaxLen is the longest string the caches hold.
const internMaxLen = 64

// internSlot is one cached string, with its value already boxed as an any so
// that a repeated string value costs no allocation at all.
type internSlot struct {
	s string
	v any
}

// str decodes the key starting at the opening quote at p.pos, shared with
// earlier equal keys.
func (p *parser) str() string {
	b := p.strBytes()
	if p.err != nil {
		return ""
	}
	if len(b) > internMaxLen {
		return string(b)
	}
	slot := &p.keyCache[slotHash(b)&(keySlots-1)]
	if *slot != string(b) { // an empty slot holds "", the right answer for an empty key
		// The fold's own keys are its string constants (see knownKeys).
		s, known := knownKeys[string(b)]
		if !known {
			s = string(b)
		}
		*slot = s
	}
	return *slot
}

// strValue decodes the string value starting at the opening quote at p.pos,
// boxed as an any and shared with earlier equal values.
func (p *parser) strValue() any {
	b := p.strBytes()
	if p.err != nil {
		return nil
	}
	if len(b) > internMaxLen {
		return string(b)
	}
	slot := &p.intern[slotHash(b)&(internSlots-1)]
	if slot.v == nil || slot.s != string(b) {
		s := string(b)
		slot.s, slot.v = s, s
	}
	return slot.v
}

// strBytes decodes a string into bytes that stay valid until the next call.
func (p *parser) strBytes() []byte {
	p.pos++
	start := p.pos
	data := p.data
	i := scanPlain(data, start)
	if i < len(data) && data[i] == '"' {
		p.pos = i + 1
		return data[start:i]
	}
	nonASCII := false
	for ; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			p.pos = i + 1
			raw := data[start:i]
			if nonASCII && !utf8.Valid(raw) {
				p.fail("string is not valid UTF-8")
				return nil
			}
			return raw
		case c == '\\':
			p.pos = i
			return p.escapedStr(start)
		case c < 0x20:
			p.pos = i
			p.fail("control character in string")
			return nil
		case c >= 0x80:
			nonASCII = true
		}
	}
	p.pos = len(data)
	p.fail("unterminated string")
	return nil
}

// slotHash is a cheap hash of the length and the first and last eight bytes
// of b, for the caches' slots: a collision only costs a miss, as slots are
// always compared.
func slotHash(b []byte) uint64 {
	h := uint64(len(b)) * 0x9E3779B97F4A7C15
	if len(b) >= 8 {
		h ^= binary.LittleEndian.Uint64(b)
		h = (h ^ h>>29) * 0xBF58476D1CE4E5B9
		h ^= binary.LittleEndian.Uint64(b[len(b)-8:])
	} else {
		for _, c := range b {
			h = h<<8 | uint64(c)
		}
	}
	h = (h ^ h>>32) * 0x94D049BB133111EB
	return h >> 40
}

// escapedStr finishes a string whose first escape is at p.pos; start is the
// first byte after the opening quote.
func (p *parser) escapedStr(start int) []byte {
	buf := p.scratch[:0]
	segment := start
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			buf = append(buf, p.data[segment:p.pos]...)
			p.pos++
			p.scratch = buf
			if !utf8.Valid(buf) {
				p.fail("string is not valid UTF-8")
				return nil
			}
			return buf
		case c < 0x20:
			p.fail("control character in string")
			return nil
		case c != '\\':
			p.pos++
			continue
		}
		// Raw bytes never continue a sequence across an escape (the backslash
		// is ASCII), so validating the whole buffer at the end is exact.
		buf = append(buf, p.data[segment:p.pos]...)
		if p.pos+1 >= len(p.data) {
			p.fail("unexpected end of data")
			return nil
		}
		e := p.data[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				p.fail("lone low surrogate")
				return nil
			case r >= 0xD800 && r <= 0xDBFF:
				if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
					p.fail("high surrogate without a low one")
					return nil
				}
				p.pos += 2
				lo, ok := p.hex4()
				if !ok {
					return nil
				}
				if lo < 0xDC00 || lo > 0xDFFF {
					p.fail("invalid low surrogate")
					return nil
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			p.fail("invalid escape")
			return nil
		}
		segment = p.pos
	}
	p.scratch = buf
	p.fail("unterminated string")
	return nil
}

// hex4 reads four hex digits at p.pos.
func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		p.fail("short \\u escape")
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			p.fail("bad hex digit in \\u escape")
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}
