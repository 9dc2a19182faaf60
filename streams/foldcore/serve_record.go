package foldcore

import "strconv"

// Pod records as the live fold stores them on fold-state: the JSON of a streams/record.py
// PodRecord (orjson.dumps of the Python dict). A record is read into a Record plus its shape, the
// order of its keys and of its "applied" topics, so that it is written back with the bytes Python
// would write for the same state.

// recordKey is one key of a stored record.
type recordKey uint8

const (
	keyUID recordKey = iota
	keyNamespace
	keyName
	keyNode
	keySource
	keyPod
	keyRuntime
	keyProbes
	keyReasons
	keyTerminating
	keyTerminated
	keyFinished
	keyStatus
	keyVersion
	keyApplied
	keyRuntimeTs // optional: set with the first runtime snapshot
	keyHeld      // optional: an announced record may keep an empty list of held events
	keySeqs      // optional: set with the first event whose origin was proven
	numRecordKeys
)

// recordKeyNames are the keys' names, by recordKey.
var recordKeyNames = [numRecordKeys]string{
	"uid", "namespace", "name", "node", "source", "pod", "runtime", "probes", "reasons",
	"terminating", "terminated", "finished", "status", "version", "applied", "runtime_ts", "held",
	"seqs",
}

// recordKeyOf maps a key's name to its recordKey.
var recordKeyOf = func() map[string]recordKey {
	m := make(map[string]recordKey, numRecordKeys)
	for k, name := range recordKeyNames {
		m[name] = recordKey(k)
	}
	return m
}()

// The record values whose JSON the live mode keeps as it last wrote or read it (Record.raw), so
// that a record written back after an event copies the values the event left alone instead of
// encoding them again: the pod (replaced only by an update), the runtime snapshot, the probe
// results, the reason cache and the status (whose JSON the version written for it already holds).
const (
	rawPod = iota
	rawRuntime
	rawProbes
	rawReasons
	rawStatus
	rawSlots
)

// rawSlotOf is the Record.raw slot of a record key; -1 for the keys whose values are encoded each
// time (short strings, numbers and booleans).
func rawSlotOf(k recordKey) int {
	switch k {
	case keyPod:
		return rawPod
	case keyRuntime:
		return rawRuntime
	case keyProbes:
		return rawProbes
	case keyReasons:
		return rawReasons
	case keyStatus:
		return rawStatus
	}
	return -1
}

// rawSpans are where the raw-slot values of a record lie in its JSON, as [start, end) offsets;
// an end of 0 marks a value the JSON does not hold.
type rawSpans [rawSlots][2]int

// requiredKeys are the keys new_record gives every record: a stored record without one of them
// would make the Python fold raise somewhere, which the port does not reproduce.
const requiredKeys = 1<<keyRuntimeTs - 1

// topicNames are the ingress topics by their topicIndex.
var topicNames = [4]string{TopicPodUpdates, TopicPleg, TopicProbeResults, TopicPodLifecycle}

// recordShape is the order of a record's keys (one recordKey a byte) and of its "applied" and
// "seqs" topics (one topicIndex a byte). Strings, so that records of one shape share them.
type recordShape struct {
	keys    string
	applied string
	seqs    string
}

// newRecordKeys is the key order of new_record's dict.
var newRecordKeys = string([]byte{
	byte(keyUID), byte(keyNamespace), byte(keyName), byte(keyNode), byte(keySource), byte(keyPod),
	byte(keyRuntime), byte(keyProbes), byte(keyReasons), byte(keyTerminating), byte(keyTerminated),
	byte(keyFinished), byte(keyStatus), byte(keyVersion), byte(keyApplied),
})

// shapeInterner hands out one copy of each distinct shape string.
type shapeInterner map[string]string

func (in shapeInterner) intern(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	in[s] = s
	return s
}

// withKey is keys with k appended when it is missing.
func (in shapeInterner) withKey(keys string, k recordKey) string {
	for i := 0; i < len(keys); i++ {
		if keys[i] == byte(k) {
			return keys
		}
	}
	return in.intern(keys + string([]byte{byte(k)}))
}

