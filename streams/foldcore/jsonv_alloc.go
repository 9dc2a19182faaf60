package foldcore

// Objects are allocated together with their key and value arrays: one allocation instead of
// three, and an object's header and first keys share cache lines. The fold builds and reads tens
// of small objects per event, so both the allocation count and the cache misses of a lookup in a
// cold pod record matter.
//
// An object's arrays come in a few sizes; a block holds an Obj and arrays of one size, and the
// Obj's slices point into its own block (the block lives as long as the Obj does). An object that
// outgrows its arrays reallocates them with append as any slice does.

type objBlock1 struct {
	obj  Obj
	keys [1]string
	vals [1]any
}

type objBlock2 struct {
	obj  Obj
	keys [2]string
	vals [2]any
}

type objBlock3 struct {
	obj  Obj
	keys [3]string
	vals [3]any
}

type objBlock4 struct {
	obj  Obj
	keys [4]string
	vals [4]any
}

type objBlock5 struct {
	obj  Obj
	keys [5]string
	vals [5]any
}

type objBlock6 struct {
	obj  Obj
	keys [6]string
	vals [6]any
}

type objBlock8 struct {
	obj  Obj
	keys [8]string
	vals [8]any
}

type objBlock10 struct {
	obj  Obj
	keys [10]string
	vals [10]any
}

type objBlock12 struct {
	obj  Obj
	keys [12]string
	vals [12]any
}

type objBlock16 struct {
	obj  Obj
	keys [16]string
	vals [16]any
}

// newObj returns an empty object with room for at least capacity keys, in one allocation up to
// 16 keys.
func newObj(capacity int) *Obj {
	switch {
	case capacity <= 0:
		return &Obj{}
	case capacity == 1:
		b := &objBlock1{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity == 2:
		b := &objBlock2{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity == 3:
		b := &objBlock3{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity == 4:
		b := &objBlock4{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity == 5:
		b := &objBlock5{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity == 6:
		b := &objBlock6{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity <= 8:
		b := &objBlock8{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity <= 10:
		b := &objBlock10{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity <= 12:
		b := &objBlock12{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	case capacity <= 16:
		b := &objBlock16{}
		b.obj.keys, b.obj.vals = b.keys[:0], b.vals[:0]
		return &b.obj
	}
	return &Obj{keys: make([]string, 0, capacity), vals: make([]any, 0, capacity)}
}

// newObjOf returns an object holding keys and values (copied), with room for extra more keys.
func newObjOf(keys []string, vals []any, extra int) *Obj {
	o := newObj(len(keys) + extra)
	o.keys = append(o.keys, keys...)
	o.vals = append(o.vals, vals...)
	return o
}
