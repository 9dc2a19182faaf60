package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The fold allocates a few kilobytes per event, most of it garbage within an event or two, while
// the pods' records stay live. With Go's default pace (GOGC=100) the collector marks the whole
// live heap every time the program has allocated as much again: a third of a run's time went to
// it. podfold is a batch tool with memory to spare, so it lets the heap grow to a ceiling before
// the first collection, and after each collection sets the next one where the heap reaches the
// ceiling again. Once the live data passes half the ceiling, it paces as Go does by default
// (the heap then grows to twice the live data). A GOGC or GOMEMLIMIT in the environment
// overrides this policy.

const (
	// heapCeiling is the heap size the policy lets the program reach before it collects; the
	// process's resident size is this plus the runtime's own overhead.
	heapCeiling = 512 << 20
	// initialHeapGoal is the heap goal Go starts with at GOGC=100.
	initialHeapGoal = 4 << 20
	// minGCPercent is Go's default pace.
	minGCPercent = 100
)

// serveGCPercent is the live mode's pace. The process lives for hours beside a fold worker and
// holds the records of its partitions, mostly as JSON bytes, which the collector does not scan:
// a collection costs little, and a heap held near the live records keeps the worker's memory
// small (at Go's default the heap would grow to twice the records between collections).
const serveGCPercent = 25

// paceServeGC applies the live mode's pace, unless GOGC or GOMEMLIMIT is set.
func paceServeGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(serveGCPercent)
}

// paceGC applies the policy above for the rest of the process.
func paceGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	// Go's first goal scales with GOGC: this percentage puts it at the ceiling.
	first := heapCeiling / initialHeapGoal * 100
	debug.SetGCPercent(first)
	armGCHook(first)
}

// gcPercentFor is the pace that lets the heap grow from live bytes to heapCeiling, and no less
// than minGCPercent.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return heapCeiling / initialHeapGoal * 100
	}
	percent := int64(heapCeiling-min(live, heapCeiling)) * 100 / int64(live)
	return int(max(percent, minGCPercent))
}

// gcSentinel is an object allocated only to be collected: its cleanup runs after a collection.
// It is big enough not to share the tiny allocator's blocks, whose cleanups may never run.
type gcSentinel struct{ _ [64]byte }

// armGCHook makes the next collection re-pace the collector (current is the pace in force) and
// arm the hook again.
func armGCHook(current int) {
	runtime.AddCleanup(new(gcSentinel), func(current int) {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(sample)
		percent := current
		if sample[0].Value.Kind() == metrics.KindUint64 {
			percent = gcPercentFor(sample[0].Value.Uint64())
		}
		if percent != current {
			debug.SetGCPercent(percent)
		}
		armGCHook(percent)
	}, current)
}