// withTopic is applied with the topic of index t appended when it is missing.
func (in shapeInterner) withTopic(applied string, t int) string {
	for i := 0; i < len(applied); i++ {
		if int(applied[i]) == t {
			return applied
		}
	}
	return in.intern(applied + string([]byte{byte(t)}))
}

// decodeStored reads a stored record of the pod uid: an announced pod's record and its shape, or
// the record of a pod whose events wait for its announcement ("pod" null). It returns why the
// port does not model the record ("" when it does): see decodeAnnounced and decodeHeldRecord, or
// it is not JSON the port reads. With keepRaw, an announced pod's record keeps its values' JSON as
// slices of data (Record.raw), which the caller keeps unchanged while the record is parsed.
func decodeStored(uid string, data []byte, shapes shapeInterner, keepRaw bool) (*Record, recordShape, *heldRecord, string) {
	var spans []topSpan
	var parsed any
	var err error
	if keepRaw {
		spans = make([]topSpan, 0, numRecordKeys)
		parsed, err = parseSpans(data, &spans)
	} else {
		parsed, err = Parse(data)
	}
	if err != nil {
		return nil, recordShape{}, nil, "not JSON the port reads: " + err.Error()
	}
	obj := ObjOf(parsed)
	if obj == nil {
		return nil, recordShape{}, nil, "not a JSON object"
	}
	if pod, ok := obj.Lookup("pod"); ok && pod == nil {
		h, why := decodeHeldRecord(uid, obj, shapes)
		return nil, recordShape{}, h, why
	}
	r, shape, why := decodeAnnounced(uid, obj, shapes)
	if r != nil && len(spans) == obj.Len() {
		for i, name := range obj.Keys() {
			if slot := rawSlotOf(recordKeyOf[name]); slot >= 0 {
				r.raw[slot] = data[spans[i].start:spans[i].end:spans[i].end]
			}
		}
	}
	return r, shape, nil, why
}

// decodeAnnounced reads the record of an announced pod. It returns why the port does not model
// the record ("" when it does): one with held events, with a key or a value of a type new_record
// and _apply never give.
func decodeAnnounced(uid string, obj *Obj, shapes shapeInterner) (*Record, recordShape, string) {
	r := &Record{}
	var keys, applied, seqs []byte
	var present uint32
	for i, name := range obj.Keys() {
		k, known := recordKeyOf[name]
		if !known {
			return nil, recordShape{}, "a key the port does not model: " + strconv.Quote(name)
		}
		v := obj.Values()[i]
		ok := true
		switch k {
		case keyUID:
			r.UID, ok = v.(string)
		case keyNamespace:
			r.Namespace, ok = v.(string)
		case keyName:
			r.Name, ok = v.(string)
		case keyNode:
			r.Node, ok = v.(string)
		case keySource:
			r.Source, ok = v.(string)
		case keyPod:
			r.Pod = ObjOf(v)
			ok = r.Pod != nil
		case keyRuntime:
			r.Runtime, ok = optionalObj(v)
		case keyRuntimeTs:
			r.RuntimeTs, ok = v.(int64)
		case keyProbes:
			r.Probes = ObjOf(v)
			ok = r.Probes != nil
		case keyReasons:
			r.Reasons = ObjOf(v)
			ok = r.Reasons != nil
		case keyTerminating:
			r.Terminating, ok = v.(bool)
		case keyTerminated:
			r.Terminated, ok = v.(bool)
		case keyFinished:
			r.Finished, ok = v.(bool)
		case keyStatus:
			r.Status, ok = optionalObj(v)
		case keyVersion:
			r.Version, ok = v.(int64)
		case keyApplied:
			applied, ok = decodeApplied(v, &r.applied)
		case keySeqs:
			seqs, ok = decodeApplied(v, &r.seqs)
		case keyHeld:
			held, isList := v.([]any)
			ok = isList && len(held) == 0
		}
		if !ok {
			return nil, recordShape{}, "a value the port does not model under " + strconv.Quote(name)
		}
		keys = append(keys, byte(k))
		present |= 1 << k
	}
	if present&requiredKeys != requiredKeys {
		return nil, recordShape{}, "a key of new_record is missing"
	}
	if r.UID != uid {
		return nil, recordShape{}, "its uid is not its key"
	}
	shape := recordShape{keys: shapes.intern(string(keys)), applied: shapes.intern(string(applied))}
	if seqs != nil {
		shape.seqs = shapes.intern(string(seqs))
	}
	return r, shape, ""
}

