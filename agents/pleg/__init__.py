"""The pod lifecycle event generator (pkg/kubelet/pleg): `relist` is the pure diff and health check,
`loop` the relist loop that lists the runtime and publishes to the pleg topic."""

from podledger.agents.pleg.loop import Pleg, RelistTiming
from podledger.agents.pleg.relist import (
    RELIST_PERIOD_S,
    RELIST_THRESHOLD_S,
    PodLifecycleEvent,
    PodStates,
    Relisted,
    RelistHealth,
    events_by_pod,
    generate_events,
    pleg_state,
    pod_events,
    pod_states,
    relist_changes,
    relist_events,
)

__all__ = [
    "RELIST_PERIOD_S",
    "RELIST_THRESHOLD_S",
    "Pleg",
    "PodLifecycleEvent",
    "PodStates",
    "RelistHealth",
    "RelistTiming",
    "Relisted",
    "events_by_pod",
    "generate_events",
    "pleg_state",
    "pod_events",
    "pod_states",
    "relist_changes",
    "relist_events",
]
