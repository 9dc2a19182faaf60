package foldcore

// The records the live mode keeps parsed. Live, a fetch holds a few dozen events and a pod's
// events come a few fetches apart, so a record dropped back to JSON after each batch would be
// parsed again for nearly every event. The server keeps the most recently used records parsed
// instead, up to a bound, and lets the least recently used go back to their JSON, which is
// always current: it is what the batch that last changed the record answered.

// DefaultParsedRecords is how many records the live mode keeps parsed by default: about the pods
// busy within a second or so. A parsed record takes about three times the memory of its JSON
// (some 6.6 KB against 2.4 KB for a workload pod), and one kept parsed long after its last use
// costs about as much to read again from memory as its JSON costs to parse: measured, a bound
// that holds the busy pods saves up to 40 % of the core's time; 20,000 over 100,000 evenly busy
// pods cost 48 % more time and 290 MB.
const DefaultParsedRecords = 2000

// parsedRecord is a record in the recency list: its pod and the batch that last used it.
type parsedRecord struct {
	uid        string
	batch      uint64
	prev, next *parsedRecord
}

// parsedRecords orders the pods whose records are parsed (in Fold.Records) by when a batch
// last used them. Each use and each drop costs a map lookup and a few pointer moves.
type parsedRecords struct {
	byUID map[string]*parsedRecord
	ring  parsedRecord // the list's ends: ring.next the most recently used, ring.prev the least
	batch uint64       // the batch being noted
}

func newParsedRecords() parsedRecords {
	return parsedRecords{byUID: map[string]*parsedRecord{}}
}

// len is the number of parsed records.
func (p *parsedRecords) len() int { return len(p.byUID) }

// startBatch starts noting the uses of a new batch.
func (p *parsedRecords) startBatch() { p.batch++ }

// use notes that the current batch used the pod's parsed record: it becomes the most recent.
func (p *parsedRecords) use(uid string) {
	if p.ring.next == nil {
		p.ring.next, p.ring.prev = &p.ring, &p.ring
	}
	e := p.byUID[uid]
	if e == nil {
		e = &parsedRecord{uid: uid}
		p.byUID[uid] = e
	} else {
		e.prev.next, e.next.prev = e.next, e.prev
	}
	e.batch = p.batch
	e.prev, e.next = &p.ring, p.ring.next
	p.ring.next.prev = e
	p.ring.next = e
}

// drop forgets the pod's record, parsed or not.
func (p *parsedRecords) drop(uid string) {
	e := p.byUID[uid]
	if e == nil {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	delete(p.byUID, uid)
}

// evict drops the least recently used records until at most bound remain, but none the current
// batch used, and calls gone for each.
func (p *parsedRecords) evict(bound int, gone func(uid string)) {
	for len(p.byUID) > bound {
		e := p.ring.prev
		if e.batch == p.batch {
			return
		}
		p.drop(e.uid)
		gone(e.uid)
	}
}

// keepParsed notes the records the batch used, from the pods its events named, and drops the
// least recently used ones past the bound back to their JSON.
func (s *Server) keepParsed() {
	s.parsed.startBatch()
	for _, uid := range s.named {
		if _, ok := s.fold.Records[uid]; ok {
			s.parsed.use(uid)
		} else {
			s.parsed.drop(uid) // removed, or held
		}
	}
	s.parsed.evict(s.ParsedRecords, s.unparse)
}

// unparse lets go of the pod's parsed record; its JSON stays.
func (s *Server) unparse(uid string) {
	delete(s.fold.Records, uid)
	delete(s.shapes, uid)
}
