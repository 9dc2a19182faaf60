package foldcore

import (
	"bytes"
	"io"
)

// A window of Replay's input, folded pod by pod. Each line is keyed by its pod (podKey), and the
// lines of one pod form a chain in input order; folding the window folds one chain after another,
// in the order the pods first appear. A line whose pod cannot be read off its bytes with certainty
// is a barrier: the lines before it fold first, then it alone, and chains start anew after it.
// The versions are kept in fold order, each line's apart, and the window writes them in input
// order.

// windowLine is one input line of a window. A window holds at most MaxWindowBytes and a line,
// so its lines and versions count in int32.
type windowLine struct {
	no         int64 // 1-based line number in the input
	start, end int   // the line in window.data, without its newline
	versions   int32 // its versions are window.versions[versions:versions+count]
	count      int32
	next       int32 // the next line of its pod's chain; -1: none
}

// keptVersion is a version's line in a window's chunks.
type keptVersion struct{ chunk, start, end int32 }

// chunkBytes is the size of a window's chunks of history; chunkSlack is the room a chunk must
// have left to take another version (a status's line is a few KB).
const chunkBytes, chunkSlack = 4 << 20, 64 << 10

// replayWindow is the input Replay has read and not yet written out.
type replayWindow struct {
	data  []byte // the lines, one after another
	lines []windowLine
	// The versions' lines, in fold order, encoded into chunks (keep) so that the window's history
	// is never copied to grow; writing the window out gathers them in scratch.
	scratch  []byte
	chunks   [][]byte // emptied, not dropped, as a window is written
	filling  int      // the chunk keep encodes into
	versions []keptVersion

	chains map[string]int32 // pod key -> chain, for the lines since the last barrier
	heads  []int32          // each chain's first line, in the order its pod first appeared
	tails  []int32          // each chain's last line
	keys   []string         // each chain's pod key

	encoder versionEncoder

	ev      Event // the line being folded, decoded (Apply keeps neither it nor lineObj)
	lineObj Obj

	failure *GaveUp // the earliest line that did not fold; nil: none
}

// newReplayWindow is a window of windowBytes of input: its data has room for that and the line
// that crosses it, if not too long, so that it is not copied as it fills.
func newReplayWindow(windowBytes int) *replayWindow {
	return &replayWindow{data: make([]byte, 0, windowBytes+lineRoom), chains: map[string]int32{}}
}

// lineRoom is the room a window's data keeps for the line that crosses its end.
const lineRoom = 1 << 20

// add takes the line that ends the window's data, from start on, as line number no.
func (w *replayWindow) add(fold *Fold, no int64, start int) {
	at := int32(len(w.lines))
	line := bytes.TrimRight(w.data[start:], "\n")
	w.lines = append(w.lines, windowLine{no: no, start: start, end: start + len(line), next: -1})
	if isBlank(line) {
		return // folds to nothing; it only counts
	}
	key, ok := podKey(line)
	if !ok { // a barrier: what came before folds first, then the line alone
		w.foldPending(fold)
		w.foldChain(fold, at, "")
		return
	}
	chain, seen := w.chains[string(key)]
	if !seen {
		chain = int32(len(w.heads))
		k := string(key)
		w.chains[k] = chain
		w.heads, w.tails, w.keys = append(w.heads, at), append(w.tails, at), append(w.keys, k)
		return
	}
	w.lines[w.tails[chain]].next = at
	w.tails[chain] = at
}

// foldPending folds the lines not folded yet, chain by chain.
func (w *replayWindow) foldPending(fold *Fold) {
	for chain, head := range w.heads {
		w.foldChain(fold, head, w.keys[chain])
	}
	clear(w.chains)
	w.heads, w.tails, w.keys = w.heads[:0], w.tails[:0], w.keys[:0]
}

