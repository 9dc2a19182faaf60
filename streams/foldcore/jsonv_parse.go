package foldcore

import (
	"strconv"
	"sync"
	"unicode/utf8"
)

// maxParseDepth is where Parse stops descending; orjson accepts up to 1024
// levels, so anything deeper than this is given up on rather than rejected.
const maxParseDepth = 512

// internSlots is the size of the per-parser cache of repeated strings (a
// power of two); pod JSON repeats keys, enum values and UIDs on every line.
const internSlots = 4096

// internMaxLen is the longest string the cache holds.
const internMaxLen = 64

// internSlot is one cached string, with its value already boxed as an any so
// that a repeated string value costs no allocation at all.
type internSlot struct {
	s string
	v any
}

// SyntaxError reports input orjson.loads would reject.
type SyntaxError struct {
	Offset int
	Msg    string
}

// Error describes where the input stopped being JSON.
func (e *SyntaxError) Error() string {
	return "foldcore: invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// parser holds one parse's cursor plus buffers reused across parses.
type parser struct {
	data    []byte
	pos     int
	err     error
	keys    []string // pending object keys of all open objects
	vals    []any    // pending values of all open objects and arrays
	scratch []byte   // decoded bytes of a string with escapes
	intern  [internSlots]internSlot

	// Slabs that parsed objects and lists are carved from, a few allocations
	// per many values; each piece is capped so appending to it reallocates.
	keySlab []string
	valSlab []any
	objSlab []Obj
}

// slabSize is how many elements a fresh slab holds.
const slabSize = 1024

func (p *parser) newKeys(n int) []string {
	if n > len(p.keySlab) {
		p.keySlab = make([]string, max(n, slabSize))
	}
	s := p.keySlab[:n:n]
	p.keySlab = p.keySlab[n:]
	return s
}

func (p *parser) newVals(n int) []any {
	if n > len(p.valSlab) {
		p.valSlab = make([]any, max(n, slabSize))
	}
	s := p.valSlab[:n:n]
	p.valSlab = p.valSlab[n:]
	return s
}

func (p *parser) newObj() *Obj {
	if len(p.objSlab) == 0 {
		p.objSlab = make([]Obj, slabSize/4)
	}
	o := &p.objSlab[0]
	p.objSlab = p.objSlab[1:]
	return o
}

var parserPool = sync.Pool{New: func() any {
	return &parser{
		keys:    make([]string, 0, 256),
		vals:    make([]any, 0, 256),
		scratch: make([]byte, 0, 256),
	}
}}

// Parse decodes one JSON document as orjson.loads would. Input orjson rejects
// gives a *SyntaxError; valid JSON the port does not model (floats, integers
// past int64, duplicate keys, nesting deeper than maxParseDepth) gives
// ErrUnsupported.
func Parse(data []byte) (any, error) {
	p := parserPool.Get().(*parser)
	p.data, p.pos, p.err = data, 0, nil
	v := p.document()
	err := p.err
	p.data = nil
	clear(p.keys)
	p.keys = p.keys[:0]
	clear(p.vals)
	p.vals = p.vals[:0]
	parserPool.Put(p)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (p *parser) fail(msg string) {
	if p.err == nil {
		p.err = &SyntaxError{Offset: p.pos, Msg: msg}
	}
}

func (p *parser) giveUp() {
	if p.err == nil {
		p.err = ErrUnsupported
	}
}

func (p *parser) document() any {
	if len(p.data) >= 3 && p.data[0] == 0xEF && p.data[1] == 0xBB && p.data[2] == 0xBF {
		p.fail("byte order mark")
		return nil
	}
	p.skipSpace()
	v := p.value(0)
	if p.err != nil {
		return nil
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		p.fail("trailing data")
		return nil
	}
	return v
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) any {
	if p.pos >= len(p.data) {
		p.fail("unexpected end of data")
		return nil
	}
	switch c := p.data[p.pos]; {
	case c == '"':
		return p.strValue()
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	}
	p.fail("expected a JSON value")
	return nil
}

func (p *parser) literal(word string, v any) any {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		p.fail("bad literal")
		return nil
	}
	p.pos += len(word)
	return v
}

func (p *parser) number() any {
	neg := false
	if p.data[p.pos] == '-' {
		neg = true
		p.pos++
	}
	digits := p.pos
	var n uint64
	overflow := false
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		d := uint64(p.data[p.pos] - '0')
		if n > (1<<63)/10 || n*10 > (1<<63)-d {
			overflow = true
		}
		n = n*10 + d
		p.pos++
	}
	switch {
	case p.pos == digits:
		p.fail("expected a digit")
		return nil
	case p.data[digits] == '0' && p.pos-digits > 1:
		p.fail("leading zero")
		return nil
	}
	if p.pos < len(p.data) {
		if c := p.data[p.pos]; c == '.' || c == 'e' || c == 'E' {
			p.giveUp() // a float, or not JSON at all: neither is modelled
			return nil
		}
	}
	if overflow || (!neg && n > 1<<63-1) {
		p.giveUp()
		return nil
	}
	if neg {
		return -int64(n) // n == 1<<63 wraps to math.MinInt64, as intended
	}
	return int64(n)
}

