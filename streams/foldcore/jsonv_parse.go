package foldcore

import (
	"strconv"
	"sync"
)

// maxParseDepth is where Parse stops descending; orjson accepts up to 1024
// levels, so anything deeper than this is given up on rather than rejected.
const maxParseDepth = 512

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
	data     []byte
	pos      int
	err      error
	keys     []string   // pending object keys of all open objects
	vals     []any      // pending values of all open objects and arrays
	scratch  []byte     // decoded bytes of a string with escapes
	top      *Obj       // where a top-level object goes (parseInto); nil: a new object
	spans    *[]topSpan // where a top-level object's values lie (parseSpans); nil: not noted
	keyCache [keySlots]string
	intern   [internSlots]internSlot
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
	return parseInto(data, nil)
}

// topSpan is where one value of a top-level object lies in the parsed bytes: data[start:end].
type topSpan struct{ start, end int }

// parseSpans is Parse, noting in spans where each value of a top-level object lies, in the order
// of the object's keys.
func parseSpans(data []byte, spans *[]topSpan) (any, error) {
	p := parserPool.Get().(*parser)
	p.spans = spans
	v, err := p.parse(data, nil)
	p.spans = nil
	parserPool.Put(p)
	return v, err
}

// parseInto is Parse, except that a top-level object is built in top (when not nil), whatever
// top held before: for a caller that is done with one document before it parses the next.
func parseInto(data []byte, top *Obj) (any, error) {
	p := parserPool.Get().(*parser)
	v, err := p.parse(data, top)
	parserPool.Put(p)
	return v, err
}

// parse decodes one document with this parser, and leaves it ready for the next.
func (p *parser) parse(data []byte, top *Obj) (any, error) {
	p.data, p.pos, p.err, p.top = data, 0, nil, top
	v := p.document()
	err := p.err
	p.data, p.top = nil, nil
	clear(p.keys)
	p.keys = p.keys[:0]
	clear(p.vals)
	p.vals = p.vals[:0]
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
	// Compact JSON has no whitespace: one test and out.
	if p.pos >= len(p.data) || p.data[p.pos] > ' ' {
		return
	}
	p.skipSpaceSlow()
}

func (p *parser) skipSpaceSlow() {
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
	// Each list and object gets its own allocation: a parsed value often outlives its line
	// (a pod, a runtime snapshot), and must not keep the rest of a shared block alive.
	out := make([]any, len(p.vals)-base)
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
		return newObj(0)
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
				// Keys differ in length or first byte, as a rule.
				if len(seen) == len(k) && (k == "" || seen[0] == k[0]) && seen == k {
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
		start := p.pos
		v := p.value(depth)
		if p.err != nil {
			return nil
		}
		if depth == 1 && p.spans != nil {
			*p.spans = append(*p.spans, topSpan{start, p.pos})
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
	var o *Obj
	if depth == 1 && p.top != nil {
		o = p.top
		o.keys = append(o.keys[:0], p.keys[kbase:]...)
		o.vals = append(o.vals[:0], p.vals[vbase:]...)
		o.index = nil
	} else {
		o = newObjOf(p.keys[kbase:], p.vals[vbase:], 0)
	}
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
