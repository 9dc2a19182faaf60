package foldcore

// Kafka record batches (message format v2) built whole, for the live mode's sealed answers
// (serve_sealed.go): the worker hands them to its producer as they are, instead of appending
// every record to a batch of its own and checksumming it in Python.
//
// A batch is built with no producer state (id -1, epoch -1, sequence -1). The worker's idempotent
// producer sets its own just before sending, which changes 14 header bytes the checksum covers;
// so each batch also carries the CRC-32C of its records alone and x^(8·len(records)) mod the
// CRC's polynomial, with which the worker combines the checksum of the new header with that of
// the records without reading them again (podledger/record_batch.py).

import (
	"encoding/binary"
	"hash/crc32"
)

const (
	batchHeaderBytes  = 61 // base offset .. record count
	batchCRCAt        = 17 // the CRC-32C, of everything from the attributes on
	batchAttributesAt = 21
	// DefaultRecordBatchBytes is the most a batch holds (a record that alone is larger fills one);
	// the worker's producer's max_batch_size.
	DefaultRecordBatchBytes = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordHeader is one header of a record: its name and value.
type recordHeader struct {
	name  string
	value []byte
}

// builtBatch is a finished record batch of one topic and partition.
type builtBatch struct {
	topic      byte
	partition  int64
	count      int
	data       []byte
	recordsCRC uint32 // CRC-32C of data[batchHeaderBytes:]
	shift      uint32 // x^(8·len(data[batchHeaderBytes:])) mod P, reflected as the CRC is
}

// batchBuilder makes the record batches of one answer: each topic-partition's records in the
// order appended, in batches of at most maxBytes.
type batchBuilder struct {
	maxBytes int
	stampMs  int64
	open     map[batchKey]int // topic-partition -> index in batches of its batch being filled
	batches  []builtBatch
	spare    [][]byte // buffers of the last answer's batches, to fill again
}

type batchKey struct {
	topic     byte
	partition int64
}

// reset starts the batches of a new answer, each at most maxBytes, every record stamped stampMs.
func (b *batchBuilder) reset(maxBytes int, stampMs int64) {
	if b.open == nil {
		b.open = map[batchKey]int{}
	}
	clear(b.open)
	for i := range b.batches { // their buffers serve the next answer's batches
		if cap(b.batches[i].data) <= maxKeptBuffer {
			b.spare = append(b.spare, b.batches[i].data[:0])
		}
		b.batches[i] = builtBatch{}
	}
	b.batches, b.maxBytes, b.stampMs = b.batches[:0], maxBytes, stampMs
}

// add appends a record (none: a tombstone, no value) to its topic-partition's batch, written in
// place: its length is worked out first.
func (b *batchBuilder) add(topic byte, partition int64, key, value []byte, none bool, headers []recordHeader) {
	tail := varintLen(len(key)) + len(key) + varintLen(len(headers))
	if none {
		tail++ // -1
	} else {
		tail += varintLen(len(value)) + len(value)
	}
	for _, h := range headers {
		tail += varintLen(len(h.name)) + len(h.name) + varintLen(len(h.value)) + len(h.value)
	}
	k := batchKey{topic, partition}
	var bb *builtBatch
	if i, ok := b.open[k]; ok {
		bb = &b.batches[i]
		// The record's length, attributes, timestamp and offset deltas take at most 16 bytes.
		if len(bb.data)+tail+16 > b.maxBytes {
			b.finish(bb)
			bb = nil
		}
	}
	if bb == nil {
		b.open[k] = len(b.batches)
		b.batches = append(b.batches, builtBatch{topic: topic, partition: partition})
		bb = &b.batches[len(b.batches)-1]
		if n := len(b.spare); n > 0 {
			bb.data, b.spare = b.spare[n-1], b.spare[:n-1]
		}
		bb.data = append(bb.data[:0], make([]byte, batchHeaderBytes)...)
	}
	body := 2 + varintLen(bb.count) + tail // attributes 0, timestamp delta 0: stamped as the batch
	d := binary.AppendVarint(bb.data, int64(body))
	d = append(d, 0, 0)
	d = binary.AppendVarint(d, int64(bb.count))
	d = binary.AppendVarint(d, int64(len(key)))
	d = append(d, key...)
	if none {
		d = binary.AppendVarint(d, -1)
	} else {
		d = binary.AppendVarint(d, int64(len(value)))
		d = append(d, value...)
	}
	d = binary.AppendVarint(d, int64(len(headers)))
	for _, h := range headers {
		d = binary.AppendVarint(d, int64(len(h.name)))
		d = append(d, h.name...)
		d = binary.AppendVarint(d, int64(len(h.value)))
		d = append(d, h.value...)
	}
	bb.data = d
	bb.count++
}

// varintLen is the length of n as a Kafka (zig-zag) varint.
func varintLen(n int) int {
	u := uint64(n) << 1
	if n < 0 {
		u = ^u
	}
	size := 1
	for u >= 0x80 {
		u >>= 7
		size++
	}
	return size
}

// done finishes every batch still open and returns them all.
func (b *batchBuilder) done() []builtBatch {
	for _, i := range b.open {
		b.finish(&b.batches[i])
	}
	clear(b.open)
	return b.batches
}

// finish writes a batch's header: no producer state, every record stamped stampMs, and its CRC.
func (b *batchBuilder) finish(bb *builtBatch) {
	delete(b.open, batchKey{bb.topic, bb.partition})
	d := bb.data
	be := binary.BigEndian
	be.PutUint64(d[0:], 0)                   // base offset: the broker assigns it
	be.PutUint32(d[8:], uint32(len(d)-12))   // batch length: after this field
	be.PutUint32(d[12:], 0xFFFFFFFF)         // partition leader epoch: none
	d[16] = 2                                // magic
	be.PutUint16(d[21:], 0)                  // attributes: uncompressed, create time
	be.PutUint32(d[23:], uint32(bb.count-1)) // last offset delta
	be.PutUint64(d[27:], uint64(b.stampMs))  // base timestamp
	be.PutUint64(d[35:], uint64(b.stampMs))  // max timestamp
	be.PutUint64(d[43:], 0xFFFFFFFFFFFFFFFF) // producer id: none
	be.PutUint16(d[51:], 0xFFFF)             // producer epoch: none
	be.PutUint32(d[53:], 0xFFFFFFFF)         // base sequence: none
	be.PutUint32(d[57:], uint32(bb.count))   // record count
	records := d[batchHeaderBytes:]
	bb.recordsCRC = crc32.Checksum(records, castagnoli)
	bb.shift = crcShift(len(records))
	be.PutUint32(d[batchCRCAt:], crc32.Update(crc32.Checksum(d[batchAttributesAt:batchHeaderBytes], castagnoli), castagnoli, records))
}

// crcPoly is CRC-32C's polynomial, reflected (bit 31 is x^0).
const crcPoly = 0x82F63B78

// crcMul multiplies two polynomials modulo crcPoly, both reflected.
func crcMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// crcShift is x^(8·n) mod crcPoly: what a CRC is multiplied by to move it past n more bytes, so
// that CRC(a‖b) = crcMul(crcShift(len(b)), CRC(a)) ^ CRC(b).
func crcShift(n int) uint32 {
	result := uint32(1) << 31 // x^0
	square := uint32(1) << 23 // x^8: one byte
	for k := uint64(n); k != 0; k >>= 1 {
		if k&1 != 0 {
			result = crcMul(result, square)
		}
		square = crcMul(square, square)
	}
	return result
}
