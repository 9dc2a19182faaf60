package foldcore

// This file turns one input line into an event, as streams/replay.py
// parse_line does with schemas/codec.py from_dict and the models of
// schemas/models.py.

// The topic names (TopicPodUpdates, ...) are declared in fold.go.

// Coordinates say where an event came from, as replay.parse_line reports them.
type Coordinates struct {
	Topic     string
	Partition int64
	Offset    int64
	TsMs      int64
}

// Event is one decoded ingress event (schemas/models.py), flattened.
type Event struct {
	Topic string // logical topic name as in podledger/types.py Topic values
	UID   string
	Node  string
	TsMs  int64

	Op     string // pod-updates
	Source string
	Pod    *Obj

	Type        string // pleg; lifecycle's runtime shares Runtime
	ContainerID any
	Runtime     *Obj // nil when the model holds None

	ContainerName string // probe-results (ContainerID holds its id)
	Probe         string
	Result        string
	result        any // Result as the JSON value parsed (boxed already)

	Kind        string // pod-lifecycle
	SyncResults []any

	fields []any // the model's field values in declaration order (modelFields)
}

// Fields is the event's model fields as event_fields() gives them, a new object.
func (ev *Event) Fields() *Obj {
	names := modelFields[ev.Topic]
	out := NewObj(len(names))
	for i, f := range names {
		out.appendNew(f.name, ev.fields[i])
	}
	return out
}

// modelField is one field of a model: its name, and whether it is optional
// (then the model's default is filled in when the value leaves it out).
type modelField struct {
	name     string
	optional bool
}

// modelFields lists each model's dataclass fields in declaration order.
var modelFields = map[string][]modelField{
	TopicPodUpdates:   {{"op", false}, {"source", false}, {"node", false}, {"pod", false}, {"ts_ms", false}},
	TopicPleg:         {{"uid", false}, {"node", false}, {"type", false}, {"container_id", false}, {"runtime", false}, {"ts_ms", false}},
	TopicProbeResults: {{"uid", false}, {"node", false}, {"container_name", false}, {"container_id", false}, {"probe", false}, {"result", false}, {"ts_ms", false}},
	TopicPodLifecycle: {{"uid", false}, {"node", false}, {"kind", false}, {"ts_ms", false}, {"sync_results", true}, {"grace_s", true}, {"backoff", true}, {"runtime", true}},
	TopicJournal:      {{"type", false}, {"topic", false}, {"partition", false}, {"offset", false}, {"ts_ms", false}, {"event", false}},
}

// modelDefault is the default of an optional model field (PodLifecycle's:
// sync_results a fresh empty list, the others None).
func modelDefault(name string) any {
	if name == "sync_results" {
		return []any{}
	}
	return nil
}

// inferTopic is replay.infer_topic: "" when the value is neither a journal
// entry nor an ingress event. One pass over the keys notes the markers.
func inferTopic(value *Obj) string {
	const (
		event = 1 << iota
		topic
		offset
		pod
		kind
		probe
		runtime
	)
	var has int
	for _, k := range value.Keys() {
		switch k {
		case "event":
			has |= event
		case "topic":
			has |= topic
		case "offset":
			has |= offset
		case "pod":
			has |= pod
		case "kind":
			has |= kind
		case "probe":
			has |= probe
		case "runtime":
			has |= runtime
		}
	}
	// The ingress markers are checked in replay.py's order: each is required by
	// its topic's schema, and none appears in a topic checked after it.
	switch {
	case has&(event|topic|offset) == event|topic|offset:
		return TopicJournal
	case has&pod != 0:
		return TopicPodUpdates
	case has&kind != 0:
		return TopicPodLifecycle
	case has&probe != 0:
		return TopicProbeResults
	case has&runtime != 0:
		return TopicPleg
	}
	return ""
}

// predicates holds each topic's compiled schema test; a topic whose schema
// did not compile has none, and every value of it is given up on.
var predicates = func() map[string]*schemaNode {
	out := map[string]*schemaNode{}
	for topic, text := range schemaCopies {
		schema, err := Parse([]byte(text))
		if err != nil {
			continue
		}
		if node, err := compileSchema(schema); err == nil {
			out[topic] = node
		}
	}
	return out
}()

// ParseLine decodes one input line as replay.parse_line does; it gives up on
// any line Python would dead-letter and on anything the port does not cover.
// lineNo is the line's number from 1; blank lines are the caller's to skip.
func ParseLine(lineNo int64, raw []byte) (Coordinates, *Event) {
	ev := new(Event)
	return parseLineInto(lineNo, raw, ev, nil), ev
}

