package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The fold allocates a few kilobytes per event, most of it garbage within an event or two, while
// the pods' records stay live. Go's default pace (GOGC=100) collects whenever the program has
// allocated as much again as the live data, and every collection marks the live heap; with little
// live data that is often. Both modes therefore pace by bytes instead: after each collection the
// next one is set where the heap has grown by an allowance past the live data, and never sooner
// than a minimum percentage of it. A GOGC or GOMEMLIMIT in the environment overrides this policy.
//
// The batch mode (paceGC) is a tool with memory to spare: it lets the heap reach heapCeiling, and
// past half of it paces as Go does by default.
//
// The live mode (paceServeGC) lives for hours beside a fold worker and holds the records of its
// partitions, mostly as JSON bytes the collector does not scan: it allows serveHeadroom past the
// live data, and no less than serveMinPercent of it. At 10,000 pods (about 90 MB live) a pace of
// 25 % collected every 23 MB, a collection marked the parsed records in about 25 ms, and that
// was a quarter of the core's CPU; with the headroom it collects five times less often. Memory
// stays within the headroom of the live records, and a quarter past them once they pass 512 MB.

const (
	// heapCeiling is the heap size the batch mode lets the program reach before it collects; the
	// process's resident size is this plus the runtime's own overhead.
	heapCeiling = 512 << 20
	// initialHeapGoal is the heap goal Go starts with at GOGC=100.
	initialHeapGoal = 4 << 20
	// minGCPercent is Go's default pace, the batch mode's least.
	minGCPercent = 100
	// serveHeadroom is how far the live mode lets the heap grow past the live data.
	serveHeadroom = 128 << 20
	// serveMinPercent is the live mode's least pace.
	serveMinPercent = 25
)

// gcPace is a collection policy: the GOGC percentage to set given the live heap bytes after a
// collection (0 before the first).
type gcPace func(live uint64) int

// paceServeGC applies the live mode's pace for the rest of the process, unless GOGC or
// GOMEMLIMIT is set.
func paceServeGC() { applyPace(servePercentFor) }

// paceGC applies the batch mode's pace for the rest of the process, unless GOGC or GOMEMLIMIT is
// set.
func paceGC() { applyPace(gcPercentFor) }

func applyPace(pace gcPace) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	first := pace(0)
	debug.SetGCPercent(first)
	armGCHook(pace, first)
}

// gcPercentFor is the batch mode's pace: the heap grows from live bytes to heapCeiling, and by no
// less than minGCPercent.
func gcPercentFor(live uint64) int {
	return percentFor(live, heapCeiling-min(live, heapCeiling), minGCPercent)
}

// servePercentFor is the live mode's pace: the heap grows serveHeadroom past live bytes, and by no
// less than serveMinPercent.
func servePercentFor(live uint64) int {
	return percentFor(live, serveHeadroom, serveMinPercent)
}

// percentFor is the GOGC percentage that lets the heap grow `allowance` bytes past `live`, and no
// less than least. Before the first collection (live 0) it puts Go's first goal at the allowance.
func percentFor(live, allowance uint64, least int) int {
	if live == 0 {
		return int(max(allowance/initialHeapGoal*100, uint64(least)))
	}
	return int(max(int64(allowance)*100/int64(live), int64(least)))
}

// gcSentinel is an object allocated only to be collected: its cleanup runs after a collection.
// It is big enough not to share the tiny allocator's blocks, whose cleanups may never run.
type gcSentinel struct{ _ [64]byte }

// armGCHook makes the next collection re-pace the collector (current is the pace in force) and
// arm the hook again.
func armGCHook(pace gcPace, current int) {
	runtime.AddCleanup(new(gcSentinel), func(current int) {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(sample)
		percent := current
		if sample[0].Value.Kind() == metrics.KindUint64 {
			percent = pace(sample[0].Value.Uint64())
		}
		if percent != current {
			debug.SetGCPercent(percent)
		}
		armGCHook(pace, percent)
	}, current)
}
