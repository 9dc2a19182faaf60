package foldcore

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// Events before their pod's announcement: held in its record, then applied after it. The
// reference is the same events folded with the announcement first: the versions and journal
// entries are the same, only the record's applied topics come in another order.

// lifecycle is a pod-lifecycle value that leaves its optional fields out.
func lifecycle(uid, kind string, ts int64) string {
	return fmt.Sprintf(`{"uid":%q,"node":"n1","kind":%q,"ts_ms":%d}`, uid, kind, ts)
}

// outputsOf is the answer's outputs, as text, for comparing answers.
func outputsOf(a testAnswer) string {
	return fmt.Sprintf("%+v", a.outputs)
}

func TestServeHoldsEventsUntilTheAnnouncement(t *testing.T) {
	held := []testInput{
		in(TopicPleg, 7, 7, pleg("a", "running", 7)),
		in(TopicProbeResults, 8, 8, probe("a", "Success", 8)),
		in(TopicPodLifecycle, 4, 9, lifecycle("a", "terminating", 9)),
	}
	add := in(TopicPodUpdates, 9, 10, podUpdate("ADD", podA, 10))

	s := NewServer(DefaultMaxEventBytes)
	h := foldBatch(t, s, held)
	if !h.ok || len(h.outputs) != 0 || len(h.changed) != 1 || h.newest != nil {
		t.Fatalf("holding: %+v", h)
	}
	want := `{"uid":"a","pod":null,"held":[` +
		`["pleg",2,7,7,` + pleg("a", "running", 7) + `],` +
		`["probe-results",2,8,8,` + probe("a", "Success", 8) + `],` +
		`["pod-lifecycle",2,4,9,{"uid":"a","node":"n1","kind":"terminating","ts_ms":9,` +
		`"sync_results":[],"grace_s":null,"backoff":null,"runtime":null}]],` +
		`"applied":{"pleg":7,"probe-results":8,"pod-lifecycle":4}}`
	if string(h.changed[0].record) != want {
		t.Fatalf("held record\n%s\nwant\n%s", h.changed[0].record, want)
	}
	announced := foldBatch(t, s, []testInput{add})

	reference := NewServer(DefaultMaxEventBytes)
	ref := foldBatch(t, reference, append([]testInput{add}, held...))
	if !announced.ok || !ref.ok || outputsOf(announced) != outputsOf(ref) {
		t.Fatalf("announced:\n%+v\nwant\n%+v", announced, ref)
	}
	if len(announced.outputs) < 4 || announced.outputs[2].kind != outputJournal ||
		!bytes.Contains(announced.outputs[2].value, []byte(`"topic":"pleg","partition":2,"offset":7,"ts_ms":7`)) {
		t.Fatalf("the first held event's journal entry: %+v", announced.outputs)
	}
	got := string(announced.changed[0].record)
	wantRecord := strings.Replace(string(ref.changed[0].record),
		`"applied":{"pod-updates":9,"pleg":7,"probe-results":8,"pod-lifecycle":4}`,
		`"applied":{"pleg":7,"probe-results":8,"pod-lifecycle":4,"pod-updates":9}`, 1)
	if got != wantRecord || got == string(ref.changed[0].record) {
		t.Fatalf("announced record\n%s\nwant\n%s", got, wantRecord)
	}

	// The same, with the held record loaded into a new server, and with all in one batch.
	loaded := NewServer(DefaultMaxEventBytes)
	loadRecords(t, loaded, []string{"a"}, [][]byte{[]byte(want)})
	if !loaded.Covered("a") {
		t.Fatal("a held record is not covered")
	}
	again := foldBatch(t, loaded, []testInput{add})
	whole := foldBatch(t, NewServer(DefaultMaxEventBytes), append(held, add))
	for _, a := range []testAnswer{again, whole} {
		if !a.ok || outputsOf(a) != outputsOf(ref) || string(a.changed[0].record) != wantRecord {
			t.Fatalf("announced:\n%+v\nwant\n%+v", a, announced)
		}
	}
}

