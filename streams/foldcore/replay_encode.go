package foldcore

// Encoding a window's versions with what the version before said. Replay folds a pod's events one
// after another, so a version mostly follows the same pod's previous one, and most of its
// conditions and container states are the very objects that version held: status generation
// hands the stored object out again when it is unchanged (gen_reuse.go), and such objects are
// never changed once stored, nor recycled (fold_recycle.go). Their JSON is then the bytes the
// previous version's line holds for them, copied rather than encoded again.

// reusedJSON is where an object's JSON lies in the last version's line.
type reusedJSON struct {
	obj        *Obj
	start, end int
}

// versionEncoder encodes versions, remembering where the last one's conditions and container
// states lie in its line. Whichever pod the next version is of, an object it holds that the last
// held is the same object, with the same JSON.
type versionEncoder struct {
	line  []byte // the last version's line
	spans []reusedJSON
	next  []reusedJSON // the spans of the line being encoded
}

// forget drops what the encoder remembers, as the lines it points into are about to be reused.
func (e *versionEncoder) forget() {
	clear(e.spans)
	e.line, e.spans = nil, e.spans[:0]
}

// append appends v's line to dst, as AppendVersion does, and remembers it.
func (e *versionEncoder) append(dst []byte, v *Version) []byte {
	start := len(dst)
	clear(e.next)
	e.next = e.next[:0]
	dst, _, _ = appendVersionWith(dst, v, e)
	e.line = dst[start:]
	e.spans, e.next = e.next, e.spans
	return dst
}

// status encodes a version's status into dst, whose line starts at lineStart.
func (e *versionEncoder) status(dst []byte, status *Obj, lineStart int) []byte {
	return e.object(dst, status, lineStart, true)
}

// object encodes a status (top) or one of its container statuses, each value through field.
func (e *versionEncoder) object(dst []byte, o *Obj, lineStart int, top bool) []byte {
	dst = append(dst, '{')
	for i, key := range o.keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendString(dst, key), ':')
		dst = e.field(dst, key, o.vals[i], lineStart, top)
	}
	return append(dst, '}')
}

// field encodes a value of a status (top) or of a container status: a status's condition and
// container status lists go through list, a container status's state and lastState through
// reused, the rest as Encode does.
func (e *versionEncoder) field(dst []byte, key string, value any, lineStart int, top bool) []byte {
	switch {
	case top && key == "conditions":
		return e.list(dst, value, lineStart, false)
	case top && (key == "containerStatuses" || key == "initContainerStatuses"):
		return e.list(dst, value, lineStart, true)
	case !top && (key == "state" || key == "lastState"):
		if o, isObj := value.(*Obj); isObj && o != nil {
			return e.reused(dst, o, lineStart)
		}
	}
	return Encode(dst, value)
}

// list encodes a status list: of conditions, or (containers) of container statuses, whose states
// are what may be reused (a container status itself is new to each status).
func (e *versionEncoder) list(dst []byte, value any, lineStart int, containers bool) []byte {
	items, ok := value.([]any)
	if !ok {
		return Encode(dst, value)
	}
	dst = append(dst, '[')
	for i, item := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		o, isObj := item.(*Obj)
		switch {
		case !isObj || o == nil:
			dst = Encode(dst, item)
		case containers:
			dst = e.object(dst, o, lineStart, false)
		default:
			dst = e.reused(dst, o, lineStart)
		}
	}
	return append(dst, ']')
}

// reused encodes o, copying its JSON from the last version's line when that held it.
func (e *versionEncoder) reused(dst []byte, o *Obj, lineStart int) []byte {
	start := len(dst)
	copied := false
	for _, s := range e.spans {
		if s.obj == o {
			dst = append(dst, e.line[s.start:s.end]...)
			copied = true
			break
		}
	}
	if !copied {
		dst = Encode(dst, o)
	}
	e.next = append(e.next, reusedJSON{o, start - lineStart, len(dst) - lineStart})
	return dst
}
