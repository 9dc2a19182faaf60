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
