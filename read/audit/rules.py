"""Which of the fold's rules turned a pod's inputs into a status, found by folding them again. Pure.

The pod's journal is re-folded with the fold's own step (streams/fold.py), from its first entry
or from the record rebuilt before the entries explained (seed.py), read-only, so every input's
effect is the one the live fold had: the versions it produced, or
why it produced none (the status came out equal in the kubelet-owned fields, an illegal
container transition was dropped, the pod left the config). For a new version, the deciding
rule is named where one decided it: the phase getPhase computed, a terminal phase kept against
it, TerminatePod's rewrite, or the forced version of a pod being deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from podledger.read.audit.diff import diff
from podledger.read.audit.summary import container_state, container_text
from podledger.schemas import DecodeError, from_dict, to_dict
from podledger.streams import status as status_gen
from podledger.streams.fold import DEFAULT_HOLD, Coordinates, HoldLimits, PodRecord, fold_event
from podledger.streams.status_manager import check_container_state_transition
from podledger.types import TERMINAL_PHASES, LifecycleKind, PodOp, Topic

Position = tuple[int, int]


@dataclass
class Step:
    """One journal entry re-folded: what it produced and why."""

    position: Position
    entry: dict[str, Any]
    versions: list[dict[str, Any]] = field(default_factory=list)  # the history values it produced
    effect: str = ""  # what happened, in words
    rules: dict[int, list[str]] = field(default_factory=dict)  # version -> the rules that decided it


def refold(
    entries: Sequence[tuple[Position, dict[str, Any]]],
    explain_from: Position,
    limits: HoldLimits = DEFAULT_HOLD,
    record: PodRecord | None = None,
) -> list[Step]:
    """Fold a pod's journal entries (in journal order) and explain the steps at or after
    `explain_from`; earlier steps only rebuild the pod's record. The fold starts from `record`:
    None for entries from the pod's first, or the record before them (seed.py)."""
    steps: list[Step] = []
    for position, entry in entries:
        try:
            at = Coordinates(
                str(entry["topic"]), int(entry["partition"]), int(entry["offset"]), int(entry["ts_ms"])
            )
            event = from_dict(at.topic, entry["event"])
        except (DecodeError, KeyError, TypeError, ValueError) as exc:
            if position >= explain_from:
                steps.append(Step(position, entry, effect=f"unreadable journal entry ({exc})"))
            continue
        before = record
        record, outputs = fold_event(record, at, event, limits)
        if position < explain_from:
            continue
        versions = [to_dict(o.value) for o in outputs if o.topic == Topic.POD_STATUS_HISTORY]
        step = Step(position, entry, versions)
        if versions:
            step.effect = "new version " + ", ".join(str(v["version"]) for v in versions)
            step.rules = version_rules(before, record, at, event, versions)
        else:
            step.effect = no_version_reason(before, record, at, event, outputs)
        steps.append(step)
    return steps


def no_version_reason(
    before: PodRecord | None, after: PodRecord | None, at: Coordinates, event: Any, outputs: list[Any]
) -> str:
    """Why an applied input produced no version."""
    if at.topic == Topic.POD_UPDATES and event.op == PodOp.REMOVE:
        return "pod removed from the config: no version; pod-status forgets it (tombstone)"
    if not any(o.topic == Topic.JOURNAL for o in outputs):
        refused = next((o.value for o in outputs if o.topic == Topic.DEAD_LETTER), None)
        if refused is not None:
            return f"refused ({refused.reason}): {refused.detail}"
        return "already applied (a duplicate of an earlier input)"
    if after is None or after.get("pod") is None:
        return "held: the pod was not announced yet"
    generated = status_gen.generate_api_status(
        after["pod"],
        after["status"],
        after["runtime"],
        probes=after["probes"],
        reasons=after["reasons"],
        pod_is_terminal=after["terminated"],
    )
    old = after["status"] if after["status"] is not None else (after["pod"].get("status") or {})
    illegal = check_container_state_transition(old, generated, after["pod"])
    if illegal is not None:
        return f"illegal transition dropped (checkContainerStateTransition): {illegal}"
    return "no change in the kubelet-owned status (isPodStatusByKubeletEqual)"


def version_rules(
    before: PodRecord | None,
    after: PodRecord | None,
    at: Coordinates,
    event: Any,
    versions: list[dict[str, Any]],
) -> dict[int, list[str]]:
    """The rules that decided each version one input produced, where one did."""
    assert after is not None
    pod = after["pod"]
    previous = before.get("status") if before and before.get("pod") is not None else None
    rules: dict[int, list[str]] = {}
    terminated = at.topic == Topic.POD_LIFECYCLE and event.kind == LifecycleKind.TERMINATED
    for i, version in enumerate(versions):
        status = version["status"]
        old_phase = (previous or {}).get("phase") or ""
        phase = status.get("phase", "")
        decided = rules.setdefault(int(version["version"]), [])
        if terminated and i == len(versions) - 1:
            decided.append(
                "TerminatePod: the pod worker terminated the pod; containers not terminated become"
                f" ContainerStatusUnknown (exit 137), phase {phase}"
            )
        else:
            decided += _phase_rules(pod, status, old_phase, after["terminated"])
            if version.get("deleting") and previous is not None and not diff(previous, status):
                decided.append("pod being deleted: a new version even without a change (forced)")
        previous = status
    return rules


def _phase_rules(pod: dict[str, Any], status: dict[str, Any], old_phase: str, terminal: bool) -> list[str]:
    phase = status.get("phase", "")
    computed = status_gen.get_phase(
        pod, status.get("initContainerStatuses"), status.get("containerStatuses"), terminal
    )
    api_phase = (pod.get("status") or {}).get("phase")
    if computed != phase and old_phase in TERMINAL_PHASES and phase == old_phase:
        return [f"terminal phase kept: getPhase gives {computed}, but a pod never leaves {old_phase}"]
    if computed != phase and api_phase in TERMINAL_PHASES and phase == api_phase:
        return [f"the apiserver's terminal phase {api_phase} wins over getPhase's {computed}"]
    if phase == old_phase:
        return []
    containers = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    why = " ".join(container_text(container_state(cs)) for cs in containers)
    policy = status_gen.restart_policy(pod)
    return [f"phase rule (getPhase): {old_phase or 'none'} -> {phase}, restartPolicy {policy}: {why}"]