func (p *parser) array(depth int) any {
	if depth > maxParseDepth {
		p.giveUp()
		return nil
	}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return []any{}
	}
	base := len(p.vals)
	for {
		v := p.value(depth)
		if p.err != nil {
			return nil
		}
		p.vals = append(p.vals, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			p.fail("unexpected end of data")
			return nil
		}
		c := p.data[p.pos]
		p.pos++
		if c == ']' {
			break
		}
		if c != ',' {
			p.pos--
			p.fail("expected ',' or ']'")
			return nil
		}
		p.skipSpace()
	}
	out := p.newVals(len(p.vals) - base)
	copy(out, p.vals[base:])
	clear(p.vals[base:])
	p.vals = p.vals[:base]
	return out
}

func (p *parser) object(depth int) any {
	if depth > maxParseDepth {
		p.giveUp()
		return nil
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return &Obj{}
	}
	kbase, vbase := len(p.keys), len(p.vals)
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			p.fail("expected a string key")
			return nil
		}
		k := p.str()
		if p.err != nil {
			return nil
		}
		if len(p.keys)-kbase < indexThreshold {
			for _, seen := range p.keys[kbase:] {
				if seen == k {
					p.giveUp() // orjson keeps the last value; not modelled
					return nil
				}
			}
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			p.fail("expected ':'")
			return nil
		}
		p.pos++
		p.skipSpace()
		v := p.value(depth)
		if p.err != nil {
			return nil
		}
		p.keys = append(p.keys, k)
		p.vals = append(p.vals, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			p.fail("unexpected end of data")
			return nil
		}
		c := p.data[p.pos]
		p.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			p.pos--
			p.fail("expected ',' or '}'")
			return nil
		}
		p.skipSpace()
	}
	n := len(p.keys) - kbase
	o := p.newObj()
	o.keys, o.vals = p.newKeys(n), p.newVals(n)
	copy(o.keys, p.keys[kbase:])
	copy(o.vals, p.vals[vbase:])
	clear(p.keys[kbase:])
	clear(p.vals[vbase:])
	p.keys = p.keys[:kbase]
	p.vals = p.vals[:vbase]
	if n > indexThreshold {
		// Large objects were only checked for duplicates among their first
		// keys; the lookup index finds the rest.
		o.index = make(map[string]int, n)
		for i, key := range o.keys {
			o.index[key] = i
		}
		if len(o.index) != n {
			p.giveUp()
			return nil
		}
	}
	return o
}

// str decodes the string starting at the opening quote at p.pos.
func (p *parser) str() string {
	b := p.strBytes()
	if p.err != nil {
		return ""
	}
	if len(b) > internMaxLen {
		return string(b)
	}
	return p.slot(b).s
}

// strValue is str boxed as an any, shared with earlier equal strings.
func (p *parser) strValue() any {
	b := p.strBytes()
	if p.err != nil {
		return nil
	}
	if len(b) > internMaxLen {
		return string(b)
	}
	return p.slot(b).v
}

// strBytes decodes a string into bytes that stay valid until the next call.
func (p *parser) strBytes() []byte {
	p.pos++
	start := p.pos
	nonASCII := false
	data := p.data
	for i := start; i < len(data); i++ {
		i = skipPlain(data, i)
		if i >= len(data) {
			break
		}
		switch stringByte[data[i]] {
		case 0:
			continue
		case 2:
			nonASCII = true
			continue
		}
		p.pos = i
		switch c := data[i]; {
		case c == '"':
			p.pos++
			raw := data[start:i]
			if nonASCII && !utf8.Valid(raw) {
				p.fail("string is not valid UTF-8")
				return nil
			}
			return raw
		case c == '\\':
			return p.escapedStr(start)
		default:
			p.fail("control character in string")
			return nil
		}
	}
	p.pos = len(data)
	p.fail("unterminated string")
	return nil
}

// slot returns the cache slot holding the short string b, filling it on a miss.
func (p *parser) slot(b []byte) *internSlot {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	slot := &p.intern[h&(internSlots-1)]
	if slot.v == nil || slot.s != string(b) {
		s := string(b)
		slot.s, slot.v = s, s
	}
	return slot
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
