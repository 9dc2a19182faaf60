package foldcore

// Sealed batches ('S', serve.go): the live worker's request. The core folds the batch as for 'B'
// or 'P', then seals its outputs as streams/seal.py does (CloudEvents attributes on status
// versions, each partition's hash chain on journal entries and history versions) and answers
// them as whole Kafka record batches (recordbatch.go), which the worker sends as they are.
//
//	'S' u8 proven, u32 n, n x {u8 topic, u32 partition, [32]byte head}, then the batch as 'B'
//	    (proven 0) or 'P' (proven 1) has it after its first byte
//
// The heads are the hashes of the last record of each chain the batch may extend (topic 0: the
// journal, 2: the history), for every partition its inputs are on. The answer, when it folded:
//
//	u8 0, u32 journal entries, u32 versions,
//	u32 n, n x {u8 topic, u32 partition, u32 records, u32 records' CRC-32C, u32 CRC shift, bytes batch}
//	u32 n, n x {u8 topic, u32 partition, [32]byte head}          every head given, advanced
//	then the changed records and the newest pod-updates times, as 'B' answers them
//
// where topic is 0 (journal), 1 (pod-status) or 2 (pod-status-history), each topic-partition's
// batches in order. A give-up is answered as for 'B'; so is a batch whose chain head was not
// given (the Python fold then names the missing head).

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The topics of a sealed answer's record batches.
const (
	sealedJournal   = 0
	sealedStatus    = 1
	sealedHistory   = 2
	requestSealed   = 'S'
	chainHeadBytes  = sha256.Size
	statusEventType = "io.podledger.pod.status.v1"
)

// sealing is what the sealed request keeps between requests.
type sealing struct {
	source  string // ce_source up to the node: "podledger/<prefix>"
	heads   map[batchKey][chainHeadBytes]byte
	order   []batchKey // the heads in the order given
	builder batchBuilder
	headers []recordHeader
	hexBuf  []byte
}

// SetTopicPrefix sets the deployment's topic prefix, which the status versions' ce_source names.
func (s *Server) SetTopicPrefix(prefix string) {
	s.seal.source = "podledger"
	if part := strings.TrimRight(prefix, "._-"); part != "" {
		s.seal.source += "/" + part
	}
}

// sealedBatch reads a sealed request, folds its batch and answers it sealed.
func (s *Server) sealedBatch() error {
	proven, err := s.in.ReadByte()
	if err != nil {
		return truncated(err)
	}
	if proven > 1 {
		return &ProtocolError{fmt.Sprintf("a sealed batch's proof flag is %d", proven)}
	}
	n, err := s.u32()
	if err != nil {
		return err
	}
	if s.seal.heads == nil {
		s.seal.heads = map[batchKey][chainHeadBytes]byte{}
	}
	clear(s.seal.heads)
	s.seal.order = s.seal.order[:0]
	for i := uint32(0); i < n; i++ {
		var b [5 + chainHeadBytes]byte
		if _, err := io.ReadFull(s.in, b[:]); err != nil {
			return truncated(err)
		}
		if b[0] != sealedJournal && b[0] != sealedHistory {
			return &ProtocolError{fmt.Sprintf("a chain head of topic %d", b[0])}
		}
		k := batchKey{b[0], int64(binary.LittleEndian.Uint32(b[1:]))}
		if _, seen := s.seal.heads[k]; !seen {
			s.seal.order = append(s.seal.order, k)
		}
		s.seal.heads[k] = [chainHeadBytes]byte(b[5:])
	}
	if err := s.batch(proven == 1); err != nil {
		return err
	}
	if s.resp[0] == answerOK {
		s.sealAnswer()
	}
	return nil
}