// parseLineInto is ParseLine decoding into ev, which it overwrites whole. With line not nil, the
// line's own object is built there (parseInto): ev is then valid until line is reused.
func parseLineInto(lineNo int64, raw []byte, ev *Event, line *Obj) Coordinates {
	parsed, err := parseInto(raw, line)
	if err != nil {
		unsupported("line %d: %v", lineNo, err)
	}
	value := ObjOf(parsed)
	if value == nil {
		unsupported("line %d: not a JSON object", lineNo)
	}
	topic := inferTopic(value)
	switch topic {
	case "":
		unsupported("line %d: neither a journal entry nor an ingress event", lineNo)
	case TopicJournal:
		e := validated(lineNo, TopicJournal, value) // type, topic, partition, offset, ts_ms, event
		at := Coordinates{Topic: e[1].(string), Partition: e[2].(int64), Offset: e[3].(int64), TsMs: e[4].(int64)}
		decodeEvent(lineNo, at.Topic, e[5].(*Obj), ev)
		return at
	}
	decodeEvent(lineNo, topic, value, ev)
	return Coordinates{Topic: topic, Partition: 0, Offset: lineNo, TsMs: ev.TsMs}
}

// validated checks value against the topic's schema and returns the model's
// field values, defaults filled in, in the model's order. The slice may be
// value's own: it must not be changed.
func validated(lineNo int64, topic string, value *Obj) []any {
	check := predicates[topic]
	if check == nil || !check.check(value) {
		// Either Python rejects it, or its fast test is unsure and the full
		// validator decides: not ported, so give up.
		unsupported("line %d: a %s value the schema test is not sure of", lineNo, topic)
	}
	fields := modelFields[topic]
	if inModelOrder(value, fields) { // as the model encodes: no lookups needed
		return value.Values()
	}
	out := make([]any, 0, len(fields))
	for _, f := range fields {
		v, ok := value.Lookup(f.name)
		if !ok {
			if !f.optional {
				unsupported("line %d: %s value without %s", lineNo, topic, f.name)
			}
			v = modelDefault(f.name)
		}
		out = append(out, v)
	}
	return out
}

// inModelOrder reports whether value holds exactly the model's fields, in
// the model's order.
func inModelOrder(value *Obj, fields []modelField) bool {
	keys := value.Keys()
	if len(keys) != len(fields) {
		return false
	}
	for i, k := range keys {
		if k != fields[i].name {
			return false
		}
	}
	return true
}

// decodeEvent is codec.from_dict for an ingress topic, flattened into ev (all of
// it overwritten). It reads the fields by their position in modelFields.
func decodeEvent(lineNo int64, topic string, value *Obj, ev *Event) {
	v := validated(lineNo, topic, value)
	*ev = Event{Topic: topic, fields: v}
	switch topic {
	case TopicPodUpdates: // op, source, node, pod, ts_ms
		ev.Op, ev.Source, ev.Node = v[0].(string), v[1].(string), v[2].(string)
		ev.Pod, ev.TsMs = v[3].(*Obj), v[4].(int64)
		ev.UID = ObjOf(ev.Pod.Get("metadata")).Get("uid").(string)
	case TopicPleg: // uid, node, type, container_id, runtime, ts_ms
		ev.UID, ev.Node, ev.Type = v[0].(string), v[1].(string), v[2].(string)
		ev.ContainerID, ev.Runtime, ev.TsMs = v[3], v[4].(*Obj), v[5].(int64)
	case TopicProbeResults: // uid, node, container_name, container_id, probe, result, ts_ms
		ev.UID, ev.Node, ev.ContainerName = v[0].(string), v[1].(string), v[2].(string)
		_ = v[3].(string) // kept boxed as parsed
		ev.ContainerID, ev.Probe, ev.Result, ev.TsMs = v[3], v[4].(string), v[5].(string), v[6].(int64)
		ev.result = v[5]
	case TopicPodLifecycle: // uid, node, kind, ts_ms, sync_results, grace_s, backoff, runtime
		ev.UID, ev.Node, ev.Kind, ev.TsMs = v[0].(string), v[1].(string), v[2].(string), v[3].(int64)
		ev.SyncResults, ev.Runtime = v[4].([]any), ObjOf(v[7])
	default:
		unsupported("line %d: events of topic %q are not ported", lineNo, topic)
	}
}
