package foldcore

import (
	"strconv"
	"strings"
)

// The Python built-ins status generation leans on, over JSON values: `v or {}` before a .get,
// int(), str() and dict keys; each gives up where Python would raise. (canonical.put, which
// generation uses too, is put in canonical.go.)

// asObj is Python's `(v or {})` before a .get: nil for a falsy value (a nil *Obj reads as empty),
// the object itself, or giving up where Python would call .get on a truthy non-object.
func asObj(v any, what string) *Obj {
	if o, ok := v.(*Obj); ok {
		return o
	}
	return notAnObj(v, what) // apart, so that asObj is inlined
}

func notAnObj(v any, what string) *Obj {
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
	return notAList(v, what) // apart, so that asList is inlined
}

func notAList(v any, what string) []any {
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

// checkHashable gives up on a value Python could not look up in a dict or set.
func checkHashable(v any, what string) {
	switch v.(type) {
	case []any, *Obj:
		unsupported("%s is unhashable (%T)", what, v)
	}
}