// foldChain folds the lines of a chain from line at on (none blank), each of pod key ("": a
// barrier, read whole). A line that does not fold ends its chain, as the pod's later lines come
// after it; the earliest such line of all the window's chains is the one Replay names.
func (w *replayWindow) foldChain(fold *Fold, at int32, key string) {
	defer func() {
		if r := recover(); r != nil {
			if gaveUp := recovered(r, w.lines[at].no).(*GaveUp); w.failure == nil || gaveUp.Line < w.failure.Line {
				w.failure = gaveUp
			}
		}
	}()
	for ; at >= 0; at = w.lines[at].next {
		line := &w.lines[at]
		if w.failure != nil && w.failure.Line < line.no {
			return // a line before it gave up already: nothing after that counts
		}
		coordinates := parseLineInto(line.no, w.data[line.start:line.end], &w.ev, &w.lineObj)
		if key != "" && w.ev.UID != key {
			unsupported("line %d: its pod is not the one its bytes name", line.no)
		}
		line.versions = int32(len(w.versions))
		fold.Apply(coordinates, &w.ev)
		line.count = int32(len(w.versions)) - line.versions
	}
}

// write writes the lines' versions in input order and empties the window; every line is folded.
func (w *replayWindow) write(out io.Writer) error {
	buf := w.scratch[:0]
	for _, line := range w.lines {
		for _, v := range w.versions[line.versions : line.versions+line.count] {
			text := w.chunks[v.chunk][v.start:v.end]
			if len(buf)+len(text) > outputBuffer && len(buf) > 0 {
				if _, err := out.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
			buf = append(buf, text...)
		}
	}
	if len(buf) > 0 {
		if _, err := out.Write(buf); err != nil {
			return err
		}
	}
	w.scratch = buf[:0]
	for i := range w.chunks {
		w.chunks[i] = w.chunks[i][:0]
	}
	w.data, w.lines, w.versions, w.filling = w.data[:0], w.lines[:0], w.versions[:0], 0
	w.encoder.forget() // its lines are in the chunks
	return nil
}

// keep encodes a version's line at the end of the chunk being filled, or of the next one when
// that has less than chunkSlack left. A longer line grows its chunk as append does: rare, and
// still correct.
func (w *replayWindow) keep(v *Version) {
	if w.filling < len(w.chunks) && cap(w.chunks[w.filling])-len(w.chunks[w.filling]) < chunkSlack {
		w.filling++
	}
	if w.filling == len(w.chunks) {
		w.chunks = append(w.chunks, make([]byte, 0, chunkBytes))
	}
	chunk := w.chunks[w.filling]
	start := len(chunk)
	chunk = append(w.encoder.append(chunk, v), '\n')
	w.chunks[w.filling] = chunk
	w.versions = append(w.versions, keptVersion{int32(w.filling), int32(start), int32(len(chunk))})
}

// uidKey is the key an input line names its pod by (an event's "uid", a pod's metadata "uid"),
// without its opening quote.
var uidKey = []byte(`uid"`)

// podKey is the pod a line's event is for, read off its bytes, when they say it with certainty:
// "uid" appears once, no \u escape could spell it otherwise, and its string value holds no escape,
// so that one key is the uid the line decodes to (Replay checks that it is) and its value ends at
// the next quote. Other escapes (a quote or a newline in a message or an annotation) cannot spell
// a key's letters. Otherwise the line is a barrier.
func podKey(line []byte) ([]byte, bool) {
	if bytes.Index(line, unicodeEscape) >= 0 {
		return nil, false
	}
	end := uidKeyEnd(line)
	if end < 0 || uidKeyEnd(line[end:]) >= 0 {
		return nil, false
	}
	rest := skipJSONSpace(line[end:])
	if len(rest) == 0 || rest[0] != ':' {
		return nil, false
	}
	rest = skipJSONSpace(rest[1:])
	if len(rest) == 0 || rest[0] != '"' {
		return nil, false
	}
	length := bytes.IndexByte(rest[1:], '"')
	if length < 0 || bytes.IndexByte(rest[1:1+length], '\\') >= 0 {
		return nil, false
	}
	return rest[1 : 1+length], true
}

// unicodeEscape starts the one JSON escape that can stand for a letter.
var unicodeEscape = []byte(`\u`)

// uidKeyEnd is where the first "uid" in b ends, or -1. It looks for uid" and then for the quote
// before it: a quote is in every key and value, a u in few.
func uidKeyEnd(b []byte) int {
	for from := 0; ; {
		i := bytes.Index(b[from:], uidKey)
		if i < 0 {
			return -1
		}
		at := from + i
		if at > 0 && b[at-1] == '"' {
			return at + len(uidKey)
		}
		from = at + 1
	}
}

// skipJSONSpace is b after JSON's whitespace.
func skipJSONSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}
