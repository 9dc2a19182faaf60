package foldcore

import (
	"bytes"
	"os"
	"regexp"
	"testing"
)

// stripAnnotations drops the keywords that only document a schema, at every
// place that holds a schema, as ingress_schemas.go's copies do.
func stripAnnotations(schema any) any {
	s := ObjOf(schema)
	if s == nil {
		return schema
	}
	out := NewObj(s.Len())
	for i, k := range s.Keys() {
		v := s.Values()[i]
		switch {
		case schemaAnnotations[k]:
			continue
		case k == "properties" && ObjOf(v) != nil:
			props := NewObj(ObjOf(v).Len())
			for j, name := range ObjOf(v).Keys() {
				props.Set(name, stripAnnotations(ObjOf(v).Values()[j]))
			}
			v = props
		case k == "items" || k == "additionalProperties":
			v = stripAnnotations(v)
		}
		out.Set(k, v)
	}
	return out
}

// TestSchemaCopies reads the real schema files: each must compile (it uses
// no keyword or constraint the port does not check) and equal its copy.
func TestSchemaCopies(t *testing.T) {
	for topic, text := range schemaCopies {
		data, err := os.ReadFile("../../schemas/" + topic + ".v1.json")
		if err != nil {
			t.Fatal(err)
		}
		real, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", topic, err)
		}
		if _, err := compileSchema(real); err != nil {
			t.Errorf("%s.v1.json: %v", topic, err)
		}
		if !Equal(stripAnnotations(real), parseForTest(t, text)) {
			t.Errorf("the copy of %s.v1.json in ingress_schemas.go is stale", topic)
		}
		if predicates[topic] == nil {
			t.Errorf("%s has no predicate", topic)
		}
	}
}

func TestCompileSchemaRefuses(t *testing.T) {
	refused := []string{
		`{"type":"string","format":"date"}`,
		`{"type":"object","properties":{"a":{"const":1}}}`,
		`{"minLength":1}`,
		`{"type":"string","pattern":"^a+$"}`,
		`{"type":"integer","minimum":true}`,
		`{"type":"array","items":{"type":"bogus"}}`,
		`{"enum":[]}`,
		`{"enum":["a",1]}`,
		`{"type":[]}`,
		`{"type":"object","additionalProperties":1}`,
		`{"type":"object","required":"a"}`,
		`{"type":"string","maxLength":-1}`,
	}
	for _, s := range refused {
		if _, err := compileSchema(parseForTest(t, s)); err == nil {
			t.Errorf("compiled %s", s)
		}
	}
	// A keyword for a type the value cannot have is skipped, as compiled.py does.
	if _, err := compileSchema(parseForTest(t, `{"type":"integer","pattern":"^a+$"}`)); err != nil {
		t.Errorf("refused a string keyword on an integer: %v", err)
	}
}

