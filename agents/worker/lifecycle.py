"""Pure lifecycle arithmetic for pod workers: grace periods and crash-loop back-off
(docs/kubelet-rules.md#grace-periods).

Nothing here touches a clock or the runtime; callers pass durations in seconds so that replaying the
journal reproduces every kill decision exactly. Behaviour follows pkg/kubelet/pod_workers.go
(calculateEffectiveGracePeriod), pkg/kubelet/kuberuntime/kuberuntime_container.go (container kill
grace, minimum 2s) and the kubelet's container back-off (flowcontrol.Backoff, 10s doubling to 5m).
"""

from __future__ import annotations

__all__ = [
    "BACKOFF_BASE_S",
    "BACKOFF_CAP_S",
    "DEFAULT_TERMINATION_GRACE_S",
    "MIN_KILL_GRACE_S",
    "MIN_POD_GRACE_S",
    "backoff_reset",
    "crash_loop_backoff",
    "crash_loop_message",
    "effective_grace_period",
    "format_go_duration",
    "liveness_kill_grace",
]

# The API server defaults spec.terminationGracePeriodSeconds to 30 (DefaultTerminationGracePeriodSeconds);
# we apply it here because podledger may see specs that were never defaulted.
DEFAULT_TERMINATION_GRACE_S = 30
# The pod worker always hands a grace period of at least 1s down to the runtime.
MIN_POD_GRACE_S = 1
# kuberuntime gives every container at least this long between SIGTERM and SIGKILL.
MIN_KILL_GRACE_S = 2
# Container restart back-off: initial delay and ceiling (kubelet MaxContainerBackOff).
BACKOFF_BASE_S = 10.0
BACKOFF_CAP_S = 300.0


def effective_grace_period(
    stored: int | None,
    deletion_grace_seconds: int | None,
    override: int | None,
    spec_grace: int | None,
) -> tuple[int, bool]:
    """The grace period a terminating pod worker uses, and whether it shortened the stored one
    (calculateEffectiveGracePeriod).

    The stored value only ever shrinks: the API's deletionGracePeriodSeconds and then a kill override
    (eviction) may lower it, or set it when none is stored yet. With nothing requested the pod's own
    terminationGracePeriodSeconds applies. The result is clamped to at least 1s. "Shortened" is true only
    when a previous non-zero value existed and changed, which is what cancels an in-flight sync.

    Upstream lets a 0 request on top of a stored value fall through to the spec value, which could
    lengthen it; podledger holds to the rule that the period never grows
    (docs/kubelet-rules.md#grace-periods), so the stored value is kept as a ceiling.
    """
    previous = stored or 0
    grace = previous
    for request in (deletion_grace_seconds, override):
        if request is not None and (grace == 0 or request < grace):
            grace = request
    if grace == 0:
        grace = DEFAULT_TERMINATION_GRACE_S if spec_grace is None else spec_grace
    if previous > 0:
        grace = min(grace, previous)
    grace = max(grace, MIN_POD_GRACE_S)
    return grace, previous != 0 and grace != previous


def liveness_kill_grace(
    spec_grace: int | None, probe_grace: int | None, deletion_grace_seconds: int | None
) -> int:
    """Grace for killing a container whose liveness probe failed (kuberuntime_container.go killContainer).

    A pod being deleted uses the API's deletionGracePeriodSeconds; otherwise the probe's own
    terminationGracePeriodSeconds wins over the pod's. The runtime never kills faster than 2s.
    """
    if deletion_grace_seconds is not None:
        grace = deletion_grace_seconds
    elif probe_grace is not None:
        grace = probe_grace
    else:
        grace = DEFAULT_TERMINATION_GRACE_S if spec_grace is None else spec_grace
    return max(grace, MIN_KILL_GRACE_S)


def crash_loop_backoff(restarts: int, *, base: float = BACKOFF_BASE_S, cap: float = BACKOFF_CAP_S) -> float:
    """Delay before restarting a container that has failed after `restarts` earlier restarts.

    The first failure waits `base`, each further one doubles it, never beyond `cap` (10s, 20s, 40s, ... 5m).
    """
    if restarts <= 0:
        return float(min(base, cap))
    # Past ~64 doublings the float would overflow long after any real cap; stop early.
    if restarts >= 64:
        return float(cap)
    return float(min(base * (2**restarts), cap))


def backoff_reset(ran_for_s: float, *, cap: float = BACKOFF_CAP_S) -> bool:
    """Whether a container that ran this long counts as stable, restarting its back-off from `base`.

    flowcontrol.Backoff forgets an entry once more than twice the cap (10 minutes) has passed.
    """
    return ran_for_s > 2 * cap


def format_go_duration(seconds: float) -> str:
    """Render seconds the way Go's time.Duration.String does ("40s", "1m20s", "5m0s", "1.5s", "250ms").

    Upstream messages embed Durations, so byte-identical text needs Go's format.
    """
    total_ns = round(seconds * 1_000_000_000)
    if total_ns == 0:
        return "0s"
    sign = "-" if total_ns < 0 else ""
    ns = abs(total_ns)
    if ns < 1_000_000_000:
        for unit_ns, suffix in ((1_000_000, "ms"), (1_000, "µs"), (1, "ns")):
            if ns >= unit_ns:
                return sign + _with_fraction(ns, unit_ns) + suffix
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    out = sign
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    return out + _with_fraction(rest, 1_000_000_000) + "s"


def _with_fraction(value: int, unit: int) -> str:
    """`value / unit` as Go prints it: integer part plus a fraction with trailing zeros trimmed."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}." + f"{frac:0{digits}d}".rstrip("0")


def crash_loop_message(delay_s: float, container: str, pod_name: str, namespace: str, uid: str) -> str:
    """The CrashLoopBackOff waiting message kuberuntime puts on the container status.

    The pod is rendered like format.Pod: name_namespace(uid).
    """
    return (
        f"back-off {format_go_duration(delay_s)} restarting failed "
        f"container={container} pod={pod_name}_{namespace}({uid})"
    )
