"""The apiserver client's token bucket (pure: a fake clock, no apiserver)."""

from __future__ import annotations

import pytest

from podledger.agents.token_bucket import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_burst_is_free_then_requests_are_paced_at_qps() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=50, burst=100, clock=clock, sleep=clock.sleep)
    assert [bucket.acquire() for _ in range(100)] == [0.0] * 100
    assert clock.now == 100.0
    waits = [bucket.acquire() for _ in range(50)]
    assert all(w == pytest.approx(0.02) for w in waits)
    assert clock.now == pytest.approx(101.0)  # 50 more requests took one second: 50 QPS


def test_idle_time_refills_up_to_burst_only() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        bucket.acquire()
    clock.now += 3600  # an hour idle saves up no more than `burst`
    assert [bucket.acquire() for _ in range(3)] == [0.0] * 3
    assert bucket.acquire() == pytest.approx(0.1)


def test_rejects_nonsense_limits() -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps=0, burst=1)
    with pytest.raises(ValueError):
        TokenBucket(qps=1, burst=0)
