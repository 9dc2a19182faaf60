package foldcore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The live mode's tests drive Server.Serve in process with hand-made requests. The offline fold
// is the reference: whatever batches the events come in, and however often the records go out
// and come back in, the versions must be the offline fold's, byte for byte.

// serveInput for a test: one Kafka record.
type testInput struct {
	topic     byte
	partition uint32
	offset    int64
	tsMs      int64
	value     []byte // nil: None
	proof     *testProof
}

// testProof is an input's proven writer; a batch whose inputs have one goes as a 'P' request.
type testProof struct {
	node string
	seq  uint64
}

type testOutput struct {
	kind                  byte
	partition             uint32
	key                   string
	value                 []byte
	version, tsMs         int64
	node, namespace, name string
	seq                   uint64 // a proven journal entry's (node is its writer)
}

type testChanged struct {
	partition uint32
	key       string
	record    []byte // nil: None
}

type testAnswer struct {
	ok      bool
	reason  string
	dropped []string
	outputs []testOutput
	changed []testChanged
	newest  [][2]int64
}

// request runs one request through s and returns the raw response.
func request(t *testing.T, s *Server, req []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := s.Serve(bytes.NewReader(req), &out); err != nil {
		t.Fatalf("serve: %v", err)
	}
	answer := out.Bytes()
	if len(answer) < 4 || int(binary.LittleEndian.Uint32(answer)) != len(answer)-4 {
		t.Fatalf("an answer not preceded by its length: %v", answer)
	}
	return answer[4:]
}

