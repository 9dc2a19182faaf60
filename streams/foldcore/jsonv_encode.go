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

// skipPlain returns the first position from i, in steps of 8 bytes, where a
// word of s holds a byte that is not plain ASCII (a control, '"', '\\' or a
// byte of a multi-byte character): string scans skip clean runs at once.
func skipPlain[T string | []byte](s T, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for i+8 <= len(s) {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		quote, backslash := x^(ones*'"'), x^(ones*'\\')
		// Each term has a byte's high bit set when that byte is below 0x20,
		// a quote, a backslash or non-ASCII; borrows can only add false alarms.
		special := (x-ones*0x20)&^x | (quote-ones)&^quote | (backslash-ones)&^backslash | x
		if special&highs != 0 {
			return i
		}
		i += 8
	}
	return i
}

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
			dst = encodeValue(dst, x.vals[i], depth+1)
		}
		return append(dst, '}')
	}
	unsupported("cannot encode a Go %T as JSON", v)
	return dst
}

// appendString writes s as a JSON string. Runs of bytes that need no escape
// are copied in one step.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	nonASCII := false
	for i := 0; i < len(s); i++ {
		if i = skipPlain(s, i); i >= len(s) {
			break
		}
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
