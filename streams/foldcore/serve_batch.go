package foldcore

// Folding one batch of the live mode (serve.go): its inputs in order, each decoded, held, announced
// or applied as streams/batch.py BatchFold does, and the answer made of what they produced.

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
)

// batch reads a batch and folds it; proven: each input comes with its proof of origin.
func (s *Server) batch(proven bool) error {
	n, err := s.u32()
	s.inputs, s.buf = s.inputs[:0], s.buf[:0]
	for i := uint32(0); i < n && err == nil; i++ {
		var head [21]byte
		if _, err = io.ReadFull(s.in, head[:]); err != nil {
			break
		}
		in := serveInput{
			topic:     head[0],
			partition: int64(binary.LittleEndian.Uint32(head[1:])),
			offset:    int64(binary.LittleEndian.Uint64(head[5:])),
			tsMs:      int64(binary.LittleEndian.Uint64(head[13:])),
			start:     len(s.buf),
		}
		if in.topic >= byte(len(topicNames)) {
			return &ProtocolError{fmt.Sprintf("input %d: unknown topic %d", i, in.topic)}
		}
		if s.buf, in.none, err = s.bytes(s.buf, true); err != nil {
			break
		}
		in.end = len(s.buf)
		if proven {
			if err = s.readProof(&in); err != nil {
				break
			}
		}
		s.inputs = append(s.inputs, in)
	}
	if err != nil {
		return err
	}
	s.foldBatch()
	return nil
}

