package foldcore

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// proven is in() with a proof of origin from node n1.
func proven(topic string, offset, ts int64, value string, seq uint64) testInput {
	i := in(topic, offset, ts, value)
	i.proof = &testProof{node: "n1", seq: seq}
	return i
}

func TestServeFoldsProvenInputs(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	a := foldBatch(t, s, []testInput{
		proven(TopicPodUpdates, 10, 1_700_000_000_000, podUpdate("ADD", podA, 1), 7),
		proven(TopicPleg, 20, 1_700_000_001_000, pleg("a", "running", 1_700_000_001_000), 8),
	})
	if !a.ok {
		t.Fatal(a.reason)
	}
	journal := provenJournal(t, a)
	if len(journal) != 2 || journal[0].node != "n1" || journal[0].seq != 7 || journal[1].seq != 8 ||
		!bytes.HasPrefix(journal[0].value, []byte(`{"type":"pod-updates:ADD","topic":"pod-updates"`)) {
		t.Fatalf("journal entries %+v", journal)
	}
	// _apply sets seqs before it reads the event: the pleg snapshot's runtime_ts comes after it.
	want := `"applied":{"pod-updates":10,"pleg":20},"seqs":{"pod-updates":7,"pleg":8},"runtime_ts":1700000001000}`
	record := a.changed[0].record
	if !bytes.HasSuffix(record, []byte(want)) {
		t.Fatalf("record %s", record)
	}

	// The record read back from its bytes folds on as the one the server kept.
	other := NewServer(DefaultMaxEventBytes)
	loadRecords(t, other, []string{"a"}, [][]byte{record})
	next := []testInput{proven(TopicProbeResults, 30, 1_700_000_002_000, probe("a", "Success", 1_700_000_002_000), 9)}
	got, kept := foldBatch(t, other, next), foldBatch(t, s, next)
	if !got.ok || !bytes.Equal(history(got), history(kept)) || !bytes.Equal(got.changed[0].record, kept.changed[0].record) {
		t.Fatalf("folded from stored bytes:\n%s\nkept:\n%s", got.changed[0].record, kept.changed[0].record)
	}
	if !bytes.Contains(got.changed[0].record, []byte(`"seqs":{"pod-updates":7,"pleg":8,"probe-results":9}`)) {
		t.Fatalf("record %s", got.changed[0].record)
	}

	// An unproven batch (a worker without a keyring) leaves the numbers as they are.
	plain := foldBatch(t, other, []testInput{in(TopicPleg, 21, 1_700_000_003_000, pleg("a", "exited", 1_700_000_003_000))})
	if !plain.ok || !bytes.Contains(plain.changed[0].record, []byte(`"seqs":{"pod-updates":7,"pleg":8,"probe-results":9}`)) {
		t.Fatalf("unproven batch: %s %s", plain.reason, plain.changed[0].record)
	}
}

func TestServeGivesUpWherePythonRefusesAProof(t *testing.T) {
	before := []testInput{
		proven(TopicPodUpdates, 10, 1_700_000_000_000, podUpdate("ADD", podA, 1), 7),
		proven(TopicPleg, 20, 1, pleg("a", "running", 1), 8),
	}
	cases := map[string]struct {
		input testInput
		why   string
	}{
		// A copy of the node's pleg record, sent again at a later offset: its number is not above 8.
		"replayed": {proven(TopicPleg, 21, 2, pleg("a", "running", 2), 8), "replayed"},
		"older":    {proven(TopicPodUpdates, 11, 2, podUpdate("UPDATE", podA, 2), 3), "replayed"},
		"forged":   {withNode(proven(TopicPleg, 21, 2, pleg("a", "running", 2), 9), "n2"), "another node"},
		"64 bits":  {proven(TopicPleg, 21, 2, pleg("a", "running", 2), math.MaxUint64), "63 bits"},
	}
	for name, c := range cases {
		s := NewServer(DefaultMaxEventBytes)
		if a := foldBatch(t, s, before); !a.ok {
			t.Fatal(a.reason)
		}
		got := foldBatch(t, s, []testInput{c.input})
		if got.ok || !strings.Contains(got.reason, c.why) {
			t.Errorf("%s: ok=%v reason %q", name, got.ok, got.reason)
		}
	}
}

