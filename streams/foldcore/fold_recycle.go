package foldcore

// Recycling the objects of the statuses the fold drops. Each event makes a status with a new top
// object and new container statuses, and drops either that status (nothing changed) or the one
// it replaces; reusing the dropped objects for the next status saves most of the memory the fold
// allocates per event, and the collections and page faults that come with it.
//
// This is safe because a status's top object and its container statuses belong to it alone:
// generation makes them new for every status (a container status it keeps from the cached one is
// a copy), the status manager's other path copies the whole status, and nothing else keeps any of
// them once the fold has dropped the status: generation and the status manager only read the
// cached status, TerminatePodStatus copies it, and Emit's handler must not keep what it is given.
// What lies below them (states, conditions, address lists) may be shared with later statuses and
// is never recycled.

// recycledCapacity is the room of the objects the pool holds: a container status has up to nine
// keys, a generated status up to ten.
const recycledCapacity = 10

// maxRecycled bounds the objects the pool holds.
const maxRecycled = 256

// statusPool holds the emptied objects of dropped statuses. A nil pool recycles nothing.
type statusPool struct {
	free []*Obj
}

// obj is an empty object with room for recycledCapacity keys: a recycled one or a new one.
func (p *statusPool) obj() *Obj {
	if p != nil {
		if n := len(p.free); n > 0 {
			o := p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
			return o
		}
	}
	return NewObj(recycledCapacity)
}

// drop takes back the top object and the container statuses of a status that nothing holds any
// more.
func (p *statusPool) drop(status *Obj) {
	if p == nil || status == nil {
		return
	}
	// A repeated container name puts one status in a list twice: each object is taken once.
	var seenBuf [16]*Obj
	seen := seenBuf[:0]
	for _, key := range [...]string{"containerStatuses", "initContainerStatuses"} {
		for _, item := range ListOf(status.Get(key)) {
			cs := ObjOf(item)
			if cs == nil || hasObj(seen, cs) {
				continue
			}
			seen = append(seen, cs)
			p.put(cs)
		}
	}
	p.put(status)
}

// put empties o and keeps it, if it has the pool's size and there is room.
func (p *statusPool) put(o *Obj) {
	if cap(o.keys) != recycledCapacity || cap(o.vals) != recycledCapacity || o.index != nil ||
		len(p.free) >= maxRecycled {
		return
	}
	clear(o.keys[:recycledCapacity])
	clear(o.vals[:recycledCapacity])
	o.keys, o.vals = o.keys[:0], o.vals[:0]
	p.free = append(p.free, o)
}

func hasObj(list []*Obj, o *Obj) bool {
	for _, x := range list {
		if x == o {
			return true
		}
	}
	return false
}
