package foldcore

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand"
	"testing"
)

// A CRC moved past n bytes with crcShift and combined is the CRC of the whole: what the worker
// does when its producer sets a batch's producer state.
func TestCRCShiftCombinesChecksums(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 7, 64, 1000, 1 << 16, 1<<20 + 3} {
		a, b := make([]byte, 40), make([]byte, n)
		rng.Read(a)
		rng.Read(b)
		want := crc32.Checksum(append(a, b...), castagnoli)
		got := crcMul(crcShift(n), crc32.Checksum(a, castagnoli)) ^ crc32.Checksum(b, castagnoli)
		if got != want {
			t.Errorf("n=%d: combined %08x, want %08x", n, got, want)
		}
	}
}

// readRecords decodes a v2 batch's header and records as a Kafka client would (checksum checked).
func readRecords(t *testing.T, d []byte) (count int, keys, values []string) {
	t.Helper()
	be := binary.BigEndian
	if d[16] != 2 || int(be.Uint32(d[8:]))+12 != len(d) {
		t.Fatalf("not a v2 batch of its own length: magic %d, length %d of %d", d[16], be.Uint32(d[8:]), len(d))
	}
	if crc := crc32.Checksum(d[batchAttributesAt:], castagnoli); crc != be.Uint32(d[batchCRCAt:]) {
		t.Fatalf("CRC %08x, header says %08x", crc, be.Uint32(d[batchCRCAt:]))
	}
	count = int(be.Uint32(d[57:]))
	r := bytes.NewReader(d[batchHeaderBytes:])
	for i := 0; i < count; i++ {
		size, _ := binary.ReadVarint(r)
		body := make([]byte, size)
		r.Read(body)
		br := bytes.NewReader(body[1:])
		binary.ReadVarint(br) // timestamp delta
		if delta, _ := binary.ReadVarint(br); int(delta) != i {
			t.Fatalf("record %d has offset delta %d", i, delta)
		}
		field := func() string {
			n, _ := binary.ReadVarint(br)
			if n < 0 {
				return "<none>"
			}
			b := make([]byte, n)
			br.Read(b)
			return string(b)
		}
		keys, values = append(keys, field()), append(values, field())
	}
	if int(be.Uint32(d[23:]))+1 != count {
		t.Fatalf("last offset delta %d for %d records", be.Uint32(d[23:]), count)
	}
	return count, keys, values
}

// Records go to their topic-partition's batch in order, a full batch is followed by another, and
// every batch reads back with a valid checksum, tombstones included (ten journal records of about
// 1 KB make four batches of at most 4 KiB, the tombstones one).
func TestBatchBuilderSplitsAtItsLimitAndKeepsOrder(t *testing.T) {
	var b batchBuilder
	b.reset(4096, 1_700_000_000_000)
	value := bytes.Repeat([]byte("v"), 1000)
	for i := 0; i < 10; i++ {
		b.add(sealedJournal, 3, []byte{'k', byte('0' + i)}, value, false, []recordHeader{{"h", []byte("x")}})
		b.add(sealedStatus, 1, []byte{'s', byte('0' + i)}, nil, true, nil)
	}
	batches := b.done()
	var journalKeys []string
	for _, bb := range batches {
		if len(bb.data) > 4096 {
			t.Errorf("a batch of %d bytes, over its limit", len(bb.data))
		}
		count, keys, values := readRecords(t, bb.data)
		if count != bb.count {
			t.Errorf("count %d, header says %d", bb.count, count)
		}
		if crc32.Checksum(bb.data[batchHeaderBytes:], castagnoli) != bb.recordsCRC || bb.shift != crcShift(len(bb.data)-batchHeaderBytes) {
			t.Errorf("the records' CRC or shift is not theirs")
		}
		switch bb.topic {
		case sealedJournal:
			journalKeys = append(journalKeys, keys...)
		case sealedStatus:
			if bb.count != 10 || values[0] != "<none>" {
				t.Errorf("tombstones: %d records, first value %q", bb.count, values[0])
			}
		}
	}
	if len(batches) != 5 || len(journalKeys) != 10 || journalKeys[0] != "k0" || journalKeys[9] != "k9" {
		t.Errorf("%d batches, journal keys %v", len(batches), journalKeys)
	}
}

// A record's length is worked out before it is written: varintLen must be what AppendVarint writes.
func TestVarintLenIsTheLengthWritten(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 63, 64, 65, 8191, 8192, 1 << 20, 1<<31 - 1} {
		if got, want := varintLen(n), len(binary.AppendVarint(nil, int64(n))); got != want {
			t.Errorf("varintLen(%d) = %d, AppendVarint writes %d", n, got, want)
		}
	}
}