func appendNBytes(dst, b []byte) []byte {
	if b == nil {
		return binary.LittleEndian.AppendUint32(dst, noneLength)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// loadRecords sends 'L' with the records (nil: None) of the keys.
func loadRecords(t *testing.T, s *Server, keys []string, records [][]byte) {
	t.Helper()
	req := binary.LittleEndian.AppendUint32([]byte{requestLoad}, uint32(len(keys)))
	for i, key := range keys {
		req = appendBytes(req, key)
		req = appendNBytes(req, records[i])
	}
	if resp := request(t, s, req); !bytes.Equal(resp, []byte{answerOK}) {
		t.Fatalf("load answered %v", resp)
	}
}

func batchRequest(inputs []testInput) []byte {
	kind := byte(requestBatch)
	if len(inputs) > 0 && inputs[0].proof != nil {
		kind = requestProvenBatch
	}
	req := binary.LittleEndian.AppendUint32([]byte{kind}, uint32(len(inputs)))
	for _, in := range inputs {
		req = append(req, in.topic)
		req = binary.LittleEndian.AppendUint32(req, in.partition)
		req = binary.LittleEndian.AppendUint64(req, uint64(in.offset))
		req = binary.LittleEndian.AppendUint64(req, uint64(in.tsMs))
		req = appendNBytes(req, in.value)
		if kind == requestProvenBatch {
			req = appendNBytes(req, []byte(in.proof.node))
			req = binary.LittleEndian.AppendUint64(req, in.proof.seq)
		}
	}
	return req
}

// foldBatch sends 'B' and parses the answer.
func foldBatch(t *testing.T, s *Server, inputs []testInput) testAnswer {
	t.Helper()
	r := &respReader{t: t, b: request(t, s, batchRequest(inputs))}
	var a testAnswer
	switch status := r.u8(); status {
	case answerGaveUp:
		a.reason = string(r.bytes())
		for n := r.u32(); n > 0; n-- {
			a.dropped = append(a.dropped, string(r.bytes()))
		}
	case answerOK:
		a.ok = true
		for n := r.u32(); n > 0; n-- {
			o := testOutput{kind: r.u8(), partition: r.u32(), key: string(r.bytes())}
			switch o.kind {
			case outputJournal:
				o.value = r.bytes()
			case outputVersion:
				o.value = r.bytes()
				o.version, o.tsMs = r.i64(), r.i64()
				o.node, o.namespace, o.name = string(r.bytes()), string(r.bytes()), string(r.bytes())
			case outputTombstone:
			case outputProvenJournal:
				o.value, o.node = r.bytes(), string(r.bytes())
				o.seq = uint64(r.i64())
			default:
				t.Fatalf("output kind %d", o.kind)
			}
			a.outputs = append(a.outputs, o)
		}
		for n := r.u32(); n > 0; n-- {
			a.changed = append(a.changed, testChanged{partition: r.u32(), key: string(r.bytes()), record: r.nbytes()})
		}
		for n := r.u32(); n > 0; n-- {
			a.newest = append(a.newest, [2]int64{int64(r.u32()), r.i64()})
		}
	default:
		t.Fatalf("answer status %d", status)
	}
	if len(r.b) != 0 {
		t.Fatalf("%d bytes after the answer", len(r.b))
	}
	return a
}

type respReader struct {
	t *testing.T
	b []byte
}

func (r *respReader) take(n int) []byte {
	if len(r.b) < n {
		r.t.Fatalf("answer ends early")
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *respReader) u8() byte    { return r.take(1)[0] }
func (r *respReader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *respReader) i64() int64  { return int64(binary.LittleEndian.Uint64(r.take(8))) }
func (r *respReader) bytes() []byte {
	return r.take(int(r.u32()))
}
func (r *respReader) nbytes() []byte {
	n := r.u32()
	if n == noneLength {
		return nil
	}
	return r.take(int(n))
}

// inputsOf makes the Kafka records of ingress lines as ParseLine places them: partition 0, the
// line number as the offset, the event's time as the record's.
func inputsOf(t *testing.T, lines [][]byte) []testInput {
	t.Helper()
	inputs := make([]testInput, len(lines))
	for i, line := range lines {
		at, _ := ParseLine(int64(i+1), line)
		inputs[i] = testInput{topic: byte(topicIndex(at.Topic)), offset: at.Offset, tsMs: at.TsMs, value: line}
	}
	return inputs
}

// history is the version values of the answers' outputs, a line each.
func history(answers ...testAnswer) []byte {
	var out []byte
	for _, a := range answers {
		for _, o := range a.outputs {
			if o.kind == outputVersion {
				out = append(append(out, o.value...), '\n')
			}
		}
	}
	return out
}

func TestServeMatchesOfflineFold(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		lines := syntheticEvents(rng, 10, 1200)
		want, stats := foldForTest(t, lines, true)
		inputs := inputsOf(t, lines)

		straight, restarted := NewServer(DefaultMaxEventBytes), NewServer(DefaultMaxEventBytes)
		stored := map[string][]byte{} // the records as the restarted server last gave them
		var got, gotRestarted []byte
		journals := 0
		for start := 0; start < len(inputs); {
			end := min(len(inputs), start+1+rng.IntN(60))
			batch := inputs[start:end]
			a := foldBatch(t, straight, batch)
			b := foldBatch(t, restarted, batch)
			if !a.ok || !b.ok {
				t.Fatalf("seed %d: gave up: %q %q", seed, a.reason, b.reason)
			}
			got, gotRestarted = append(got, history(a)...), append(gotRestarted, history(b)...)
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("seed %d, inputs %d-%d: a restarted server answers otherwise", seed, start, end)
			}
			for i, o := range a.outputs {
				if o.kind == outputJournal {
					checkJournal(t, o, batch, &journals)
				} else if o.kind == outputVersion && (i == 0 || a.outputs[i-1].key != o.key) {
					t.Fatalf("a version not after its event's journal entry or version")
				}
			}
			for _, c := range b.changed {
				stored[c.key] = c.record
			}
			if rng.IntN(4) == 0 { // a new server loads the records: they must round-trip
				restarted = NewServer(DefaultMaxEventBytes)
				var keys []string
				var records [][]byte
				for k, r := range stored {
					if r != nil {
						keys, records = append(keys, k), append(records, r)
					}
				}
				loadRecords(t, restarted, keys, records)
				for _, k := range keys {
					if !restarted.Covered(k) {
						t.Fatalf("seed %d: the record of %s is not covered after a load:\n%s", seed, k, stored[k])
					}
				}
			}
			start = end
		}
		if !bytes.Equal(got, want) || !bytes.Equal(gotRestarted, want) {
			t.Fatalf("seed %d: the served history differs from the offline fold's (%d versions)", seed, stats.Versions)
		}
		if journals != len(lines) {
			t.Fatalf("seed %d: %d journal entries for %d events", seed, journals, len(lines))
		}
	}
}

// checkJournal checks a journal entry against the batch's input it stands for: its coordinates,
// and its event the input's value.
func checkJournal(t *testing.T, o testOutput, batch []testInput, count *int) {
	t.Helper()
	*count++
	entry := servedObj(t, o.value)
	offset := entry.Get("offset").(int64)
	for _, in := range batch {
		if in.offset != offset {
			continue
		}
		_, ev := ParseLine(1, in.value)
		if entry.Get("topic") != topicNames[in.topic] || entry.Get("ts_ms") != in.tsMs || entry.Keys()[0] != "type" ||
			!bytes.Equal(Encode(nil, entry.Get("event")), Encode(nil, ev.Fields())) {
			t.Fatalf("journal entry %s\nfor input %s", o.value, in.value)
		}
		return
	}
	t.Fatalf("journal entry of no input: %s", o.value)
}

func servedObj(t *testing.T, data []byte) *Obj {
	t.Helper()
	v, err := Parse(data)
	if err != nil || ObjOf(v) == nil {
		t.Fatalf("not a JSON object (%v): %s", err, data)
	}
	return ObjOf(v)
}

const (
	podA = `{"metadata":{"uid":"a","name":"pa","namespace":"ns"},"spec":{"containers":[{"name":"app"}]},"status":{"phase":"Pending"}}`
	podB = `{"metadata":{"uid":"b","name":"pb","namespace":""},"spec":{"containers":[{"name":"app"}]}}`
)

func podUpdate(op, pod string, ts int64) string {
	return fmt.Sprintf(`{"op":%q,"source":"api","node":"n1","pod":%s,"ts_ms":%d}`, op, pod, ts)
}

func pleg(uid, state string, ts int64) string {
	return fmt.Sprintf(`{"uid":%q,"node":"n1","type":"PodSync","container_id":null,"runtime":{"containers":[`+
		`{"id":"c1","name":"app","image":"i","state":%q,"created_at":"2023-11-14T22:13:20Z",`+
		`"started_at":"2023-11-14T22:13:20Z","restart_count":0}],"ips":["10.0.0.1"],"runtime_type":"sim",`+
		`"sandbox":{"id":"s","ready":true}},"ts_ms":%d}`, uid, state, ts)
}

func probe(uid, result string, ts int64) string {
	return fmt.Sprintf(`{"uid":%q,"node":"n1","container_name":"app","container_id":"sim://c1",`+
		`"probe":"readiness","result":%q,"ts_ms":%d}`, uid, result, ts)
}

func in(topic string, offset, ts int64, value string) testInput {
	return testInput{topic: byte(topicIndex(topic)), partition: 2, offset: offset, tsMs: ts, value: []byte(value)}
}

func TestServeAnswersABatch(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	a := foldBatch(t, s, []testInput{
		in(TopicPodUpdates, 10, 1_700_000_000_000, podUpdate("ADD", podA, 1)),
		in(TopicPleg, 20, 1_700_000_001_000, pleg("a", "running", 1_700_000_001_000)),
		in(TopicPleg, 20, 1_700_000_001_000, pleg("a", "running", 1_700_000_001_000)), // redelivered
	})
	if !a.ok {
		t.Fatal(a.reason)
	}
	kinds := ""
	for _, o := range a.outputs {
		kinds += fmt.Sprint(o.kind)
		if o.partition != 2 || o.key != "a" {
			t.Fatalf("output %+v", o)
		}
		if o.kind == outputVersion {
			v := servedObj(t, o.value)
			if o.version != v.Get("version") || o.tsMs != v.Get("ts_ms") || o.node != "n1" ||
				o.namespace != "ns" || o.name != "pa" {
				t.Fatalf("version headers %+v of %s", o, o.value)
			}
		}
	}
	if kinds != "0101" {
		t.Fatalf("output kinds %s, want journal, version, journal, version", kinds)
	}
	wantJournal := `{"type":"pod-updates:ADD","topic":"pod-updates","partition":2,"offset":10,"ts_ms":1700000000000,` +
		`"event":{"op":"ADD","source":"api","node":"n1","pod":` + podA + `,"ts_ms":1}}`
	if string(a.outputs[0].value) != wantJournal {
		t.Fatalf("journal entry\n%s\nwant\n%s", a.outputs[0].value, wantJournal)
	}
	if len(a.changed) != 1 || a.changed[0].key != "a" || a.changed[0].partition != 2 {
		t.Fatalf("changed %+v", a.changed)
	}
	record := servedObj(t, a.changed[0].record)
	wantKeys := "uid namespace name node source pod runtime probes reasons terminating terminated " +
		"finished status version applied runtime_ts"
	if strings.Join(record.Keys(), " ") != wantKeys {
		t.Fatalf("record keys %v", record.Keys())
	}
	applied := `"applied":{"pod-updates":10,"pleg":20},"runtime_ts":1700000001000}`
	if !bytes.HasSuffix(a.changed[0].record, []byte(applied)) || record.Get("version") != int64(2) {
		t.Fatalf("record %s", a.changed[0].record)
	}
	if fmt.Sprint(a.newest) != "[[2 1700000000000]]" {
		t.Fatalf("newest %v", a.newest)
	}
}

func TestServeRemove(t *testing.T) {
	s := NewServer(0)
	a := foldBatch(t, s, []testInput{
		in(TopicPodUpdates, 1, 5, podUpdate("ADD", podA, 5)),
		in(TopicPodUpdates, 2, 6, podUpdate("ADD", podB, 6)),
	})
	b := foldBatch(t, s, []testInput{
		in(TopicPodUpdates, 3, 7, podUpdate("REMOVE", podA, 7)),
		{topic: 0, partition: 1, offset: 4, tsMs: 9, value: []byte(podUpdate("REMOVE", podA, 8))}, // no record now
		in(TopicPodUpdates, 5, 8, podUpdate("REMOVE", podB, 8)),
		in(TopicPodUpdates, 6, 9, podUpdate("ADD", podB, 9)),
	})
	if !a.ok || !b.ok {
		t.Fatal(a.reason, b.reason)
	}
	kinds := ""
	for _, o := range b.outputs {
		kinds += fmt.Sprint(o.kind)
	}
	if kinds != "02020201" {
		t.Fatalf("output kinds %s", kinds)
	}
	if len(b.changed) != 2 || b.changed[0].key != "a" || b.changed[0].record != nil || b.changed[1].key != "b" ||
		servedObj(t, b.changed[1].record).Get("version") != int64(1) {
		t.Fatalf("changed %+v", b.changed)
	}
	if fmt.Sprint(b.newest) != "[[1 9] [2 9]]" {
		t.Fatalf("newest %v", b.newest)
	}
}

func TestServeGivesUpAndRecovers(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	s.HoldMaxEvents = 0 // an event for a pod not announced yet gives up: it would be dead-lettered
	a := foldBatch(t, s, []testInput{
		in(TopicPodUpdates, 1, 5, podUpdate("ADD", podA, 5)),
		in(TopicPodUpdates, 2, 6, podUpdate("ADD", podB, 6)),
	})
	recordA := a.changed[0].record
	g := foldBatch(t, s, []testInput{
		in(TopicPleg, 1, 7, pleg("a", "running", 7)),
		in(TopicPleg, 2, 8, pleg("c", "running", 8)), // no room to hold it
		in(TopicProbeResults, 1, 9, probe("b", "Success", 9)),
	})
	if g.ok || !strings.Contains(g.reason, "input 1 of 3") || fmt.Sprint(g.dropped) != "[a c]" {
		t.Fatalf("answer %+v", g)
	}
	if s.Covered("a") || !s.Covered("b") {
		t.Fatal("a must be dropped, b kept")
	}
	// An event of a dropped pod gives up, until its record is loaded again.
	g = foldBatch(t, s, []testInput{
		in(TopicProbeResults, 1, 9, probe("b", "Success", 9)),
		in(TopicProbeResults, 2, 9, probe("a", "Success", 9)),
	})
	if g.ok || !strings.Contains(g.reason, "does not model") || fmt.Sprint(g.dropped) != "[b a]" {
		t.Fatalf("answer %+v", g)
	}
	loadRecords(t, s, []string{"a", "b", "c"}, [][]byte{recordA, a.changed[1].record, nil})
	ok := foldBatch(t, s, []testInput{
		in(TopicPleg, 1, 7, pleg("a", "running", 7)),
		in(TopicPodUpdates, 3, 8, podUpdate("ADD", podB[:len(podB)-1]+`,"status":{}}`, 8)),
	})
	if !ok.ok {
		t.Fatal(ok.reason)
	}
	// The same events on a server that never gave up.
	fresh := NewServer(DefaultMaxEventBytes)
	foldBatch(t, fresh, []testInput{
		in(TopicPodUpdates, 1, 5, podUpdate("ADD", podA, 5)),
		in(TopicPodUpdates, 2, 6, podUpdate("ADD", podB, 6)),
	})
	want := foldBatch(t, fresh, []testInput{
		in(TopicPleg, 1, 7, pleg("a", "running", 7)),
		in(TopicPodUpdates, 3, 8, podUpdate("ADD", podB[:len(podB)-1]+`,"status":{}}`, 8)),
	})
	if fmt.Sprint(ok) != fmt.Sprint(want) {
		t.Fatalf("after recovery:\n%+v\nwant\n%+v", ok, want)
	}
}

func TestServeGivesUpWherePythonDeadLetters(t *testing.T) {
	add := in(TopicPodUpdates, 1, 5, podUpdate("ADD", podA, 5))
	cases := map[string]testInput{
		"None":       {topic: 1, value: nil},
		"oversize":   in(TopicPleg, 2, 6, pleg("a", "running", 6)+strings.Repeat(" ", 600)),
		"not JSON":   in(TopicPleg, 2, 6, `{"uid":`),
		"not schema": in(TopicPleg, 2, 6, `{"uid":"a"}`),
		"forged":     in(TopicProbeResults, 2, 6, strings.Replace(probe("a", "Success", 6), `"n1"`, `"n2"`, 1)),
		"a float":    in(TopicPodLifecycle, 2, 6, `{"uid":"a","node":"n1","kind":"terminating","ts_ms":6,"grace_s":1.5}`),
	}
	for name, bad := range cases {
		s := NewServer(600)
		g := foldBatch(t, s, []testInput{add, bad})
		if g.ok || !strings.Contains(g.reason, "input 1 of 2") || fmt.Sprint(g.dropped) != "[a]" {
			t.Errorf("%s: answer %+v", name, g)
		}
	}
}

func TestServeKeepsARecordsShape(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	a := foldBatch(t, s, []testInput{
		in(TopicPodUpdates, 1, 5, podUpdate("ADD", podA, 5)),
		in(TopicProbeResults, 4, 6, probe("a", "Success", 6)),
	})
	// The same record with its keys, and its applied topics, in another order, and an empty held
	// list: a new server keeps that order, and writes the same bytes back.
	record := servedObj(t, a.changed[0].record)
	shuffled := NewObj(0)
	shuffled.Set("held", []any{})
	for _, k := range []string{"status", "version"} {
		shuffled.Set(k, record.Get(k))
	}
	applied := NewObj(0)
	applied.Set("probe-results", int64(4))
	applied.Set("pod-updates", int64(1))
	shuffled.Set("applied", applied)
	for i, k := range record.Keys() {
		shuffled.SetDefault(k, record.Values()[i])
	}
	data := Encode(nil, shuffled)
	r, shape, _, why := decodeStored("a", data, shapeInterner{}, false)
	if why != "" || !bytes.Equal(appendRecord(nil, r, shape, nil), data) {
		t.Fatalf("round trip (%s):\n%s\n%s", why, appendRecord(nil, r, shape, nil), data)
	}
	other := NewServer(DefaultMaxEventBytes)
	loadRecords(t, other, []string{"a"}, [][]byte{data})
	next := []testInput{in(TopicPleg, 2, 7, pleg("a", "running", 7))}
	got, want := foldBatch(t, other, next), foldBatch(t, s, next)
	if history(got) == nil || !bytes.Equal(history(got), history(want)) {
		t.Fatalf("versions differ:\n%s\n%s", history(got), history(want))
	}
	keys := strings.Join(servedObj(t, got.changed[0].record).Keys(), " ")
	if !strings.HasPrefix(keys, "held status version applied uid") || !strings.HasSuffix(keys, "runtime_ts") ||
		!bytes.Contains(got.changed[0].record, []byte(`"applied":{"probe-results":4,"pod-updates":1,"pleg":2}`)) {
		t.Fatalf("record %s", got.changed[0].record)
	}
	folded := servedObj(t, got.changed[0].record)
	folded.Delete("held")
	if !Equal(folded, servedObj(t, want.changed[0].record)) {
		t.Fatalf("the reordered record folds to another state:\n%s\n%s", got.changed[0].record, want.changed[0].record)
	}
}

func TestServeLeavesUnmodelledRecordsUncovered(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	a := foldBatch(t, s, []testInput{in(TopicPodUpdates, 1, 5, podUpdate("ADD", podA, 5))})
	good := string(a.changed[0].record)
	cases := map[string]string{
		"held, proof":    `{"uid":"a","pod":null,"held":[["pleg",0,1,2,{},["n1"]]],"applied":{"pleg":1}}`,
		"held, seq":      `{"uid":"a","pod":null,"held":[["pleg",0,1,2,{},["n1","3"]]],"applied":{"pleg":1}}`,
		"held, seqs":     `{"uid":"a","pod":null,"held":[],"applied":{"pleg":1},"seqs":{"pleg":1}}`,
		"held, no held":  `{"uid":"a","pod":null,"applied":{"pleg":1}}`,
		"held, order":    `{"uid":"a","pod":null,"applied":{"pleg":1},"held":[]}`,
		"held, topic":    `{"uid":"a","pod":null,"held":[["pod-updates",0,1,2,{}]],"applied":{"pleg":1}}`,
		"held, item":     `{"uid":"a","pod":null,"held":[["pleg",0,1,2]],"applied":{"pleg":1}}`,
		"held, uid":      `{"uid":"b","pod":null,"held":[],"applied":{}}`,
		"held events":    strings.Replace(good, `"uid":"a"`, `"uid":"a","held":[[1]]`, 1),
		"seqs, a string": strings.Replace(good, `"uid":"a"`, `"uid":"a","seqs":{"pleg":"1"}`, 1),
		"seqs, a topic":  strings.Replace(good, `"uid":"a"`, `"uid":"a","seqs":{"journal":1}`, 1),
		"unknown key":    strings.Replace(good, `"uid":"a"`, `"uid":"a","x":1`, 1),
		"missing key":    strings.Replace(good, `"terminating":false,`, ``, 1),
		"wrong type":     strings.Replace(good, `"terminating":false`, `"terminating":0`, 1),
		"other uid":      strings.Replace(good, `"uid":"a"`, `"uid":"b"`, 1),
		"other topic":    strings.Replace(good, `"applied":{`, `"applied":{"journal":1,`, 1),
		"not JSON":       good[:20],
		"duplicate keys": strings.Replace(good, `"uid":"a"`, `"uid":"a","uid":"a"`, 1),
		"a float":        strings.Replace(good, `"version":1`, `"version":1.0`, 1),
	}
	for name, record := range cases {
		loadRecords(t, s, []string{"a"}, [][]byte{[]byte(record)})
		if s.Covered("a") {
			t.Errorf("%s: covered", name)
		}
		if g := foldBatch(t, s, []testInput{in(TopicPleg, 2, 6, pleg("a", "running", 6))}); g.ok {
			t.Errorf("%s: folded an event for an uncovered record", name)
		}
	}
	loadRecords(t, s, []string{"a"}, [][]byte{[]byte(good)})
	if !s.Covered("a") {
		t.Fatal("a good record is not covered")
	}
	loadRecords(t, s, []string{"a"}, [][]byte{nil})
	if s.Covered("a") {
		t.Fatal("None leaves a record")
	}
}

func TestServeProtocol(t *testing.T) {
	var out bytes.Buffer
	if err := NewServer(0).Serve(bytes.NewReader(nil), &out); err != nil || out.Len() != 0 {
		t.Fatalf("empty input: %v, %d bytes", err, out.Len())
	}
	full := batchRequest([]testInput{in(TopicPodUpdates, 1, 5, podUpdate("ADD", podA, 5))})
	bad := map[string][]byte{
		"unknown request": []byte("X"),
		"truncated":       full[:len(full)-3],
		"unknown topic":   batchRequest([]testInput{{topic: 4, value: []byte("{}")}}),
		"None key":        binary.LittleEndian.AppendUint32([]byte{'L', 1, 0, 0, 0}, noneLength),
	}
	for name, req := range bad {
		var perr *ProtocolError
		if err := NewServer(0).Serve(bytes.NewReader(req), &out); !errors.As(err, &perr) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Two requests in one stream, each answered.
	out.Reset()
	req := append(binary.LittleEndian.AppendUint32([]byte{requestLoad}, 0), full...)
	// Each answer is its length, then the answer: the load's (1 byte), then the batch's.
	err := NewServer(0).Serve(bytes.NewReader(req), &out)
	got := out.Bytes()
	if err != nil || len(got) < 10 || !bytes.Equal(got[:5], []byte{1, 0, 0, 0, answerOK}) ||
		int(binary.LittleEndian.Uint32(got[5:])) != len(got)-9 || got[9] != answerOK {
		t.Fatalf("two requests: %v %v", err, got[:min(len(got), 10)])
	}
}
