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

	Kind        string // pod-lifecycle
	SyncResults []any

	Fields *Obj // the model's fields as event_fields() gives them
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

// ingressMarkers tell the ingress topics apart, checked in order (replay.py).
var ingressMarkers = [...]struct{ field, topic string }{
	{"pod", TopicPodUpdates},
	{"kind", TopicPodLifecycle},
	{"probe", TopicProbeResults},
	{"runtime", TopicPleg},
}

// inferTopic is replay.infer_topic: "" when the value is neither a journal
// entry nor an ingress event.
func inferTopic(value *Obj) string {
	if value.Has("event") && value.Has("topic") && value.Has("offset") {
		return TopicJournal
	}
	for _, m := range ingressMarkers {
		if value.Has(m.field) {
			return m.topic
		}
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
	parsed, err := Parse(raw)
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
		entry := validated(lineNo, TopicJournal, value)
		at := Coordinates{
			Topic:     entry.Get("topic").(string),
			Partition: entry.Get("partition").(int64),
			Offset:    entry.Get("offset").(int64),
			TsMs:      entry.Get("ts_ms").(int64),
		}
		return at, decodeEvent(lineNo, at.Topic, entry.Get("event").(*Obj))
	}
	ev := decodeEvent(lineNo, topic, value)
	return Coordinates{Topic: topic, Partition: 0, Offset: lineNo, TsMs: ev.TsMs}, ev
}

// validated checks value against the topic's schema and returns the model's
// fields, defaults filled in, in the model's order.
func validated(lineNo int64, topic string, value *Obj) *Obj {
	check := predicates[topic]
	if check == nil || !check.check(value) {
		// Either Python rejects it, or its fast test is unsure and the full
		// validator decides: not ported, so give up.
		unsupported("line %d: a %s value the schema test is not sure of", lineNo, topic)
	}
	fields := modelFields[topic]
	out := NewObj(len(fields))
	for _, f := range fields {
		v, ok := value.Lookup(f.name)
		if !ok {
			if !f.optional {
				unsupported("line %d: %s value without %s", lineNo, topic, f.name)
			}
			v = modelDefault(f.name)
		}
		out.appendNew(f.name, v)
	}
	return out
}

// decodeEvent is codec.from_dict for an ingress topic, flattened into an Event.
func decodeEvent(lineNo int64, topic string, value *Obj) *Event {
	f := validated(lineNo, topic, value)
	ev := &Event{Topic: topic, Fields: f, TsMs: f.Get("ts_ms").(int64), Node: f.Get("node").(string)}
	switch topic {
	case TopicPodUpdates:
		ev.Op = f.Get("op").(string)
		ev.Source = f.Get("source").(string)
		ev.Pod = f.Get("pod").(*Obj)
		ev.UID = ObjOf(ev.Pod.Get("metadata")).Get("uid").(string)
	case TopicPleg:
		ev.UID = f.Get("uid").(string)
		ev.Type = f.Get("type").(string)
		ev.ContainerID = f.Get("container_id")
		ev.Runtime = f.Get("runtime").(*Obj)
	case TopicProbeResults:
		ev.UID = f.Get("uid").(string)
		ev.ContainerName = f.Get("container_name").(string)
		ev.ContainerID = f.Get("container_id").(string)
		ev.Probe = f.Get("probe").(string)
		ev.Result = f.Get("result").(string)
	case TopicPodLifecycle:
		ev.UID = f.Get("uid").(string)
		ev.Kind = f.Get("kind").(string)
		ev.SyncResults = f.Get("sync_results").([]any)
		ev.Runtime = ObjOf(f.Get("runtime"))
	default:
		unsupported("line %d: events of topic %q are not ported", lineNo, topic)
	}
	return ev
}
