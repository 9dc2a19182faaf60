package foldcore

// Inputs whose origin the worker proved (a 'P' batch, serve.go): BatchFold's checks of a proof
// that need the pod's record, and what a proof leaves on the record and the journal.

import (
	"encoding/binary"
	"io"
	"math"
)

// readProof reads an input's proven node (onto buf) and sequence number.
func (s *Server) readProof(in *serveInput) (err error) {
	if s.buf, _, err = s.bytes(s.buf, false); err != nil {
		return err
	}
	var seq [8]byte
	if _, err = io.ReadFull(s.in, seq[:]); err != nil {
		return truncated(err)
	}
	in.proven, in.nodeEnd, in.seq = true, len(s.buf), binary.LittleEndian.Uint64(seq[:])
	return nil
}

// applyProven is _apply with the input's proof of origin: refused as `replayed` (which the port
// leaves to Python) unless its sequence number is above the last one applied for the pod and
// topic; then journalled with its proof, folded, and the number kept on the record.
func (s *Server) applyProven(record *Record, at Coordinates, ev *Event, in *serveInput) {
	t := topicIndex(at.Topic)
	if in.seq > math.MaxInt64 {
		unsupported("a sequence number past 63 bits")
	}
	seq := int64(in.seq)
	if record != nil && record.seqs.seen[t] && seq <= record.seqs.offsets[t] {
		unsupported("a %s record with sequence %d, not above %d (Python dead-letters it as replayed)",
			at.Topic, seq, record.seqs.offsets[t])
	}
	s.proof = in
	s.apply(record, at, ev)
	s.proof = nil
	if after := s.fold.Records[ev.UID]; after != nil {
		after.seqs.offsets[t], after.seqs.seen[t] = seq, true
		shape := s.shapes[ev.UID]
		shape.seqs = s.interner.withTopic(shape.seqs, t)
		s.shapes[ev.UID] = shape
	}
}