func TestServeForgetsAProofWhenItGivesUp(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	if a := foldBatch(t, s, []testInput{proven(TopicPodUpdates, 10, 1, podUpdate("ADD", podA, 1), 7)}); !a.ok {
		t.Fatal(a.reason)
	}
	// n2 proves its own record, which speaks for n1's pod: the core gives up while applying it.
	foreign := proven(TopicPleg, 20, 2, strings.Replace(pleg("a", "running", 2), `"node":"n1"`, `"node":"n2"`, 1), 8)
	if a := foldBatch(t, s, []testInput{withNode(foreign, "n2")}); a.ok {
		t.Fatal("a foreign event folded")
	}
	// The next batch has no proofs (a worker without a keyring): nothing of n2's proof is left.
	b := foldBatch(t, s, []testInput{in(TopicPodUpdates, 11, 3, podUpdate("ADD", podB, 3))})
	if !b.ok || b.outputs[0].kind != outputJournal || bytes.Contains(b.changed[0].record, []byte("seqs")) {
		t.Fatalf("after a give-up: %s %+v %s", b.reason, b.outputs[0], b.changed[0].record)
	}
}

// provenJournal is the answer's journal entries, each of which must carry its input's proof.
func provenJournal(t *testing.T, a testAnswer) []testOutput {
	t.Helper()
	var journal []testOutput
	for _, o := range a.outputs {
		if o.kind == outputJournal {
			t.Fatalf("a proven input's journal entry without its proof: %s", o.value)
		}
		if o.kind == outputProvenJournal {
			journal = append(journal, o)
		}
	}
	return journal
}

// withNode is the input with its proof naming another writer.
func withNode(i testInput, node string) testInput {
	i.proof.node = node
	return i
}

func TestServeHoldsProvenEvents(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	// The pod's pleg and probe result come before its announcement; the probe's copy too, later.
	first := foldBatch(t, s, []testInput{
		proven(TopicPleg, 20, 1, pleg("a", "running", 1), 5),
		proven(TopicProbeResults, 30, 2, probe("a", "Success", 2), 6),
	})
	if !first.ok || len(first.outputs) != 0 {
		t.Fatalf("held: %s %+v", first.reason, first.outputs)
	}
	waiting := first.changed[0].record
	if !bytes.Contains(waiting, []byte(`,"ts_ms":1},["n1",5]],["probe-results",2,30,2,`)) ||
		!bytes.HasSuffix(waiting, []byte(`,"ts_ms":2},["n1",6]]],"applied":{"pleg":20,"probe-results":30}}`)) {
		t.Fatalf("waiting record %s", waiting)
	}
	// A new core reads the waiting record back; the announcement applies the held events with
	// their proofs: each journal entry carries its own, and the record keeps every number.
	other := NewServer(DefaultMaxEventBytes)
	loadRecords(t, other, []string{"a"}, [][]byte{waiting})
	a := foldBatch(t, other, []testInput{proven(TopicPodUpdates, 10, 3, podUpdate("ADD", podA, 3), 7)})
	if !a.ok {
		t.Fatal(a.reason)
	}
	var seqs []uint64
	for _, o := range provenJournal(t, a) {
		seqs = append(seqs, o.seq)
	}
	if fmt.Sprint(seqs) != "[7 5 6]" {
		t.Fatalf("journal sequence numbers %v", seqs)
	}
	if !bytes.Contains(a.changed[0].record, []byte(`"seqs":{"pod-updates":7,"pleg":5,"probe-results":6}`)) {
		t.Fatalf("record %s", a.changed[0].record)
	}

	// A held copy of a record already held (its number not above) is refused at the announcement.
	s = NewServer(DefaultMaxEventBytes)
	if b := foldBatch(t, s, []testInput{
		proven(TopicPleg, 20, 1, pleg("a", "running", 1), 5),
		proven(TopicPleg, 21, 1, pleg("a", "running", 1), 5),
	}); !b.ok {
		t.Fatal(b.reason)
	}
	if b := foldBatch(t, s, []testInput{proven(TopicPodUpdates, 10, 3, podUpdate("ADD", podA, 3), 7)}); b.ok ||
		!strings.Contains(b.reason, "replayed") {
		t.Fatalf("replayed held event: ok=%v %q", b.ok, b.reason)
	}
}
