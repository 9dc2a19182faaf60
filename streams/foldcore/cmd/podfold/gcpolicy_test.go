package main

import "testing"

func TestGCPercentForLetsTheHeapReachTheCeiling(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, heapCeiling / initialHeapGoal * 100},
		{64 << 20, 700},  // 64 MiB live: collect again at 512 MiB
		{100 << 20, 412}, // and at 100 MiB live
		{256 << 20, 100}, // half the ceiling: Go's default pace
		{600 << 20, 100}, // past the ceiling: still the default, never less
		{heapCeiling, 100},
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
	if first := heapCeiling / initialHeapGoal * 100; uint64(initialHeapGoal)*uint64(first)/100 != heapCeiling {
		t.Errorf("the first goal is %d, not the ceiling", initialHeapGoal*first/100)
	}
}

func TestServePercentForAllowsTheHeadroomAndNoLessThanTheMinimum(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, serveHeadroom / initialHeapGoal * 100}, // the first collection once the heap is 128 MiB
		{64 << 20, 200}, // 64 MiB live: collect again at 192 MiB
		{96 << 20, 133}, // 10,000 pods: at 224 MiB, not at 120 (GOGC 25)
		{512 << 20, 25}, // headroom under a quarter: the minimum
		{2 << 30, 25},
	} {
		if got := servePercentFor(c.live); got != c.want {
			t.Errorf("servePercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}
