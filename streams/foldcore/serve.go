package foldcore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The live mode (podfold --serve): a long-lived fold of one worker's partitions, fed by the live
// fold worker (streams/fold_core_live.py) one Kafka fetch at a time over a pipe. Requests and
// responses are binary, integers little-endian; `bytes` is a u32 length and the bytes, `nbytes`
// the same with length 0xFFFFFFFF for None.
//
//	'L' u32 n, n x {bytes key, nbytes record}      load records (None: the pod has none)  -> u8 0
//	'B' u32 n, n x {u8 topic, u32 partition, i64 offset, i64 ts_ms, nbytes value}     fold a batch
//	'P' u32 n, n x {the same, then bytes node, u64 seq}    fold a batch whose origins were proven
//	'S' a batch as 'B' or 'P', with its chains' heads: answered sealed (serve_sealed.go)
//
// The worker sends 'S'; 'B' and 'P' answer the fold's outputs unsealed, as the core's own tests
// read them. Proven inputs are for a worker with a keyring: the worker has checked each input's
// proof of origin (its MAC under the node's status key, and that the node writes to the input's
// partition) and hands over the proven node and sequence number; the core folds as BatchFold does
// with those proofs.
//
// Every answer is preceded by a u32: its length. 'L' answers u8 0. A batch answers either
//
//	u8 0, u32 n, n x output, u32 n, n x {u32 partition, bytes key, nbytes record}   changed records
//	      u32 n, n x {u32 partition, i64 ts_ms}                the newest pod-updates time per partition
//	output: u8 kind, u32 partition, bytes pod UID, then for kind 0 (journal entry) bytes value;
//	        for 1 (status version) bytes value, i64 version, i64 ts_ms, bytes node, namespace, name;
//	        for 2 (tombstone) nothing; for 3 (journal entry of a proven input) bytes value, bytes
//	        node, u64 seq
//
// or u8 3, bytes why, u32 n, n x bytes pod UID: it gave up, and dropped those pods' records: they
// are UNCOVERED, as is any stored record the port does not model, until a later 'L' loads them
// again; an event for such a pod makes its batch give up. Python folds every batch the core gives
// up on. Events for a pod not announced yet wait in its record until its first pod-update
// (serve_held.go).

const (
	requestLoad        = 'L'
	requestBatch       = 'B'
	requestProvenBatch = 'P'

	answerOK     = 0
	answerGaveUp = 3

	outputJournal       = 0
	outputVersion       = 1
	outputTombstone     = 2
	outputProvenJournal = 3

	noneLength = 0xFFFFFFFF
)

// DefaultMaxEventBytes is the live fold's default limit on an input value's size.
const DefaultMaxEventBytes = 1 << 20

// ProtocolError is a request that does not follow the protocol; the server stops at it.
type ProtocolError struct{ Msg string }

// Error says what is wrong with the request.
func (e *ProtocolError) Error() string { return "protocol error: " + e.Msg }

// serveInput is one Kafka record of a batch; its value is buf[start:end] of the server, and the
// node that proved it wrote it (a 'P' batch) buf[end:nodeEnd].
type serveInput struct {
	topic      uint8
	partition  int64
	offset     int64
	tsMs       int64
	start, end int
	none       bool
	proven     bool
	nodeEnd    int
	seq        uint64
}

// changedRecord is a record a batch changed, with the partition of the last event that did, and
// where its JSON is in the response (start < 0: it was deleted).
type changedRecord struct {
	uid        string
	partition  int64
	start, end int
	raw        rawSpans // where its raw-slot values lie in the records written (appendRecord)
}

