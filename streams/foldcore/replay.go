package foldcore

import (
	"bufio"
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

// DefaultWindowBytes is how much input Replay reads before it folds and writes it, unless told
// otherwise: the history it writes is about four times as much, held until the window is written.
const DefaultWindowBytes = 64 << 20

// MinWindowBytes and MaxWindowBytes bound the window podfold takes (Replay takes any up to the
// most, as its tests do).
const MinWindowBytes, MaxWindowBytes = 1 << 20, 1 << 30

// ReplayOptions are Replay's settings; the zero value is the defaults.
type ReplayOptions struct {
	// Progress, when set, is called every ProgressLines lines read.
	Progress func(lines int64)
	// WindowBytes is how much input is folded at a time (0: DefaultWindowBytes; at most
	// MaxWindowBytes).
	WindowBytes int
}

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

// Replay is streams/replay.py replay() restricted to its history: it folds every line of `in` and
// writes each pod-status-history value to `out`, one JSON object a line, exactly as `podledger
// fold` prints them, in input order. A *GaveUp error names the first input line the port does not
// cover: the input needs the Python fold, and whatever was written to `out` must be discarded.
//
// It folds a window of input at a time, pod by pod (replay_window.go): a pod's record is read and
// written by its events one after another while it is in the processor's cache, rather than once
// per event among all the other pods' records. Each pod's events still fold in input order, and
// nothing a pod's fold reads belongs to another pod, so every version is the one the input order
// gives; the window's history is then written in input order.
func Replay(in io.Reader, out io.Writer, opts ReplayOptions) (stats Stats, err error) {
	window := opts.WindowBytes
	if window <= 0 {
		window = DefaultWindowBytes
	}
	window = min(window, MaxWindowBytes)
	w := newReplayWindow(window)
	fold := NewFold(func(v *Version) {
		w.keep(v)
		stats.Versions++
	})
	defer func() {
		if r := recover(); r != nil {
			err = recovered(r, stats.Lines)
		}
	}()
	reader := bufio.NewReaderSize(in, 1<<20)
	lineStart := 0
	for {
		piece, rerr := reader.ReadSlice('\n')
		w.data = append(w.data, piece...)
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue // a long line: the rest follows
		}
		if len(w.data) > lineStart {
			stats.Lines++
			if opts.Progress != nil && stats.Lines%ProgressLines == 0 {
				opts.Progress(stats.Lines)
			}
			w.add(fold, stats.Lines, lineStart)
			if w.failure != nil {
				return stats, w.failure
			}
			lineStart = len(w.data)
		}
		if rerr == io.EOF || (rerr == nil && len(w.data) >= window) {
			w.foldPending(fold)
			if w.failure != nil {
				return stats, w.failure
			}
			if werr := w.write(out); werr != nil {
				return stats, werr
			}
			lineStart = 0
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
	return stats, nil
}

// outputBuffer is how many bytes of output Replay gathers before it writes them.
const outputBuffer = 192 << 10

// recovered turns a panic of the fold into the error Replay returns: Unsupported and runtime
// errors (a value of a shape the port does not expect) mean "give up", anything else is re-raised.
func recovered(r any, line int64) error {
	switch p := r.(type) {
	case Unsupported:
		return &GaveUp{Line: line, Reason: p.Reason}
	case *Unsupported:
		return &GaveUp{Line: line, Reason: p.Reason}
	case runtime.Error:
		return &GaveUp{Line: line, Reason: "a value the port does not expect: " + p.Error()}
	}
	panic(r)
}