// foldBatch folds the inputs read and makes the response.
func (s *Server) foldBatch() {
	s.named, s.changed, s.outputs, s.nOutputs, s.records = s.named[:0], s.changed[:0], s.outputs[:0], 0, s.records[:0]
	clear(s.namedSet)
	clear(s.changedAt)
	clear(s.newest)
	at, reason := s.foldInputs()
	clear(s.fold.Pods) // kept for the offline summary only; here it would only grow
	clear(s.held)      // stored as JSON by now, or dropped
	if reason != "" {
		where := fmt.Sprintf("input %d of %d", at, len(s.inputs))
		if at == len(s.inputs) {
			where = "writing the changed records"
		}
		s.giveUp(where + ": " + reason)
		return
	}
	resp := append(s.resp[:0], answerOK)
	resp = binary.LittleEndian.AppendUint32(resp, s.nOutputs)
	resp = append(resp, s.outputs...)
	resp = binary.LittleEndian.AppendUint32(resp, uint32(len(s.changed)))
	resp = append(resp, s.records...)
	resp = binary.LittleEndian.AppendUint32(resp, uint32(len(s.newest)))
	partitions := make([]int64, 0, len(s.newest))
	for p := range s.newest {
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	for _, p := range partitions {
		resp = binary.LittleEndian.AppendUint32(resp, uint32(p))
		resp = binary.LittleEndian.AppendUint64(resp, uint64(s.newest[p]))
	}
	s.resp = resp
}

// foldInputs folds the batch's inputs in order, then encodes the records it changed. It returns
// the index of the input it gave up at (len(inputs) while encoding the records) and why; reason
// is "" when the whole batch folded.
func (s *Server) foldInputs() (at int, reason string) {
	defer func() {
		if r := recover(); r != nil {
			reason = giveUpReason(r)
		}
	}()
	for at = range s.inputs {
		s.foldInput(at)
	}
	at = len(s.inputs)
	for i := range s.changed {
		c := &s.changed[i]
		s.records = binary.LittleEndian.AppendUint32(s.records, uint32(c.partition))
		s.records = appendBytes(s.records, c.uid)
		r, h := s.fold.Records[c.uid], s.held[c.uid]
		if r == nil && h == nil {
			s.records = binary.LittleEndian.AppendUint32(s.records, noneLength)
			c.start = -1
			continue
		}
		mark := len(s.records)
		if r != nil {
			s.records = appendRecord(append(s.records, 0, 0, 0, 0), r, s.shapes[c.uid], &c.raw)
		} else {
			s.records = appendHeldRecord(append(s.records, 0, 0, 0, 0), c.uid, h)
		}
		binary.LittleEndian.PutUint32(s.records[mark:], uint32(len(s.records)-mark-4))
		c.start, c.end = mark+4, len(s.records)
	}
	s.store()
	return at, ""
}

// store keeps the JSON of the records the batch changed, and keeps the objects of the records
// used most recently (serve_parsed.go).
func (s *Server) store() {
	for _, c := range s.changed {
		if c.start < 0 {
			delete(s.stored, c.uid)
			continue
		}
		data := s.records[c.start:c.end]
		stored := s.stored[c.uid]
		if cap(stored) >= len(data) && cap(stored) <= 2*len(data) {
			// Parse copies what it reads, and the record's raw values are pointed anew below.
			stored = append(stored[:0], data...)
		} else {
			stored = slices.Clone(data)
		}
		s.stored[c.uid] = stored
		if r := s.fold.Records[c.uid]; r != nil { // its raw values now lie in its stored JSON
			for slot, span := range c.raw {
				r.raw[slot] = nil
				if span[1] > 0 {
					r.raw[slot] = stored[span[0]-c.start : span[1]-c.start : span[1]-c.start]
				}
			}
		}
	}
	s.keepParsed()
}

// giveUpReason says why a panic of the fold gave up.
func giveUpReason(r any) string {
	switch p := r.(type) {
	case Unsupported:
		return p.Reason
	case *Unsupported:
		return p.Reason
	case runtime.Error:
		return "a value the port does not expect: " + p.Error()
	case error:
		return p.Error()
	}
	return fmt.Sprint(r)
}

// foldInput is BatchFold.add_message for input i: decode_input, then fold_event, its outputs
// collected; with the input's proof of origin when it has one (checked by the worker but for
// the node it names). It gives up wherever Python would dead-letter the input.
func (s *Server) foldInput(i int) {
	in := &s.inputs[i]
	topic := topicNames[in.topic]
	if in.none {
		unsupported("a %s record without a value (Python dead-letters it)", topic)
	}
	value := s.buf[in.start:in.end]
	if s.maxEventBytes > 0 && len(value) > s.maxEventBytes {
		unsupported("a %s value of %d bytes, over the limit (Python dead-letters it)", topic, len(value))
	}
	parsed, err := Parse(value)
	if err != nil {
		unsupported("a %s value: %v", topic, err)
	}
	obj := ObjOf(parsed)
	if obj == nil {
		unsupported("a %s value that is not a JSON object (Python dead-letters it)", topic)
	}
	ev := &s.ev
	decodeEvent(int64(i), topic, obj, ev)
	at := Coordinates{Topic: topic, Partition: in.partition, Offset: in.offset, TsMs: in.tsMs}
	uid := ev.UID
	proof := s.originOf(in, ev)
	if _, seen := s.namedSet[uid]; !seen {
		s.namedSet[uid] = struct{}{}
		s.named = append(s.named, uid)
	}
	if _, ok := s.uncovered[uid]; ok {
		unsupported("an event for pod %s, whose record the port does not model", uid)
	}
	if topic == TopicPodUpdates { // held events expire by it, whatever the event does
		if newest, ok := s.newest[at.Partition]; !ok || at.TsMs > newest {
			s.newest[at.Partition] = at.TsMs
		}
	}
	if at.Offset < 0 {
		unsupported("a negative offset")
	}
	s.partition = at.Partition
	record, held := s.record(uid)
	switch {
	case held != nil: // fold_event: a waiting record refuses no node, and skips what it applied
		if last, ok := held.applied.get(topic); ok && last >= at.Offset {
			return
		}
		if topic == TopicPodUpdates {
			s.announce(held, at, ev, proof)
		} else {
			s.hold(held, at, ev, proof)
		}
		return
	case record == nil && topic != TopicPodUpdates:
		s.hold(nil, at, ev, proof)
		return
	case record != nil && ev.Node == record.Node: // another node's event: Apply gives up on it
		if last, ok := record.applied.get(topic); ok && last >= at.Offset {
			return // applied already: no output, the record stays as it is
		}
	}
	s.applyWith(record, at, ev, proof)
}

// apply is _apply for the pod's record (nil: the pod has none): it journals the event, folds it,
// and notes the record's new shape. The outputs go under the partition of the input folded.
func (s *Server) apply(record *Record, at Coordinates, ev *Event) {
	uid, topic := ev.UID, at.Topic
	remove := topic == TopicPodUpdates && ev.Op == "REMOVE"
	setsRuntime := record != nil && setsRuntimeTs(record, topic, ev)
	s.appendJournal(at, ev)
	s.fold.Apply(at, ev)
	if remove {
		s.appendOutputHead(outputTombstone, uid)
		if record != nil {
			delete(s.shapes, uid)
			delete(s.stored, uid) // or a later event of the batch would read it again
			s.change(uid, s.partition)
		}
		return
	}
	shape := recordShape{keys: newRecordKeys}
	if record != nil {
		shape = s.shapes[uid]
	}
	shape.applied = s.interner.withTopic(shape.applied, topicIndex(topic))
	if s.proof != nil { // _apply sets seqs before it reads the event, so before runtime_ts
		shape.keys = s.interner.withKey(shape.keys, keySeqs)
	}
	if setsRuntime {
		shape.keys = s.interner.withKey(shape.keys, keyRuntimeTs)
	}
	s.shapes[uid] = shape
	s.change(uid, s.partition)
}

// setsRuntimeTs reports whether applying ev sets the record's runtime_ts, as streams/fold.py does:
// a pleg snapshot, or the terminated fact's final one, not older than the record's.
func setsRuntimeTs(r *Record, topic string, ev *Event) bool {
	switch topic {
	case TopicPleg:
		return ev.TsMs >= r.RuntimeTs
	case TopicPodLifecycle:
		terminated := ev.Kind != "sync_result" && ev.Kind != "terminating" // as Apply reads it
		return terminated && ev.Runtime != nil && ev.TsMs >= r.RuntimeTs
	}
	return false
}

// change notes that the batch changed the pod's record (batch.changed keeps its first position).
func (s *Server) change(uid string, partition int64) {
	if i, ok := s.changedAt[uid]; ok {
		s.changed[i].partition = partition
		return
	}
	s.changedAt[uid] = len(s.changed)
	s.changed = append(s.changed, changedRecord{uid: uid, partition: partition})
}

// appendOutputHead starts an output: its kind, the input's partition and the pod's UID.
func (s *Server) appendOutputHead(kind byte, uid string) {
	s.nOutputs++
	s.outputs = append(s.outputs, kind)
	s.outputs = binary.LittleEndian.AppendUint32(s.outputs, uint32(s.partition))
	s.outputs = appendBytes(s.outputs, uid)
}

// appendJournal appends the event's journal entry: encode(models.JournalEntry(type, topic,
// partition, offset, ts_ms, event_fields(event))).
func (s *Server) appendJournal(at Coordinates, ev *Event) {
	kind := byte(outputJournal)
	if s.proof != nil {
		kind = outputProvenJournal
	}
	s.appendOutputHead(kind, ev.UID)
	mark := len(s.outputs)
	b := append(s.outputs, 0, 0, 0, 0)
	b = append(b, `{"type":`...)
	b = appendString(b, s.fold.eventType(at.Topic, ev))
	b = append(b, `,"topic":`...)
	b = appendString(b, at.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, at.Partition, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, at.Offset, 10)
	b = append(b, `,"ts_ms":`...)
	b = strconv.AppendInt(b, at.TsMs, 10)
	b = append(b, `,"event":`...)
	b = appendEventFields(b, at.Topic, ev)
	b = append(b, '}')
	binary.LittleEndian.PutUint32(b[mark:], uint32(len(b)-mark-4))
	if proof := s.proof; proof != nil {
		b = appendBytes(b, proof.node)
		b = binary.LittleEndian.AppendUint64(b, uint64(proof.seq))
	}
	s.outputs = b
}

// appendEventFields appends event_fields(ev) of an event of the topic, which is also to_dict(ev):
// the model's fields in order, defaults filled in.
func appendEventFields(dst []byte, topic string, ev *Event) []byte {
	dst = append(dst, '{')
	for i, f := range modelFields[topic] {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, f.name)
		dst = append(dst, ':')
		dst = Encode(dst, ev.fields[i])
	}
	return append(dst, '}')
}

// emit appends a status version the fold hands over.
func (s *Server) emit(v *Version) {
	s.appendOutputHead(outputVersion, v.UID)
	mark := len(s.outputs)
	b, statusStart, statusEnd := appendVersion(append(s.outputs, 0, 0, 0, 0), v)
	binary.LittleEndian.PutUint32(b[mark:], uint32(len(b)-mark-4))
	// The record's status is this one: its JSON serves the record's until the batch's end, when
	// store() points the record at its stored JSON (outputs is reused by the next batch).
	v.record.raw[rawStatus] = b[statusStart:statusEnd:statusEnd]
	b = binary.LittleEndian.AppendUint64(b, uint64(v.Version))
	b = binary.LittleEndian.AppendUint64(b, uint64(v.TsMs))
	b = appendBytes(b, v.Node)
	b = appendBytes(b, v.Namespace)
	s.outputs = appendBytes(b, v.Name)
}