// Server folds the batches of the live fold worker against the records it keeps.
//
// Every record is kept as its JSON, as Python stores it: a pod's JSON takes a third of the memory
// of its objects, and the worker may hold a hundred thousand pods for hours. A record is read
// into a Record when an event needs it, and stays one (in fold.Records) while it is among the
// ParsedRecords most recently used (serve_parsed.go); after that, only its JSON is kept.
type Server struct {
	// HoldMaxEvents is HoldLimits.max_events: the most events a pod not announced yet holds. The
	// batch that would hold more gives up (Python dead-letters the oldest).
	HoldMaxEvents int
	// ParsedRecords is how many records stay parsed after the batch that used them, the most
	// recently used; the records the last batch used stay parsed whatever the bound (0: only them).
	ParsedRecords int

	fold          *Fold
	maxEventBytes int
	stored        map[string][]byte      // the JSON of every record not uncovered
	shapes        map[string]recordShape // of every record in fold.Records
	parsed        parsedRecords          // the pods of fold.Records, the most recently used first
	held          map[string]*heldRecord // the waiting pods' records a batch read or made
	uncovered     map[string]struct{}
	interner      shapeInterner

	// One request's state, reused.
	in        *bufio.Reader
	inputs    []serveInput
	buf       []byte
	ev        Event
	heldEv    Event    // a held event being applied at its pod's announcement
	named     []string // the pods the batch's events name, in order, once each
	namedSet  map[string]struct{}
	changed   []changedRecord
	changedAt map[string]int
	newest    map[int64]int64
	outputs   []byte // the outputs section of the response
	nOutputs  uint32
	records   []byte  // the changed records section
	partition int64   // of the input being folded
	proof     *origin // of the event being applied, when its origin was proven
	resp      []byte

	// RecordBatchBytes is the most a sealed answer's record batch holds (0: DefaultRecordBatchBytes).
	RecordBatchBytes int
	seal             sealing
	sealedResp       []byte
}

// NewServer is a server with no records; maxEventBytes limits an input value's size (0: none).
func NewServer(maxEventBytes int) *Server {
	s := &Server{
		HoldMaxEvents: DefaultHoldMaxEvents,
		ParsedRecords: DefaultParsedRecords,
		maxEventBytes: maxEventBytes,
		stored:        map[string][]byte{},
		shapes:        map[string]recordShape{},
		parsed:        newParsedRecords(),
		held:          map[string]*heldRecord{},
		uncovered:     map[string]struct{}{},
		interner:      shapeInterner{},
		namedSet:      map[string]struct{}{},
		changedAt:     map[string]int{},
		newest:        map[int64]int64{},
	}
	s.fold = NewFold(s.emit)
	s.SetTopicPrefix("")
	return s
}

// Serve answers requests from in on out until in ends; it returns a *ProtocolError for a request
// it cannot read, or the error of a write.
func (s *Server) Serve(in io.Reader, out io.Writer) error {
	s.in = bufio.NewReaderSize(in, 1<<20)
	for {
		kind, err := s.in.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch kind {
		case requestLoad:
			err = s.load()
		case requestBatch:
			err = s.batch(false)
		case requestProvenBatch:
			err = s.batch(true)
		case requestSealed:
			err = s.sealedBatch()
		default:
			err = &ProtocolError{fmt.Sprintf("unknown request %q", kind)}
		}
		if err != nil {
			return err
		}
		// Each answer is preceded by its length, so the client takes it in one read.
		var length [4]byte
		binary.LittleEndian.PutUint32(length[:], uint32(len(s.resp)))
		if _, err := out.Write(length[:]); err != nil {
			return err
		}
		if _, err := out.Write(s.resp); err != nil {
			return err
		}
		s.trim()
	}
}

// maxKeptBuffer is the most room a request buffer keeps for the next request: a rare huge batch
// should not hold its memory for hours.
const maxKeptBuffer = 16 << 20

// trim lets go of buffers a large request grew.
func (s *Server) trim() {
	for _, b := range []*[]byte{&s.buf, &s.outputs, &s.records, &s.resp, &s.sealedResp} {
		if cap(*b) > maxKeptBuffer {
			*b = nil
		}
	}
	if cap(s.inputs) > maxKeptBuffer/32 {
		s.inputs = nil
	}
}

