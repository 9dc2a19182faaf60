package foldcore

import "sort"

// The orders status generation puts lists in: runtime containers newest first, regular container
// statuses by name; both stable, like Python's sorts, and without allocating for a few items.

// createdAt is the sort key of a runtime container: created_at or "".
func createdAt(rc *Obj) string {
	v := rc.Get("created_at")
	if !Truthy(v) {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		unsupported("created_at is a %T", v)
	}
	return s
}

// sortNewestFirst is Python's sorted(rcs, key=created_at, reverse=True), in place: newest first,
// equal keys in their order (reverse=True keeps the sort stable).
func sortNewestFirst(rcs []*Obj) {
	var keyBuf [8]string
	keys := keyBuf[:0]
	for _, rc := range rcs {
		keys = append(keys, createdAt(rc))
	}
	if len(rcs) > 16 {
		// Sorted copies: handing rcs or keys to sort.Stable would move the callers' stack
		// buffers to the heap on every call.
		s := &byKeyDescending{append([]string(nil), keys...), append([]*Obj(nil), rcs...)}
		sort.Stable(s)
		copy(rcs, s.objs)
		return
	}
	for i := 1; i < len(rcs); i++ { // insertion sort: stable, and no allocation
		for j := i; j > 0 && keys[j-1] < keys[j]; j-- {
			keys[j-1], keys[j] = keys[j], keys[j-1]
			rcs[j-1], rcs[j] = rcs[j], rcs[j-1]
		}
	}
}

// byKeyDescending sorts objects by their keys, greatest first.
type byKeyDescending struct {
	keys []string
	objs []*Obj
}

func (s *byKeyDescending) Len() int           { return len(s.keys) }
func (s *byKeyDescending) Less(a, b int) bool { return s.keys[a] > s.keys[b] }
func (s *byKeyDescending) Swap(a, b int) {
	s.keys[a], s.keys[b] = s.keys[b], s.keys[a]
	s.objs[a], s.objs[b] = s.objs[b], s.objs[a]
}

// sortByName sorts built statuses by name, stably (Python's list.sort(key=name)).
func sortByName(statuses []*Obj) {
	if len(statuses) > 16 {
		// A sorted copy, as in sortNewestFirst: statuses is often on the caller's stack.
		sorted := append([]*Obj(nil), statuses...)
		sort.SliceStable(sorted, func(a, b int) bool { return nameOf(sorted[a]) < nameOf(sorted[b]) })
		copy(statuses, sorted)
		return
	}
	for i := 1; i < len(statuses); i++ {
		for j := i; j > 0 && nameOf(statuses[j-1]) > nameOf(statuses[j]); j-- {
			statuses[j-1], statuses[j] = statuses[j], statuses[j-1]
		}
	}
}