// sealAnswer turns the answer foldBatch made into the sealed one: its outputs as record batches.
func (s *Server) sealAnswer() {
	tail := s.resp[5+len(s.outputs):] // the changed records and newest times, as they are
	b := &s.seal.builder
	b.reset(s.recordBatchBytes(), time.Now().UnixMilli())
	var journal, versions uint32
	out := s.outputs
	for pos := 0; pos < len(out); {
		kind, partition := out[pos], int64(binary.LittleEndian.Uint32(out[pos+1:]))
		uid, p := sealedField(out, pos+5)
		pos = p
		if kind == outputTombstone {
			b.add(sealedStatus, partition, uid, nil, true, nil)
			continue
		}
		value, p := sealedField(out, pos)
		pos = p
		hs := s.seal.headers[:0]
		switch kind {
		case outputJournal, outputProvenJournal:
			journal++
			if kind == outputProvenJournal {
				node, p := sealedField(out, pos)
				hs = append(hs, recordHeader{"podledger-node", node})
				hs = append(hs, recordHeader{"podledger-seq", binary.BigEndian.AppendUint64(nil, binary.LittleEndian.Uint64(out[p:]))})
				pos = p + 8
			}
			if hs = s.link(hs, sealedJournal, partition, uid, value); hs == nil {
				return
			}
			b.add(sealedJournal, partition, uid, value, false, hs)
		case outputVersion:
			versions++
			version := int64(binary.LittleEndian.Uint64(out[pos:]))
			tsMs := int64(binary.LittleEndian.Uint64(out[pos+8:]))
			node, p := sealedField(out, pos+16)
			namespace, p := sealedField(out, p)
			name, p := sealedField(out, p)
			pos = p
			when := time.UnixMilli(tsMs).UTC()
			if when.Year() < 1 || when.Year() > 9999 { // Python cannot name that time: its fold says so
				s.giveUp(fmt.Sprintf("a status version stamped %d ms, outside years 1 to 9999", tsMs))
				return
			}
			hs = append(hs,
				recordHeader{"ce_specversion", []byte("1.0")},
				recordHeader{"ce_id", strconv.AppendInt(append(append([]byte(nil), uid...), '/'), version, 10)},
				recordHeader{"ce_source", s.source(node)},
				recordHeader{"ce_type", []byte(statusEventType)},
				recordHeader{"ce_time", when.AppendFormat(nil, "2006-01-02T15:04:05.000Z")},
				recordHeader{"ce_subject", append(append(append([]byte(nil), namespace...), '/'), name...)},
				recordHeader{"content-type", []byte("application/json")},
			)
			b.add(sealedStatus, partition, uid, value, false, hs)
			if hs = s.link(hs, sealedHistory, partition, uid, value); hs == nil {
				return
			}
			b.add(sealedHistory, partition, uid, value, false, hs)
		}
		s.seal.headers = hs[:0]
	}
	batches := b.done()
	resp := append(s.sealedResp[:0], answerOK)
	resp = binary.LittleEndian.AppendUint32(resp, journal)
	resp = binary.LittleEndian.AppendUint32(resp, versions)
	resp = binary.LittleEndian.AppendUint32(resp, uint32(len(batches)))
	for _, bb := range batches {
		resp = append(resp, bb.topic)
		resp = binary.LittleEndian.AppendUint32(resp, uint32(bb.partition))
		resp = binary.LittleEndian.AppendUint32(resp, uint32(bb.count))
		resp = binary.LittleEndian.AppendUint32(resp, bb.recordsCRC)
		resp = binary.LittleEndian.AppendUint32(resp, bb.shift)
		resp = binary.LittleEndian.AppendUint32(resp, uint32(len(bb.data)))
		resp = append(resp, bb.data...)
	}
	resp = binary.LittleEndian.AppendUint32(resp, uint32(len(s.seal.order)))
	for _, k := range s.seal.order {
		head := s.seal.heads[k]
		resp = append(resp, k.topic)
		resp = binary.LittleEndian.AppendUint32(resp, uint32(k.partition))
		resp = append(resp, head[:]...)
	}
	s.sealedResp = append(resp, tail...)
	s.resp, s.sealedResp = s.sealedResp, s.resp // both buffers kept for the next request
}

// link appends a record's chain headers to hs and advances its partition's chain
// (schemas/chain.py: SHA-256 of the previous hash, the key's and the value's lengths as 4-byte
// big-endian integers, the key and the value). Without the partition's head it gives up and
// returns nil.
func (s *Server) link(hs []recordHeader, topic byte, partition int64, key, value []byte) []recordHeader {
	k := batchKey{topic, partition}
	prev, ok := s.seal.heads[k]
	if !ok {
		s.giveUp(fmt.Sprintf("no chain head was given for topic %d partition %d", topic, partition))
		return nil
	}
	var lengths [4]byte
	h := sha256.New()
	h.Write(prev[:])
	binary.BigEndian.PutUint32(lengths[:], uint32(len(key)))
	h.Write(lengths[:])
	h.Write(key)
	binary.BigEndian.PutUint32(lengths[:], uint32(len(value)))
	h.Write(lengths[:])
	h.Write(value)
	var next [chainHeadBytes]byte
	h.Sum(next[:0])
	s.seal.heads[k] = next
	hexed := hex.AppendEncode(hex.AppendEncode(s.seal.hexBuf[:0], prev[:]), next[:])
	s.seal.hexBuf = hexed
	return append(hs,
		recordHeader{"podledger-prev", hexed[:2*chainHeadBytes]},
		recordHeader{"podledger-hash", hexed[2*chainHeadBytes:]},
	)
}

// source is a status version's ce_source: schemas/cloud_events.py's source(), which leaves out an
// empty part.
func (s *Server) source(node []byte) []byte {
	if len(node) == 0 {
		return []byte(s.seal.source)
	}
	return append(append([]byte(s.seal.source), '/'), node...)
}

// sealedField reads a `bytes` field of the outputs section at pos: its text and the position after.
func sealedField(out []byte, pos int) ([]byte, int) {
	n := int(binary.LittleEndian.Uint32(out[pos:]))
	return out[pos+4 : pos+4+n], pos + 4 + n
}

func (s *Server) recordBatchBytes() int {
	if s.RecordBatchBytes > 0 {
		return s.RecordBatchBytes
	}
	return DefaultRecordBatchBytes
}