// optionalObj reads a value that is an object or null.
func optionalObj(v any) (*Obj, bool) {
	if v == nil {
		return nil, true
	}
	o := ObjOf(v)
	return o, o != nil
}

// decodeApplied reads a record's {topic: highest offset applied} (or its {topic: highest proven
// sequence number applied}) into a, and returns the order of its topics.
func decodeApplied(v any, a *appliedOffsets) ([]byte, bool) {
	obj := ObjOf(v)
	if obj == nil {
		return nil, false
	}
	order := make([]byte, 0, obj.Len())
	for i, topic := range obj.Keys() {
		t := -1
		for j, name := range topicNames {
			if name == topic {
				t = j
			}
		}
		offset, isInt := obj.Values()[i].(int64)
		if t < 0 || !isInt {
			return nil, false
		}
		a.offsets[t], a.seen[t] = offset, true
		order = append(order, byte(t))
	}
	return order, true
}

// appendRecord appends the record's JSON with its keys in the shape's order: what orjson.dumps
// gives for the Python record in the same state. A value whose JSON the record keeps (Record.raw)
// is copied rather than encoded; spans, when not nil, gets where in dst each such value went.
func appendRecord(dst []byte, r *Record, shape recordShape, spans *rawSpans) []byte {
	dst = append(dst, '{')
	for i := 0; i < len(shape.keys); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		k := recordKey(shape.keys[i])
		dst = appendString(dst, recordKeyNames[k])
		dst = append(dst, ':')
		switch k {
		case keyUID:
			dst = appendString(dst, r.UID)
		case keyNamespace:
			dst = appendString(dst, r.Namespace)
		case keyName:
			dst = appendString(dst, r.Name)
		case keyNode:
			dst = appendString(dst, r.Node)
		case keySource:
			dst = appendString(dst, r.Source)
		case keyPod:
			dst = appendRawValue(dst, r, rawPod, r.Pod, spans)
		case keyRuntime:
			dst = appendRawValue(dst, r, rawRuntime, r.Runtime, spans)
		case keyRuntimeTs:
			dst = strconv.AppendInt(dst, r.RuntimeTs, 10)
		case keyProbes:
			dst = appendRawValue(dst, r, rawProbes, r.Probes, spans)
		case keyReasons:
			dst = appendRawValue(dst, r, rawReasons, r.Reasons, spans)
		case keyTerminating:
			dst = strconv.AppendBool(dst, r.Terminating)
		case keyTerminated:
			dst = strconv.AppendBool(dst, r.Terminated)
		case keyFinished:
			dst = strconv.AppendBool(dst, r.Finished)
		case keyStatus:
			dst = appendRawValue(dst, r, rawStatus, r.Status, spans)
		case keyVersion:
			dst = strconv.AppendInt(dst, r.Version, 10)
		case keyApplied:
			dst = appendApplied(dst, &r.applied, shape.applied)
		case keyHeld:
			dst = append(dst, "[]"...)
		case keySeqs:
			dst = appendApplied(dst, &r.seqs, shape.seqs)
		}
	}
	return append(dst, '}')
}

// appendRawValue appends the record's value in the given raw slot: its kept JSON when there is
// one, else v encoded. It notes where the value went in spans, when not nil.
func appendRawValue(dst []byte, r *Record, slot int, v *Obj, spans *rawSpans) []byte {
	start := len(dst)
	if raw := r.raw[slot]; raw != nil {
		dst = append(dst, raw...)
	} else {
		dst = Encode(dst, v)
	}
	if spans != nil {
		spans[slot] = [2]int{start, len(dst)}
	}
	return dst
}

// appendApplied appends the {topic: offset} object, its topics in the given order.
func appendApplied(dst []byte, a *appliedOffsets, order string) []byte {
	dst = append(dst, '{')
	for i := 0; i < len(order); i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		t := order[i]
		dst = appendString(dst, topicNames[t])
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, a.offsets[t], 10)
	}
	return append(dst, '}')
}