func TestSchemaCheck(t *testing.T) {
	node, err := compileSchema(parseForTest(t, `{"type":"object","required":["a","z"],"properties":{
		"a":{"type":"string","minLength":2,"maxLength":3},
		"b":{"type":["integer","null"],"minimum":1},
		"c":{"type":"array","items":{"enum":["x","y"]}},
		"d":{"type":"object","additionalProperties":false,"properties":{"e":{}}},
		"f":{"type":"object","additionalProperties":{"type":"boolean"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]bool{
		`{"a":"ab","z":0}`:                          true,
		`{"a":"ééé","z":0}`:                         true, // lengths count code points
		`{"a":"éééé","z":0}`:                        false,
		`{"a":"a","z":0}`:                           false,
		`{"a":"ab"}`:                                false,
		`{"a":"ab","z":0,"b":null}`:                 true,
		`{"a":"ab","z":0,"b":0}`:                    false,
		`{"a":"ab","z":0,"b":true}`:                 false, // bool is not an integer to the predicate
		`{"a":"ab","z":0,"c":["x","y"]}`:            true,
		`{"a":"ab","z":0,"c":["x","z"]}`:            false,
		`{"a":"ab","z":0,"d":{"e":[]}}`:             true,
		`{"a":"ab","z":0,"d":{"e":[],"g":1}}`:       false,
		`{"a":"ab","z":0,"f":{"p":true,"q":false}}`: true,
		`{"a":"ab","z":0,"f":{"p":1}}`:              false,
		`[]`:                                        false,
	}
	for in, want := range cases {
		if got := node.check(parseForTest(t, in)); got != want {
			t.Errorf("check(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestPatternMatchers(t *testing.T) {
	alphabet := []string{"a", "z", "A", "0", "9", "-", "_", ".", " ", "\n", "é", "/"}
	var inputs []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		inputs = append(inputs, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 4)
	for pattern, match := range patternMatchers {
		// Go's $ outside multi-line mode is the end of the text, like Python's \Z.
		re := regexp.MustCompile(pattern)
		for _, s := range inputs {
			if got, want := match(s), re.MatchString(s); got != want {
				t.Errorf("%s on %q: %v, want %v", pattern, s, got, want)
			}
		}
	}
}

func TestParseLine(t *testing.T) {
	at, ev := ParseLine(7, []byte(`{"uid":"u-1","node":"n","kind":"terminating","ts_ms":5,"grace_s":30,"x":1}`))
	if at != (Coordinates{"pod-lifecycle", 0, 7, 5}) || ev.UID != "u-1" || ev.Kind != "terminating" || ev.Runtime != nil {
		t.Fatalf("lifecycle: %+v %+v", at, ev)
	}
	want := `{"uid":"u-1","node":"n","kind":"terminating","ts_ms":5,"sync_results":[],"grace_s":30,"backoff":null,"runtime":null}`
	if got := string(Encode(nil, ev.Fields())); got != want {
		t.Errorf("lifecycle fields %s", got)
	}
	journal := `{"type":"pleg:PodSync","topic":"pleg","partition":2,"offset":9,"ts_ms":11,` +
		`"event":{"uid":"u","node":"n","type":"PodSync","container_id":null,"runtime":{"containers":[],"ips":[]},"ts_ms":10}}`
	at, ev = ParseLine(1, []byte(journal))
	if at != (Coordinates{"pleg", 2, 9, 11}) || ev.TsMs != 10 || ev.ContainerID != nil || ev.Runtime.Len() != 2 {
		t.Errorf("journal: %+v %+v", at, ev)
	}
	given := []string{
		``, `[]`, `{"a":1}`, `{"pod":1.5}`, `not json`,
		`{"uid":"u","node":"n","kind":"terminating","ts_ms":-1}`,
		`{"uid":"u","node":"n","kind":"terminating","ts_ms":true}`,
		`{"uid":"u/x","node":"n","kind":"terminating","ts_ms":1}`,
		`{"uid":"u","node":"","kind":"terminating","ts_ms":1}`,
		`{"uid":"u","node":"n","kind":"paused","ts_ms":1}`,
		`{"uid":"u","node":"n","kind":"terminating","ts_ms":1,"grace_s":0}`,
		`{"uid":"u","node":"n","kind":"terminating"}`,
		`{"type":"x","topic":"pod-status","partition":0,"offset":0,"ts_ms":0,"event":{}}`,
	}
	for _, line := range given {
		if !panicsUnsupported(func() { ParseLine(1, []byte(line)) }) {
			t.Errorf("ParseLine accepted %s", line)
		}
	}
}

// eventAttrs is the Event as the dict the vector script writes of the model's
// attributes, per topic.
func eventAttrs(ev *Event) *Obj {
	a := NewObj(8)
	a.Set("topic", ev.Topic)
	a.Set("uid", ev.UID)
	a.Set("node", ev.Node)
	a.Set("ts_ms", ev.TsMs)
	var runtime any
	if ev.Runtime != nil {
		runtime = ev.Runtime
	}
	switch ev.Topic {
	case TopicPodUpdates:
		a.Set("op", ev.Op)
		a.Set("source", ev.Source)
		a.Set("pod", ev.Pod)
	case TopicPleg:
		a.Set("type", ev.Type)
		a.Set("container_id", ev.ContainerID)
		a.Set("runtime", runtime)
	case TopicProbeResults:
		a.Set("container_name", ev.ContainerName)
		a.Set("container_id", ev.ContainerID)
		a.Set("probe", ev.Probe)
		a.Set("result", ev.Result)
	default:
		a.Set("kind", ev.Kind)
		a.Set("sync_results", ev.SyncResults)
		a.Set("runtime", runtime)
	}
	return a
}

// predicateOn runs the schema test on a line as Python's sure() in the
// vector script does; known is false when the port cannot parse the line.
func predicateOn(line []byte) (sure, known bool) {
	v, err := Parse(line)
	value := ObjOf(v)
	if err != nil || value == nil || inferTopic(value) == "" {
		return false, false
	}
	topic := inferTopic(value)
	sure = predicates[topic].check(value)
	if sure && topic == TopicJournal {
		sure = predicates[value.Get("topic").(string)].check(value.Get("event"))
	}
	return sure, true
}

// TestIngressVectors compares ParseLine with replay.parse_line on the file
// FOLDCORE_VECTORS_INGRESS names: lines {"line_no", "line" (base64), "ok"} and,
// when Python accepts the line, "coords" [topic, partition, offset, ts_ms],
// "sure" (Python's fast schema test on it), "fields" (base64 of encode(event_fields(event))) and "attrs" (base64 of the
// model's attributes that Event flattens).
func TestIngressVectors(t *testing.T) {
	sc := vectorLines(t, "FOLDCORE_VECTORS_INGRESS")
	var total, accepted, rejected, gaveUp int
	for sc.Scan() {
		vec := ObjOf(parseForTest(t, sc.Text()))
		lineNo := vec.Get("line_no").(int64)
		line := decodeBase64(t, vec.Get("line"))
		total++
		if sure, ok := vec.Get("sure").(bool); ok {
			if got, known := predicateOn(line); known && got != sure {
				t.Errorf("schema test says %v, Python's says %v: %.300s", got, sure, line)
			}
		}
		var at Coordinates
		var ev *Event
		if reason, ok := gaveUpReason(func() { at, ev = ParseLine(lineNo, line) }); ok {
			if vec.Get("ok") == true {
				gaveUp++
				if gaveUp <= 10 {
					t.Logf("gave up (%s) on a line Python accepts: %.200s", reason, line)
				}
			} else {
				rejected++
			}
			continue
		}
		if vec.Get("ok") != true {
			t.Errorf("accepted a line Python dead-letters: %.300s", line)
			continue
		}
		accepted++
		c := ListOf(vec.Get("coords"))
		if c == nil {
			t.Errorf("accepted a line whose coordinates Python reads from floats: %.300s", line)
			continue
		}
		want := Coordinates{c[0].(string), c[1].(int64), c[2].(int64), c[3].(int64)}
		if at != want {
			t.Errorf("coordinates %+v, want %+v: %.200s", at, want, line)
		}
		if got, want := Encode(nil, ev.Fields()), decodeBase64(t, vec.Get("fields")); !bytes.Equal(got, want) {
			t.Errorf("fields\n got %s\nwant %s", got, want)
		}
		if got, want := Encode(nil, eventAttrs(ev)), decodeBase64(t, vec.Get("attrs")); !bytes.Equal(got, want) {
			t.Errorf("event\n got %s\nwant %s", got, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lines: %d accepted alike, %d given up on alike, %d given up on though Python accepts them",
		total, accepted, rejected, gaveUp)
}

func BenchmarkParseLine(b *testing.B) {
	data := []byte(benchLine)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		ParseLine(1, data)
	}
}
