package foldcore

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// sealedRequest is the 'S' request of a batch's inputs (batchRequest's), with these chain heads.
func sealedRequest(inputs []testInput, heads map[batchKey][chainHeadBytes]byte) []byte {
	batch := batchRequest(inputs)
	proven := byte(0)
	if batch[0] == requestProvenBatch {
		proven = 1
	}
	req := binary.LittleEndian.AppendUint32([]byte{requestSealed, proven}, uint32(len(heads)))
	for k, head := range heads {
		req = append(req, k.topic)
		req = binary.LittleEndian.AppendUint32(req, uint32(k.partition))
		req = append(req, head[:]...)
	}
	return append(req, batch[1:]...)
}

func twoEvents() []testInput {
	return []testInput{
		in(TopicPodUpdates, 10, 1_700_000_000_000, podUpdate("ADD", podA, 1)),
		in(TopicPleg, 20, 1_700_000_001_000, pleg("a", "running", 1_700_000_001_000)),
	}
}

// A sealed batch answers its journal entries and versions as record batches chained on from the
// heads given, and gives the heads back advanced.
func TestSealedBatchChainsFromTheHeadsGiven(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	s.SetTopicPrefix("site.")
	start := [chainHeadBytes]byte{7}
	heads := map[batchKey][chainHeadBytes]byte{{sealedJournal, 2}: start, {sealedHistory, 2}: start}
	answer := request(t, s, sealedRequest(twoEvents(), heads))
	if answer[0] != answerOK {
		t.Fatalf("answer %d: %q", answer[0], answer)
	}
	r := respReader{b: answer[1:]}
	if journal, versions := r.u32(), r.u32(); journal != 2 || versions < 1 {
		t.Fatalf("%d journal entries, %d versions", journal, versions)
	}
	topics := map[byte]int{}
	for n := r.u32(); n > 0; n-- {
		topic, partition, count := r.u8(), r.u32(), r.u32()
		r.u32() // the records' CRC and shift: TestBatchBuilderSplitsAtItsLimitAndKeepsOrder
		r.u32()
		data := r.bytes()
		got, _, _ := readRecords(t, data)
		if partition != 2 || got != int(count) {
			t.Fatalf("a batch of topic %d partition %d: %d records, %d said", topic, partition, got, count)
		}
		if topic == sealedStatus && !bytes.Contains(data, []byte("podledger/site/n1")) {
			t.Errorf("a status version's ce_source does not name the prefix and the node")
		}
		if topic != sealedStatus && !bytes.Contains(data, []byte("07"+strings.Repeat("0", 62))) {
			t.Errorf("topic %d's chain does not go on from the head given", topic)
		}
		topics[topic] += int(count)
	}
	if topics[sealedJournal] != 2 || topics[sealedStatus] != topics[sealedHistory] {
		t.Fatalf("records per topic: %v", topics)
	}
	if n := r.u32(); n != 2 {
		t.Fatalf("%d heads given back, want 2", n)
	}
	for i := 0; i < 2; i++ {
		r.u8()
		r.u32()
		if bytes.Equal(r.take(chainHeadBytes), start[:]) {
			t.Errorf("a head given back did not advance")
		}
	}
}

// Without the head of a chain it would extend, the core gives the batch up (the Python fold then
// names the partition not restored) and forgets the pods it touched.
func TestSealedBatchWithoutItsChainHeadGivesUp(t *testing.T) {
	s := NewServer(DefaultMaxEventBytes)
	heads := map[batchKey][chainHeadBytes]byte{{sealedHistory, 2}: {}}
	answer := request(t, s, sealedRequest(twoEvents(), heads))
	if answer[0] != answerGaveUp || !strings.Contains(string(answer), "no chain head was given for topic 0 partition 2") {
		t.Fatalf("answer %d: %q", answer[0], answer)
	}
	if s.Covered("a") {
		t.Errorf("the pod the batch touched is still held")
	}
}
