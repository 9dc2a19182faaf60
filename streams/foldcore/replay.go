package foldcore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
)

// Stats counts what a replay folded, as streams/replay.py ReplayStats does.
type Stats struct {
	Lines    int64 `json:"lines"`
	Events   int64 `json:"events"`
	Versions int64 `json:"versions"`
	Pods     int64 `json:"pods"`
}

// GaveUp is a replay's input the port does not cover: the caller folds the input with the Python
// fold instead. Line is the 1-based input line it stopped at.
type GaveUp struct {
	Line   int64
	Reason string
}

func (g *GaveUp) Error() string { return fmt.Sprintf("line %d: %s", g.Line, g.Reason) }

// ProgressLines is how many lines pass between two progress reports, as in `podledger fold`.
const ProgressLines = 100_000

// isBlank: a line of only what Python's bytes.strip() removes is blank.
func isBlank(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			return false
		}
	}
	return true
}

// Replay is streams/replay.py replay() restricted to its history: it folds every line of `in` in
// order and writes each pod-status-history value to `out`, one JSON object a line, exactly as
// `podledger fold` prints them. A *GaveUp error means the input needs the Python fold; whatever
// was written to `out` by then must be discarded. `progress`, when set, is called every
// ProgressLines lines.
func Replay(in io.Reader, out io.Writer, progress func(lines int64)) (stats Stats, err error) {
	// Lines are encoded straight into the output buffer, written out whenever it is nearly full:
	// small enough to stay in the processor's cache.
	buf := make([]byte, 0, outputBuffer+outputSlack)
	flush := func() {
		if _, werr := out.Write(buf); werr != nil {
			panic(writeError{werr})
		}
		buf = buf[:0]
	}
	fold := NewFold(func(v *Version) {
		buf = AppendVersion(buf, v)
		buf = append(buf, '\n')
		if len(buf) >= outputBuffer {
			flush()
		}
		stats.Versions++
	})
	defer func() {
		if r := recover(); r != nil {
			err = recovered(r, stats.Lines)
		}
	}()
	reader := bufio.NewReaderSize(in, 1<<20)
	var long []byte
	// One line decoded at a time, into the same object and event: Apply keeps none of either, only
	// values below them.
	var ev Event
	var lineObj Obj
	for {
		line, rerr := reader.ReadSlice('\n')
		if errors.Is(rerr, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		if len(line) > 0 {
			stats.Lines++
			if progress != nil && stats.Lines%ProgressLines == 0 {
				progress(stats.Lines)
			}
			if !isBlank(line) {
				at := parseLineInto(stats.Lines, bytes.TrimRight(line, "\n"), &ev, &lineObj)
				fold.Apply(at, &ev)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return stats, rerr
		}
	}
	stats.Events = fold.Events
	stats.Pods = int64(len(fold.Pods))
	if len(buf) > 0 {
		flush()
	}
	return stats, nil
}

// outputBuffer is how many bytes of output Replay gathers before it writes them; outputSlack is
// room for the line that crosses it (a longer one makes the buffer grow).
const outputBuffer, outputSlack = 192 << 10, 64 << 10

type writeError struct{ err error }

// recovered turns a panic of the fold into the error Replay returns: Unsupported and runtime
// errors (a value of a shape the port does not expect) mean "give up", anything else is re-raised.
func recovered(r any, line int64) error {
	switch p := r.(type) {
	case Unsupported:
		return &GaveUp{Line: line, Reason: p.Reason}
	case *Unsupported:
		return &GaveUp{Line: line, Reason: p.Reason}
	case writeError:
		return p.err
	case runtime.Error:
		return &GaveUp{Line: line, Reason: "a value the port does not expect: " + p.Error()}
	}
	panic(r)
}
