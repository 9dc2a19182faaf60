package foldcore

// Inputs whose origin the worker proved (a 'P' batch, serve.go): BatchFold's checks of a proof
// that need the pod's record, and what a proof leaves on the record, the journal and held events.

import (
	"encoding/binary"
	"io"
	"math"
)

// origin is an input's proven writer and its sequence number (schemas/origin.py Proof).
type origin struct {
	node string
	seq  int64
}

// readProof reads an input's proven node (onto buf, after the value) and sequence number; the
// checks are originOf's, when the input is folded.
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

// originOf is the input's proof (nil: the batch has none); it gives up on one the port does not
// model, or one whose node is not the node the event names (BatchFold dead-letters it as forged).
func (s *Server) originOf(in *serveInput, ev *Event) *origin {
	if !in.proven {
		return nil
	}
	if in.seq > math.MaxInt64 {
		unsupported("a sequence number past 63 bits")
	}
	node := string(s.buf[in.end:in.nodeEnd])
	if node != ev.Node {
		unsupported("a %s record written by another node than it names (Python dead-letters it)", ev.Topic)
	}
	return &origin{node: node, seq: int64(in.seq)}
}

// applyProven is _apply with a proof of origin: refused as `replayed` (which the port leaves to
// Python) unless its sequence number is above the last one applied for the pod and topic; then
// journalled with its proof, folded, and the number kept on the record.
func (s *Server) applyProven(record *Record, at Coordinates, ev *Event, proof *origin) {
	t := topicIndex(at.Topic)
	if record != nil && record.seqs.seen[t] && proof.seq <= record.seqs.offsets[t] {
		unsupported("a %s record with sequence %d, not above %d (Python dead-letters it as replayed)",
			at.Topic, proof.seq, record.seqs.offsets[t])
	}
	s.proof = proof
	func() {
		defer func() { s.proof = nil }() // also when apply gives up: the next event may have none
		s.apply(record, at, ev)
	}()
	if after := s.fold.Records[ev.UID]; after != nil {
		after.seqs.offsets[t], after.seqs.seen[t] = proof.seq, true
		shape := s.shapes[ev.UID]
		shape.seqs = s.interner.withTopic(shape.seqs, t)
		s.shapes[ev.UID] = shape
	}
}

// applyWith is apply, or applyProven when the event comes with a proof.
func (s *Server) applyWith(record *Record, at Coordinates, ev *Event, proof *origin) {
	if proof != nil {
		s.applyProven(record, at, ev, proof)
		return
	}
	s.apply(record, at, ev)
}
