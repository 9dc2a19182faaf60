package foldcore

// Reusing what the cached status already holds. Most events change little of a pod's status, so
// most container states, lastStates and kubelet conditions that status generation builds equal,
// key for key and in order, the ones the status manager stored the event before. Those stored
// objects are never changed (a status change replaces them), so generation can hand out the
// stored object itself instead of an equal new one: the same JSON, without an allocation. A small
// object is assembled on the stack first (fields), and becomes a new object only when the stored
// one differs.

// maxFields is the most fields a reusable object has (a terminated state has six).
const maxFields = 8

// fields is a small object under construction: keys in order, each key once.
type fields struct {
	n    int
	keys [maxFields]string
	vals [maxFields]any
}

// add appends a key known to be absent.
func (f *fields) add(key string, value any) {
	f.keys[f.n], f.vals[f.n] = key, value
	f.n++
}

// put is canonical.put (see put).
func (f *fields) put(key string, value any) {
	if v, keep := semanticField(value); keep {
		f.add(key, v)
	}
}

// matches reports whether o holds exactly these fields, in this order, with identical values.
func (f *fields) matches(o *Obj) bool {
	if o == nil || len(o.keys) != f.n {
		return false
	}
	for i := 0; i < f.n; i++ {
		if o.keys[i] != f.keys[i] || !identical(o.vals[i], f.vals[i]) {
			return false
		}
	}
	return true
}

// objOr is stored (an object) when it matches, else a new object of the fields.
func (f *fields) objOr(stored any) *Obj {
	if o, ok := stored.(*Obj); ok && f.matches(o) {
		return o
	}
	return newObjOf(f.keys[:f.n], f.vals[:f.n], 0)
}

// into appends the fields to o, an empty object, and returns it.
func (f *fields) into(o *Obj) *Obj {
	o.keys = append(o.keys, f.keys[:f.n]...)
	o.vals = append(o.vals, f.vals[:f.n]...)
	return o
}

// identical reports whether two JSON values are the same value of the same type (so they encode
// alike: unlike Equal, True is not 1): equal scalars, or the same object. Lists are never
// identical, so a list is always built anew.
func identical(a, b any) bool {
	if _, isList := a.([]any); isList {
		return false
	}
	if _, isList := b.([]any); isList {
		return false
	}
	return a == b
}

// storedField is stored.Get(key) for a stored object that may be missing (nil) or not an object.
func storedField(stored any, key string) any {
	if o, ok := stored.(*Obj); ok {
		return o.Get(key)
	}
	return nil
}

// emptyObjOr is {} as stored when stored is an empty object, else a new one.
func emptyObjOr(stored any) *Obj {
	if o, ok := stored.(*Obj); ok && o != nil && len(o.keys) == 0 {
		return o
	}
	return NewObj(0)
}
