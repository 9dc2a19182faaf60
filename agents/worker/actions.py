"""What a pod worker should do next to one pod: the pure half of SyncPod (kubelet.go).

`compute_pod_actions` plays the part of kuberuntime's computePodActions: from the desired pod, the
runtime's snapshot of it, the probe failures and the crash-loop back-off entries it decides which sandbox
to create, which containers to kill and which to start, and what to put in the reason cache
(CrashLoopBackOff with upstream's message). No clock, no runtime, no Kafka: the worker passes `now`.

Back-off entries follow flowcontrol.Backoff as the kubelet uses it for container restarts: keyed by
container name, each holds the current delay and when it was last bumped. The first restart is
immediate; a container that fails again within the delay waits in CrashLoopBackOff; an entry older than
twice the cap (10 minutes) is forgotten, so a container that ran that long starts again from 10 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from podledger.agents.worker.lifecycle import BACKOFF_BASE_S, BACKOFF_CAP_S, crash_loop_message
from podledger.streams import status as status_gen
from podledger.types import JSONDict, RuntimeContainer, RuntimeSnapshot

__all__ = [
    "KillAction",
    "PodActions",
    "backoff_active",
    "backoff_next",
    "compute_pod_actions",
    "latest_by_name",
    "phase_from_runtime",
    "running_container_ids",
]


@dataclass(slots=True)
class KillAction:
    """Stop one running container; `probe` names the probe whose failure asked for it (its grace applies)."""

    container_id: str
    name: str
    message: str
    probe: str | None = None


@dataclass(slots=True)
class PodActions:
    """One pass of decisions. The worker carries them out in order: sandbox, kills, starts."""

    create_sandbox: bool = False
    kill: list[KillAction] = field(default_factory=list)
    start: list[str] = field(default_factory=list)  # container names, init containers first
    reasons: dict[str, JSONDict] = field(default_factory=dict)  # container -> {reason, message}
    backoff: dict[str, JSONDict] = field(default_factory=dict)  # container -> {delay, last_update}
    wait_s: float | None = None  # come back after this long even if nothing happens (a back-off ends)


def _epoch(ts: str | None) -> float | None:
    if not ts:
        return None
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def latest_by_name(snapshot: RuntimeSnapshot | None) -> dict[str, RuntimeContainer]:
    """The newest runtime instance of each container name (snapshots list containers newest first)."""
    latest: dict[str, RuntimeContainer] = {}
    for c in (snapshot or {}).get("containers") or []:
        latest.setdefault(c["name"], c)
    return latest


def running_container_ids(snapshot: RuntimeSnapshot | None) -> list[str]:
    return [c["id"] for c in (snapshot or {}).get("containers") or [] if c["state"] == "running"]


def backoff_active(entry: JSONDict | None, finished_at: float, now: float) -> bool:
    """IsInBackOffSince: the container that finished at `finished_at` must still wait."""
    if entry is None or finished_at - entry["last_update"] > 2 * BACKOFF_CAP_S:
        return False
    return now - finished_at < entry["delay"]


def backoff_next(entry: JSONDict | None, finished_at: float, now: float) -> JSONDict:
    """Next: a fresh 10 s entry, or the delay doubled up to the cap; stamped with `now`."""
    if entry is None or finished_at - entry["last_update"] > 2 * BACKOFF_CAP_S:
        return {"delay": BACKOFF_BASE_S, "last_update": now}
    return {"delay": min(entry["delay"] * 2, BACKOFF_CAP_S), "last_update": now}


def phase_from_runtime(pod: JSONDict, snapshot: RuntimeSnapshot | None) -> str:
    """The phase generateAPIPodStatus would give with podIsTerminal=false (SyncPod step 1)."""
    spec = pod.get("spec") or {}
    init = status_gen.convert_container_statuses(
        pod, spec.get("initContainers") or [], None, snapshot, None, is_init=True
    )
    regular = status_gen.convert_container_statuses(
        pod, spec.get("containers") or [], None, snapshot, None, is_init=False
    )
    return status_gen.get_phase(pod, init, regular, False)


def compute_pod_actions(
    pod: JSONDict,
    snapshot: RuntimeSnapshot | None,
    now: float,
    *,
    backoff: dict[str, JSONDict] | None = None,
    probe_failures: dict[str, str] | None = None,
    started: dict[str, bool] | None = None,
) -> PodActions:
    """Decide one SyncPod pass for a pod that is not terminating.

    `probe_failures` maps a container id to the probe ("liveness" or "startup") that failed for it;
    `started` maps a sidecar's container id to whether its startup probe has passed (absent: started
    once running, as with no startup probe).
    """
    actions = PodActions(backoff=dict(backoff or {}))
    sandbox = (snapshot or {}).get("sandbox")
    if sandbox is None or not sandbox.get("ready"):
        # A Never pod whose sandbox died after its containers ran is over; nothing is recreated.
        if (
            sandbox is not None
            and snapshot is not None
            and status_gen.restart_policy(pod) == "Never"
            and snapshot["containers"]
        ):
            return actions
        actions.create_sandbox = True
        return actions

    spec = pod.get("spec") or {}
    latest = latest_by_name(snapshot)
    failures = probe_failures or {}
    meta = pod.get("metadata") or {}

    def restart_or_wait(container: JSONDict, instance: RuntimeContainer) -> None:
        """Start again unless the back-off holds it; a held container gets CrashLoopBackOff."""
        name = container["name"]
        finished = _epoch(instance.get("finished_at")) or now
        entry = actions.backoff.get(name)
        if backoff_active(entry, finished, now):
            assert entry is not None
            message = crash_loop_message(
                entry["delay"], name, meta.get("name", ""), meta.get("namespace") or "default", meta["uid"]
            )
            actions.reasons[name] = {"reason": "CrashLoopBackOff", "message": message}
            remaining = entry["delay"] - (now - finished)
            actions.wait_s = remaining if actions.wait_s is None else min(actions.wait_s, remaining)
            return
        actions.backoff[name] = backoff_next(entry, finished, now)
        actions.start.append(name)

    def check_running(container: JSONDict, instance: RuntimeContainer) -> None:
        probe = failures.get(instance["id"])
        if probe is not None:
            actions.kill.append(
                KillAction(
                    instance["id"],
                    container["name"],
                    f"Container {container['name']} failed {probe} probe, will be restarted",
                    probe,
                )
            )

    # Init containers run one after another; a sidecar must have started before the next one begins.
    # Once a regular container exists, plain init containers are done for good (their records may be gone).
    regular_created = any(c["name"] in latest for c in spec.get("containers") or [])
    for container in spec.get("initContainers") or []:
        instance = latest.get(container["name"])
        sidecar = status_gen.is_sidecar(container)
        if not sidecar and regular_created:
            continue
        if instance is None:
            actions.start.append(container["name"])
            return actions
        state = instance["state"]
        if sidecar:
            if state == "running":
                check_running(container, instance)
                if (started or {}).get(instance["id"], True):
                    continue
                return actions
            if state == "created":
                return actions
            if status_gen.should_container_be_restarted(pod, container, instance):
                restart_or_wait(container, instance)
            if not regular_created:
                return actions
            continue
        if state in ("running", "created"):
            return actions
        if state == "exited" and int(instance.get("exit_code") or 0) == 0:
            continue
        # A failed plain init container: a Never pod has failed (the phase says so); others retry.
        if status_gen.restart_policy(pod) != "Never":
            restart_or_wait(container, instance)
        return actions

    for container in spec.get("containers") or []:
        instance = latest.get(container["name"])
        if instance is None:
            actions.start.append(container["name"])
        elif instance["state"] == "running":
            check_running(container, instance)
        elif instance["state"] != "created" and status_gen.should_container_be_restarted(
            pod, container, instance
        ):
            restart_or_wait(container, instance)
    return actions
