package foldcore

import "strconv"

// Events that arrive before their pod's announcement. Live, the topics are consumed apart: a
// fetch often holds a pod's pleg or probe results before the pod-update that announces it. The
// Python fold (streams/fold.py fold_event, streams/record.py hold) keeps such events in the
// pod's record, {"uid", "pod": null, "held", "applied"}, and applies them in order right after
// the announcement. The live core does the same: a held item is [topic, partition, offset,
// ts_ms, value], plus [node, seq] when its origin was proven. What Python would dead-letter
// instead (too many held events, a pod removed at its announcement, a forged or replayed held
// event) makes the batch give up; held events that expire by time are Python's to drop
// (expire_held), between batches.

// DefaultHoldMaxEvents is HoldLimits.max_events: the most events a pod not announced yet holds.
const DefaultHoldMaxEvents = 100

// heldItem is one held event: where it came from, its value as to_dict gives it, encoded, and
// its proof of origin (nil: none).
type heldItem struct {
	at    Coordinates
	value []byte
	proof *origin
}

// heldRecord is the record of a pod whose events wait for its announcement.
type heldRecord struct {
	items   []heldItem
	applied appliedOffsets // set to the offset of each event held, as hold does (no max)
	order   string         // of the applied topics, a topicIndex a byte
}

// heldKeys are the keys of a waiting pod's record, in hold's order.
var heldKeys = [...]string{"uid", "pod", "held", "applied"}

// decodeHeldRecord reads the stored record of a pod not announced yet (its "pod" is null). It
// returns why the port does not model the record ("" when it does): other keys or another key
// order than hold gives, or a held item that is not [topic, partition, offset, ts_ms, value]
// (and [node, seq]) of an event hold keeps.
func decodeHeldRecord(uid string, obj *Obj, shapes shapeInterner) (*heldRecord, string) {
	keys, values := obj.Keys(), obj.Values()
	if len(keys) != len(heldKeys) {
		return nil, "a waiting record with other keys than uid, pod, held, applied"
	}
	for i, k := range keys {
		if k != heldKeys[i] {
			return nil, "a waiting record with other keys than uid, pod, held, applied"
		}
	}
	if id, ok := values[0].(string); !ok || id != uid {
		return nil, "its uid is not its key"
	}
	items, ok := values[2].([]any)
	if !ok {
		return nil, "a held list that is not a list"
	}
	h := &heldRecord{items: make([]heldItem, 0, len(items))}
	for _, v := range items {
		item, ok := decodeHeldItem(v)
		if !ok {
			return nil, "a held event the port does not model"
		}
		h.items = append(h.items, item)
	}
	order, ok := decodeApplied(values[3], &h.applied)
	if !ok {
		return nil, "a value the port does not model under \"applied\""
	}
	h.order = shapes.intern(string(order))
	return h, ""
}

// decodeHeldItem reads a held item: [topic, partition, offset, ts_ms, value], and [node, seq]
// after them when its origin was proven.
func decodeHeldItem(v any) (heldItem, bool) {
	item, ok := v.([]any)
	if !ok || len(item) != 5 && len(item) != 6 {
		return heldItem{}, false
	}
	var proof *origin
	if len(item) == 6 {
		pair, isList := item[5].([]any)
		if !isList || len(pair) != 2 {
			return heldItem{}, false
		}
		node, ok1 := pair[0].(string)
		seq, ok2 := pair[1].(int64)
		if !ok1 || !ok2 || seq < 0 {
			return heldItem{}, false
		}
		proof = &origin{node: node, seq: seq}
	}
	topic, ok := item[0].(string)
	if !ok || (topic != TopicPleg && topic != TopicProbeResults && topic != TopicPodLifecycle) {
		return heldItem{}, false
	}
	partition, ok1 := item[1].(int64)
	offset, ok2 := item[2].(int64)
	tsMs, ok3 := item[3].(int64)
	value := ObjOf(item[4])
	if !ok1 || !ok2 || !ok3 || value == nil {
		return heldItem{}, false
	}
	at := Coordinates{Topic: topic, Partition: partition, Offset: offset, TsMs: tsMs}
	return heldItem{at: at, value: Encode(nil, value), proof: proof}, true
}