func TestServeAppliesHeldEventsPastTheOffsets(t *testing.T) {
	// A held event below the record's offset for its topic is applied all the same (_apply skips
	// nothing), and the offset stays the higher one.
	s := NewServer(DefaultMaxEventBytes)
	record := `{"uid":"a","pod":null,"held":[["pleg",2,3,7,` + pleg("a", "running", 7) + `]],"applied":{"pleg":9}}`
	loadRecords(t, s, []string{"a"}, [][]byte{[]byte(record)})
	a := foldBatch(t, s, []testInput{
		in(TopicPleg, 9, 8, pleg("a", "exited", 8)), // applied already: skipped
		in(TopicPodUpdates, 1, 10, podUpdate("ADD", podA, 10)),
	})
	if !a.ok || len(a.outputs) < 3 || !bytes.Contains(a.outputs[2].value, []byte(`"offset":3`)) {
		t.Fatalf("answer %+v", a)
	}
	if !bytes.Contains(a.changed[0].record, []byte(`"applied":{"pleg":9,"pod-updates":1},"runtime_ts":7}`)) {
		t.Fatalf("record %s", a.changed[0].record)
	}
}

func TestServeHoldsAgainAfterExpiry(t *testing.T) {
	// Python dropped the held events (expire_held): the record keeps its offsets and holds anew.
	s := NewServer(DefaultMaxEventBytes)
	loadRecords(t, s, []string{"a"}, [][]byte{[]byte(`{"uid":"a","pod":null,"held":[],"applied":{"probe-results":3}}`)})
	a := foldBatch(t, s, []testInput{in(TopicPleg, 5, 5, pleg("a", "running", 5))})
	want := `{"uid":"a","pod":null,"held":[["pleg",2,5,5,` + pleg("a", "running", 5) + `]],` +
		`"applied":{"probe-results":3,"pleg":5}}`
	if !a.ok || len(a.outputs) != 0 || string(a.changed[0].record) != want {
		t.Fatalf("answer %+v", a)
	}
	// Announced with nothing held; removed at once, which Python does too.
	loadRecords(t, s, []string{"b"}, [][]byte{[]byte(`{"uid":"b","pod":null,"held":[],"applied":{}}`)})
	b := foldBatch(t, s, []testInput{in(TopicPodUpdates, 6, 6, podUpdate("REMOVE", podB, 6))})
	if !b.ok || len(b.outputs) != 2 || b.outputs[1].kind != outputTombstone ||
		len(b.changed) != 1 || b.changed[0].key != "b" || b.changed[0].record != nil {
		t.Fatalf("answer %+v", b)
	}
}

func TestServeGivesUpWherePythonDeadLettersHeldEvents(t *testing.T) {
	forged := strings.Replace(pleg("a", "running", 7), `"n1"`, `"n2"`, 1)
	cases := map[string]struct {
		max    int
		inputs []testInput
	}{
		"too many held": {2, []testInput{
			in(TopicPleg, 7, 7, pleg("a", "running", 7)),
			in(TopicPleg, 8, 8, pleg("a", "running", 8)),
			in(TopicPleg, 9, 9, pleg("a", "running", 9)),
		}},
		"removed at its announcement": {100, []testInput{
			in(TopicPleg, 7, 7, pleg("a", "running", 7)),
			in(TopicPodUpdates, 8, 8, podUpdate("REMOVE", podA, 8)),
		}},
		"a forged held event": {100, []testInput{
			in(TopicPleg, 7, 7, forged),
			in(TopicPodUpdates, 8, 8, podUpdate("ADD", podA, 8)),
		}},
	}
	for name, c := range cases {
		s := NewServer(DefaultMaxEventBytes)
		s.HoldMaxEvents = c.max
		where := fmt.Sprintf("input %d of %d", len(c.inputs)-1, len(c.inputs))
		g := foldBatch(t, s, c.inputs)
		if g.ok || !strings.Contains(g.reason, where) || fmt.Sprint(g.dropped) != "[a]" || s.Covered("a") {
			t.Errorf("%s: answer %+v", name, g)
		}
	}
	// A held event of another pod, or one that is no event, in a loaded record.
	for name, item := range map[string]string{
		"another pod's": `["pleg",2,3,7,` + pleg("b", "running", 7) + `]`,
		"not an event":  `["pleg",2,3,7,{}]`,
	} {
		s := NewServer(DefaultMaxEventBytes)
		loadRecords(t, s, []string{"a"}, [][]byte{[]byte(`{"uid":"a","pod":null,"held":[` + item + `],"applied":{"pleg":3}}`)})
		if g := foldBatch(t, s, []testInput{in(TopicPodUpdates, 8, 8, podUpdate("ADD", podA, 8))}); g.ok {
			t.Errorf("%s: folded", name)
		}
	}
}