// Covered reports whether the server holds a record it models for the pod uid.
func (s *Server) Covered(uid string) bool {
	if _, ok := s.fold.Records[uid]; ok {
		return true
	}
	if _, ok := s.held[uid]; ok {
		return true
	}
	data, ok := s.stored[uid]
	if !ok {
		return false
	}
	_, _, _, why := decodeStored(uid, data, s.interner, false)
	return why == ""
}

func (s *Server) load() error {
	n, err := s.u32()
	for i := uint32(0); i < n && err == nil; i++ {
		var key, record []byte
		var none bool
		if key, _, err = s.bytes(s.buf[:0], false); err != nil {
			break
		}
		uid := string(key)
		if record, none, err = s.bytes(key[:0], true); err != nil {
			break
		}
		s.setRecord(uid, record, none)
		s.buf = record[:0]
	}
	if err != nil {
		return err
	}
	s.resp = append(s.resp[:0], answerOK)
	return nil
}

// setRecord stores the pod's record as Python keeps it; none: the pod has no record. It is read
// when an event needs it (see record): one the port does not model is uncovered from then on.
func (s *Server) setRecord(uid string, data []byte, none bool) {
	s.forget(uid)
	delete(s.uncovered, uid)
	if !none {
		s.stored[uid] = slices.Clone(data)
	}
}

// forget drops whatever the server holds of the pod's record.
func (s *Server) forget(uid string) {
	s.unparse(uid)
	s.parsed.drop(uid)
	delete(s.held, uid)
	delete(s.stored, uid)
}

// record is the pod's record, read from its JSON if needed: an announced pod's, or the one whose
// events wait for its announcement; both nil when the pod has none. It gives up on a record the
// port does not model, which is uncovered from then on.
func (s *Server) record(uid string) (*Record, *heldRecord) {
	if r := s.fold.Records[uid]; r != nil {
		return r, nil
	}
	if h := s.held[uid]; h != nil {
		return nil, h
	}
	data, ok := s.stored[uid]
	if !ok {
		return nil, nil
	}
	r, shape, h, why := decodeStored(uid, data, s.interner, true)
	if why != "" {
		s.forget(uid)
		s.uncovered[uid] = struct{}{}
		unsupported("the stored record of pod %s: %s", uid, why)
	}
	if h != nil {
		s.held[uid] = h
		return nil, h
	}
	s.fold.Records[uid] = r
	s.shapes[uid] = shape
	return r, nil
}

// giveUp answers that the batch gave up, and drops the records of every pod its events named up
// to there: they may have changed in place. They stay uncovered until loaded again.
func (s *Server) giveUp(reason string) {
	resp := append(s.resp[:0], answerGaveUp)
	resp = appendBytes(resp, reason)
	resp = binary.LittleEndian.AppendUint32(resp, uint32(len(s.named)))
	for _, uid := range s.named {
		resp = appendBytes(resp, uid)
		s.forget(uid)
		s.uncovered[uid] = struct{}{}
	}
	s.resp = resp
}

// appendBytes appends a `bytes` field.
func appendBytes(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// u32 reads a little-endian u32 of the request.
func (s *Server) u32() (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(s.in, b[:]); err != nil {
		return 0, truncated(err)
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// bytes reads a `bytes` field (an `nbytes` one when nullable) and appends it to dst; none says it
// was None.
func (s *Server) bytes(dst []byte, nullable bool) (out []byte, none bool, err error) {
	n, err := s.u32()
	if err != nil {
		return dst, false, err
	}
	if n == noneLength {
		if !nullable {
			return dst, false, &ProtocolError{"None where bytes are required"}
		}
		return dst, true, nil
	}
	start := len(dst)
	dst = slices.Grow(dst, int(n))[:start+int(n)]
	if _, err := io.ReadFull(s.in, dst[start:]); err != nil {
		return dst, false, truncated(err)
	}
	return dst, false, nil
}

// truncated is the error of a request that ends early.
func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &ProtocolError{"the request ends early"}
	}
	return err
}