// appendHeldRecord appends a waiting pod's record as orjson.dumps gives hold's dict.
func appendHeldRecord(dst []byte, uid string, h *heldRecord) []byte {
	dst = append(dst, `{"uid":`...)
	dst = appendString(dst, uid)
	dst = append(dst, `,"pod":null,"held":[`...)
	for i, item := range h.items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		dst = appendString(dst, item.at.Topic)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, item.at.Partition, 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, item.at.Offset, 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, item.at.TsMs, 10)
		dst = append(dst, ',')
		dst = append(dst, item.value...)
		if item.proof != nil {
			dst = append(dst, ",["...)
			dst = appendString(dst, item.proof.node)
			dst = append(dst, ',')
			dst = strconv.AppendInt(dst, item.proof.seq, 10)
			dst = append(dst, ']')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `],"applied":`...)
	dst = appendApplied(dst, &h.applied, h.order)
	return append(dst, '}')
}

// hold is streams/record.py hold: the event waits in the pod's record (h; nil: the pod has none)
// for its announcement, with its proof (nil: none). It has no output: an event is journaled
// when it is applied.
func (s *Server) hold(h *heldRecord, at Coordinates, ev *Event, proof *origin) {
	uid := ev.UID
	if h == nil {
		h = &heldRecord{}
		s.held[uid] = h
	}
	if len(h.items) >= s.HoldMaxEvents {
		unsupported("a %s event for pod %s, which holds %d events already: Python dead-letters the oldest",
			at.Topic, uid, len(h.items))
	}
	h.items = append(h.items, heldItem{at: at, value: appendEventFields(nil, at.Topic, ev), proof: proof})
	t := topicIndex(at.Topic)
	h.applied.offsets[t], h.applied.seen[t] = at.Offset, true
	h.order = s.interner.withTopic(h.order, t)
	s.change(uid, s.partition)
}

// announce is fold_event for the first pod-update of a pod whose events wait in h: the pod's
// record starts with the offsets h applied, then each held event is applied in order, each with
// its own coordinates, proof and journal entry. All outputs go under the announcement's
// partition.
func (s *Server) announce(h *heldRecord, at Coordinates, ev *Event, proof *origin) {
	uid := ev.UID
	delete(s.held, uid)
	delete(s.stored, uid) // the batch reads the record as it makes it from here
	if ev.Op == "REMOVE" {
		if len(h.items) > 0 {
			unsupported("pod %s removed at its announcement: Python dead-letters its %d held events",
				uid, len(h.items))
		}
		s.applyWith(nil, at, ev, proof) // the journal entry and the tombstone; the waiting record goes
		s.change(uid, s.partition)
		return
	}
	s.applyWith(nil, at, ev, proof)
	record := s.fold.Records[uid]
	// _apply(None, at, event, held applied): the held record's offsets, then pod-updates' (a max).
	pu := topicIndex(TopicPodUpdates)
	last, seen := h.applied.offsets[pu], h.applied.seen[pu]
	record.applied = h.applied
	if !seen || at.Offset > last {
		record.applied.offsets[pu], record.applied.seen[pu] = at.Offset, true
	}
	shape := s.shapes[uid]
	shape.applied = s.interner.withTopic(h.order, pu)
	s.shapes[uid] = shape
	for i := range h.items {
		s.applyHeld(record, &h.items[i])
	}
}

// applyHeld is _apply for a held event at its pod's announcement. Unlike fold_event it skips
// no event by the offsets applied: the record already has the held events' own offsets.
func (s *Server) applyHeld(record *Record, item *heldItem) {
	parsed, err := Parse(item.value)
	if err != nil {
		unsupported("a held %s event of pod %s: %v", item.at.Topic, record.UID, err)
	}
	value := ObjOf(parsed)
	if value == nil {
		unsupported("a held %s event of pod %s that is not an object", item.at.Topic, record.UID)
	}
	ev := &s.heldEv
	decodeEvent(item.at.Offset, item.at.Topic, value, ev)
	if ev.UID != record.UID {
		unsupported("a held %s event for pod %s in the record of pod %s", item.at.Topic, ev.UID, record.UID)
	}
	// Apply skips an event whose offset it has applied: the topic's offset is hidden from it, and
	// then set as _apply sets it, to the higher of the two.
	t := topicIndex(item.at.Topic)
	last, seen := record.applied.offsets[t], record.applied.seen[t]
	record.applied.seen[t] = false
	s.applyWith(record, item.at, ev, item.proof)
	if seen && last > item.at.Offset {
		record.applied.offsets[t] = last
	}
}
