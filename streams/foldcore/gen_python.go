package foldcore

import (
	"strconv"
	"strings"
)

// The Python built-ins status generation leans on, over JSON values: `v or {}` before a .get,
// int(), str(), dict keys, and canonical.put; each gives up where Python would raise.

// asObj is Python's `(v or {})` before a .get: nil for a falsy value (a nil *Obj reads as empty),
// the object itself, or giving up where Python would call .get on a truthy non-object.
func asObj(v any, what string) *Obj {
	if o, ok := v.(*Obj); ok {
		return o
	}
	if Truthy(v) {
		unsupported("%s is a %T, not an object", what, v)
	}
	return nil
}

// asList is Python's `v or ()` before a loop: nil for a falsy value, the list itself, or giving up
// on a truthy non-list (Python would iterate a string's characters or an object's keys).
func asList(v any, what string) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if Truthy(v) {
		unsupported("%s is a %T, not a list", what, v)
	}
	return nil
}

// PyInt is Python's int(v) for a JSON value: ints and bools as numbers, plain decimal strings
// parsed; anything else makes Python raise (or is not covered) and gives up.
func PyInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case bool:
		if x {
			return 1
		}
		return 0
	case string:
		digits := strings.TrimPrefix(strings.TrimPrefix(x, "+"), "-")
		if digits != "" && strings.Trim(digits, "0123456789") == "" {
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return n
			}
		}
	}
	unsupported("int() of %T %v", v, v)
	return 0
}

// addOne is n + 1 without leaving int64 (Python's ints do not overflow).
func addOne(n int64) int64 {
	if n == 1<<63-1 {
		unsupported("integer overflow")
	}
	return n + 1
}

// pyStr is Python's str(v) (or an f-string field) for a scalar JSON value.
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		if x {
			return "True"
		}
		return "False"
	case nil:
		return "None"
	}
	unsupported("str() of %T", v)
	return ""
}

// hashKey is a Go map key for a hashable JSON value with Python's dict-key equality (True and 1
// are one key); lists and objects are unhashable and give up.
func hashKey(v any) string {
	switch x := v.(type) {
	case string:
		return "s" + x
	case int64:
		return "i" + strconv.FormatInt(x, 10)
	case bool:
		if x {
			return "i1"
		}
		return "i0"
	case nil:
		return "n"
	}
	unsupported("unhashable %T used as a key", v)
	return ""
}

// checkHashable gives up on a value Python could not look up in a dict or set.
func checkHashable(v any, what string) {
	switch v.(type) {
	case []any, *Obj:
		unsupported("%s is unhashable (%T)", what, v)
	}
}

// genPut is canonical.put: target[key] = semantic(value), or no key where semantic drops the
// field (null, empty string, empty list).
func genPut(target *Obj, key string, value any) {
	switch v := value.(type) {
	case string:
		if v != "" {
			target.Set(key, v)
		}
	case bool, int64:
		target.Set(key, v)
	case *Obj:
		if v != nil {
			target.Set(key, genSemantic(v))
		}
	case []any:
		if len(v) > 0 {
			target.Set(key, genSemantic(v))
		}
	case nil:
	default:
		unsupported("value of type %T", value)
	}
}

// genSemantic is canonical.semantic: a new copy with null, empty-string and empty-list fields
// dropped from every object (empty objects and list items stay).
func genSemantic(value any) any {
	switch v := value.(type) {
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			switch item.(type) {
			case []any, *Obj:
				out[i] = genSemantic(item)
			default:
				out[i] = item
			}
		}
		return out
	case *Obj:
		out := NewObj(v.Len())
		for i, k := range v.Keys() {
			genPut(out, k, v.Values()[i])
		}
		return out
	}
	return value
}
