// Package foldcore is the native port of podledger's offline fold. Wherever it
// meets an input it does not cover exactly it gives up (see Unsupported), and
// the Python fold runs instead.
//
// JSON values are Go values of type any holding exactly one of: nil (JSON null,
// Python None), bool, int64, string, []any or *Obj. There are no floats.
package foldcore

import (
	"errors"
	"fmt"
)

// Unsupported is the panic value raised when the port meets an input it does
// not cover exactly; a run that recovers it hands the whole input to Python.
type Unsupported struct{ Reason string }

// Error makes Unsupported usable as an error value.
func (u Unsupported) Error() string { return "foldcore: unsupported: " + u.Reason }

// ErrUnsupported is returned by Parse for valid JSON the port does not model
// (floats, integers past int64, duplicate keys, very deep nesting).
var ErrUnsupported = errors.New("foldcore: unsupported JSON")

// unsupported gives up on the current run with a reason.
func unsupported(format string, args ...any) {
	panic(Unsupported{Reason: fmt.Sprintf(format, args...)})
}

// indexThreshold is the object size from which key lookups go through a map
// rather than a linear scan; pod objects are nearly always below it.
const indexThreshold = 16

// Obj is a JSON object that keeps its keys in insertion order, like a Python
// dict. The zero value is an empty object. Lookups in a large object build an
// index on first use, so an Obj is not safe for concurrent use, even reads.
type Obj struct {
	keys  []string
	vals  []any
	index map[string]int // built lazily for large objects; nil otherwise
}

// NewObj returns an empty object with room for capacity keys.
func NewObj(capacity int) *Obj { return newObj(capacity) }

// Len is the number of keys.
func (o *Obj) Len() int {
	if o == nil {
		return 0
	}
	return len(o.keys)
}

// find returns the position of key, or -1.
func (o *Obj) find(key string) int {
	if o == nil {
		return -1
	}
	n := len(o.keys)
	if n < indexThreshold {
		if key == "" {
			for i := 0; i < n; i++ {
				if o.keys[i] == "" {
					return i
				}
			}
			return -1
		}
		// Most keys differ from key in length or first byte; only the others need comparing.
		first := key[0]
		for i := 0; i < n; i++ {
			if k := o.keys[i]; len(k) == len(key) && k[0] == first && k == key {
				return i
			}
		}
		return -1
	}
	if o.index == nil {
		o.index = make(map[string]int, n+n/2)
		for i, k := range o.keys {
			o.index[k] = i
		}
	}
	if i, ok := o.index[key]; ok {
		return i
	}
	return -1
}

// Get returns the value for key, or nil when it is missing (Python d.get(k)).
func (o *Obj) Get(key string) any {
	if i := o.find(key); i >= 0 {
		return o.vals[i]
	}
	return nil
}

// Lookup returns the value for key and whether the key is present.
func (o *Obj) Lookup(key string) (any, bool) {
	if i := o.find(key); i >= 0 {
		return o.vals[i], true
	}
	return nil, false
}

// lookupAt is Lookup for a key expected at position at: objects built alike hold their keys in
// the same order, so comparing them needs no search.
func (o *Obj) lookupAt(key string, at int) (any, bool) {
	if o != nil && at < len(o.keys) && o.keys[at] == key {
		return o.vals[at], true
	}
	return o.Lookup(key)
}

// Has reports whether key is present (Python `key in d`).
func (o *Obj) Has(key string) bool { return o.find(key) >= 0 }

// Set is Python d[k] = v: an existing key keeps its position, a new key goes last.
func (o *Obj) Set(key string, v any) {
	if i := o.find(key); i >= 0 {
		o.vals[i] = v
		return
	}
	o.appendNew(key, v)
}

// appendNew adds a key known to be absent.
func (o *Obj) appendNew(key string, v any) {
	if o.index != nil {
		o.index[key] = len(o.keys)
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
}

// SetDefault is Python d.setdefault(k, v): the existing value if present,
// otherwise v after storing it.
func (o *Obj) SetDefault(key string, v any) any {
	if i := o.find(key); i >= 0 {
		return o.vals[i]
	}
	o.appendNew(key, v)
	return v
}

// Delete removes key if present, keeping the order of the others (Python
// d.pop(k, None)).
func (o *Obj) Delete(key string) {
	i := o.find(key)
	if i < 0 {
		return
	}
	copy(o.keys[i:], o.keys[i+1:])
	copy(o.vals[i:], o.vals[i+1:])
	last := len(o.keys) - 1
	o.keys[last] = ""
	o.vals[last] = nil
	o.keys = o.keys[:last]
	o.vals = o.vals[:last]
	o.index = nil
}

// Keys returns the keys in order; callers must not modify the slice.
func (o *Obj) Keys() []string {
	if o == nil {
		return nil
	}
	return o.keys
}

// Values returns the values in key order; callers must not modify the slice.
func (o *Obj) Values() []any {
	if o == nil {
		return nil
	}
	return o.vals
}

// Copy returns a shallow copy (Python dict(d)), with room for two more keys,
// which callers often add.
func (o *Obj) Copy() *Obj {
	if o == nil {
		return newObj(2)
	}
	return newObjOf(o.keys, o.vals, 2)
}

// Update is Python d.update(other): existing keys keep their positions and
// take other's values, new keys are appended in other's order.
func (o *Obj) Update(other *Obj) {
	for i, k := range other.Keys() {
		o.Set(k, other.vals[i])
	}
}

// ObjOf returns v as an object, or nil when it is not one.
func ObjOf(v any) *Obj {
	o, _ := v.(*Obj)
	return o
}

// ListOf returns v as a list, or nil when it is not one.
func ListOf(v any) []any {
	l, _ := v.([]any)
	return l
}

// StrOf returns v as a string and whether it is one.
func StrOf(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// Truthy is Python bool(v): None, False, 0, "", [] and {} are false.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *Obj:
		return x.Len() > 0
	}
	unsupported("truthiness of %T", v)
	return false
}

// numeric returns the integer value of an int64 or a bool (Python's True == 1).
func numeric(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// Equal is Python ==: objects compare regardless of key order, lists in order,
// and True == 1, False == 0.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64, bool:
		m, _ := numeric(a)
		n, ok := numeric(b)
		return ok && m == n
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		if len(x) == 0 || &x[0] == &y[0] { // the same list (statuses share what did not change)
			return true
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Obj:
		y, ok := b.(*Obj)
		if !ok || x.Len() != y.Len() {
			return false
		}
		if x == y {
			return true
		}
		for i, k := range x.Keys() {
			w, found := y.lookupAt(k, i)
			if !found || !Equal(x.vals[i], w) {
				return false
			}
		}
		return true
	}
	unsupported("equality of %T", a)
	return false
}

// DeepCopy copies objects and lists recursively; scalars are shared. It is
// json_copy (an orjson round trip), which raises on values nested too deep to
// encode: DeepCopy gives up there.
func DeepCopy(v any) any {
	return deepCopy(v, 0)
}

func deepCopy(v any, depth int) any {
	switch x := v.(type) {
	case []any:
		if depth >= maxEncodeDepth {
			unsupported("JSON nesting deeper than %d", maxEncodeDepth)
		}
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = deepCopy(e, depth+1)
		}
		return c
	case *Obj:
		if x == nil {
			return x
		}
		if depth >= maxEncodeDepth {
			unsupported("JSON nesting deeper than %d", maxEncodeDepth)
		}
		c := newObjOf(x.keys, x.vals, 2)
		for i, e := range c.vals {
			c.vals[i] = deepCopy(e, depth+1)
		}
		return c
	}
	return v
}
