package foldcore

import (
	"strconv"
	"unicode/utf8"
)

// maxEncodeDepth stays below orjson.dumps' recursion limit (it refuses 255
// nested containers); deeper values would make Python raise, so we give up.
const maxEncodeDepth = 250

// escapeForm maps each byte that orjson escapes inside a string to its escape;
// an empty entry means the byte is written as is. orjson escapes only '"', '\\'
// and the C0 controls; DEL, U+2028 and U+2029 and all other non-ASCII
// characters are written as raw UTF-8.
var escapeForm = func() [256]string {
	var t [256]string
	const hex = "0123456789abcdef"
	for c := 0; c < 0x20; c++ {
		t[c] = `\u00` + string(hex[c>>4]) + string(hex[c&15])
	}
	t['\b'] = `\b`
	t['\t'] = `\t`
	t['\n'] = `\n`
	t['\f'] = `\f`
	t['\r'] = `\r`
	t['"'] = `\"`
	t['\\'] = `\\`
	return t
}()

// Encode appends to dst exactly the bytes orjson.dumps(v) gives: compact, keys
// in insertion order, non-ASCII as raw UTF-8.
func Encode(dst []byte, v any) []byte {
	return encodeValue(dst, v, 0)
}

func encodeValue(dst []byte, v any, depth int) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		if x {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case string:
		return appendString(dst, x)
	case []any:
		if depth >= maxEncodeDepth {
			unsupported("JSON nesting deeper than %d", maxEncodeDepth)
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = encodeValue(dst, e, depth+1)
		}
		return append(dst, ']')
	case *Obj:
		if x == nil {
			return append(dst, "null"...)
		}
		if depth >= maxEncodeDepth {
			unsupported("JSON nesting deeper than %d", maxEncodeDepth)
		}
		dst = append(dst, '{')
		for i, k := range x.keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			if s, isString := x.vals[i].(string); isString { // the most common value
				dst = appendString(dst, s)
			} else {
				dst = encodeValue(dst, x.vals[i], depth+1)
			}
		}
		return append(dst, '}')
	}
	unsupported("cannot encode a Go %T as JSON", v)
	return dst
}

// appendString writes s as a JSON string. Most strings need no escape and
// are copied whole; otherwise runs between escapes are copied in one step.
func appendString(dst []byte, s string) []byte {
	i := scanPlainString(s, 0)
	if i == len(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	return appendEscaped(append(dst, '"'), s, i)
}

// appendEscaped finishes appendString from s[i], the first byte that is not
// plain ASCII.
func appendEscaped(dst []byte, s string, i int) []byte {
	start := 0
	nonASCII := false
	for ; i < len(s); i++ {
		switch c := s[i]; stringByte[c] {
		case 2:
			nonASCII = true
		case 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, escapeForm[c]...)
			start = i + 1
		}
	}
	if nonASCII && !utf8.ValidString(s) {
		// orjson refuses such strings; Python could never have built one.
		unsupported("string is not valid UTF-8")
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
