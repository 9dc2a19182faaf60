"""Test vectors for grace periods and crash-loop back-off (docs/kubelet-rules.md, "Grace periods" and
"Crash-loop back-off").

The test_grace_period_* cases follow the kubelet's grace-period rules (pod_workers.go
calculateEffectiveGracePeriod), one branch each; the rest pin the back-off behaviour
(10s doubling to 5m, reset after 10 minutes) and the upstream CrashLoopBackOff message text.
"""

from __future__ import annotations

import pytest

from podledger.agents.worker.lifecycle import (
    backoff_reset,
    crash_loop_backoff,
    crash_loop_message,
    effective_grace_period,
    format_go_duration,
    liveness_kill_grace,
)


def test_grace_period_first_deletion_uses_deletion_grace() -> None:
    """stored 0, deletionGracePeriodSeconds 30, spec 60 -> 30 (nothing stored, so not shortened)."""
    assert effective_grace_period(0, 30, None, 60) == (30, False)


def test_grace_period_override_shortens() -> None:
    """stored 30, override 10 -> 10 and shortened, which cancels the in-flight sync."""
    assert effective_grace_period(30, None, 10, 30) == (10, True)


def test_grace_period_never_grows() -> None:
    """stored 10, deletionGracePeriodSeconds 30 -> 10."""
    assert effective_grace_period(10, 30, None, 30) == (10, False)


def test_grace_period_all_zero_is_one() -> None:
    assert effective_grace_period(0, 0, 0, 0) == (1, False)


def test_grace_period_liveness_kill_uses_probe_grace() -> None:
    assert liveness_kill_grace(30, 5, None) == 5


def test_grace_period_liveness_kill_while_deleting_uses_deletion_grace() -> None:
    assert liveness_kill_grace(30, 5, 20) == 20


# podledger's own cases: defaults, combined requests and edge values of the same rules.


def test_grace_period_spec_used_when_nothing_requested() -> None:
    assert effective_grace_period(None, None, None, 45) == (45, False)


def test_grace_period_unset_spec_defaults_to_30() -> None:
    assert effective_grace_period(None, None, None, None) == (30, False)


def test_grace_period_override_then_deletion_lowest_wins() -> None:
    assert effective_grace_period(0, 20, 5, 60) == (5, False)
    assert effective_grace_period(0, 5, 20, 60) == (5, False)


def test_grace_period_zero_request_never_lengthens_stored() -> None:
    """Upstream would fall back to the spec here (10 -> 30); podledger keeps the rule that it never grows."""
    assert effective_grace_period(10, None, 0, 30) == (10, False)


def test_grace_period_unchanged_is_not_shortened() -> None:
    assert effective_grace_period(30, 30, 30, 30) == (30, False)


def test_grace_period_liveness_kill_minimum_is_two() -> None:
    assert liveness_kill_grace(30, 1, None) == 2
    assert liveness_kill_grace(30, None, 0) == 2
    assert liveness_kill_grace(30, None, None) == 30
    assert liveness_kill_grace(None, None, None) == 30


def test_backoff_doubles_to_the_cap() -> None:
    delays = [crash_loop_backoff(n) for n in range(8)]
    assert delays == [10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0]
    assert crash_loop_backoff(10_000) == 300.0
    assert crash_loop_backoff(-1) == 10.0


def test_backoff_custom_base_and_cap() -> None:
    assert [crash_loop_backoff(n, base=1, cap=5) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


@pytest.mark.parametrize(
    ("ran_for_s", "reset"),
    [(0.0, False), (300.0, False), (600.0, False), (600.5, True), (3600.0, True)],
)
def test_backoff_reset_after_ten_minutes(ran_for_s: float, reset: bool) -> None:
    assert backoff_reset(ran_for_s) is reset


def test_crash_loop_message_format() -> None:
    assert (
        crash_loop_message(40, "app", "web-0", "default", "1234-abcd")
        == "back-off 40s restarting failed container=app pod=web-0_default(1234-abcd)"
    )
    assert crash_loop_message(crash_loop_backoff(9), "c", "p", "ns", "u").startswith("back-off 5m0s ")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (10, "10s"),
        (80, "1m20s"),
        (160, "2m40s"),
        (300, "5m0s"),
        (3600, "1h0m0s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (-2, "-2s"),
    ],
)
def test_go_duration_format(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text
