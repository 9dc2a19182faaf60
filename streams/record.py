"""The fold's pod record, and the events it holds for a pod not announced yet. Pure.

A pod record (`PodRecord`) is a plain dict, stored as JSON on fold-state. Events that arrive before
their pod's first pod-update wait in it (`hold`) and are given up by `expire_held` (HoldLimits);
`held_since` says since when a record has been waiting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from podledger.schemas import from_dict, models, to_dict
from podledger.schemas.origin import Proof
from podledger.streams.outputs import Coordinates, Output, dead_letter_unknown_pod
from podledger.types import JSONDict, RuntimeSnapshot


class PodRecord(TypedDict, total=False):
    """The fold's state of one pod. A pod not announced yet has only uid, pod=None, held, applied."""

    uid: str
    namespace: str
    name: str
    node: str
    source: str
    # The desired pod from pod-updates (its status is what the API last reported); None while waiting.
    # Typed Any, as `status`, so the status functions take them as the plain JSON they are.
    pod: Any
    runtime: RuntimeSnapshot | None  # the latest runtime snapshot (pleg), or the worker's final one
    runtime_ts: int  # event time of that snapshot; an older one never replaces it
    probes: dict[str, JSONDict]  # {container: {container id: {probe: result}}}
    reasons: dict[str, JSONDict]  # {container: {reason, message}}: the pod worker's reason cache
    terminating: bool  # the pod worker started terminating the pod
    terminated: bool  # the pod worker terminated it (no container can run any more)
    finished: bool  # TerminatePod ran: the sink may delete the pod once its API phase is terminal
    status: Any  # the cached status (None before the first version)
    version: int  # its version (0 before the first)
    applied: dict[str, int]  # {topic: highest offset applied}: redeliveries and replays are skipped
    held: list[list[Any]]  # events waiting for the announcement, each `HeldEvent.to_json()`
    # {topic: highest proven sequence number applied} (schemas/origin.py); only with proof of origin.
    seqs: dict[str, int]


@dataclass(frozen=True, slots=True)
class HeldEvent:
    """An input event waiting for its pod's announcement; on fold-state as [topic, partition,
    offset, ts_ms, value] (plus [node, seq] when its origin was proven), so stored records keep
    their shape."""

    at: Coordinates
    value: JSONDict
    proof: Proof | None = None

    def to_json(self) -> list[Any]:
        item = [self.at.topic, self.at.partition, self.at.offset, self.at.ts_ms, self.value]
        return item if self.proof is None else [*item, [self.proof.node, self.proof.seq]]

    @classmethod
    def from_json(cls, item: list[Any]) -> HeldEvent:
        topic, partition, offset, ts_ms, value = item[:5]
        proof = Proof(*item[5]) if len(item) > 5 else None
        return cls(Coordinates(topic, partition, offset, ts_ms), value, proof)


def held_since(record: PodRecord | None) -> tuple[int, int] | None:
    """(partition, stamp of its oldest held event) of a record holding events, else None.

    A record holds events only for its own uid, so they are all in one partition."""
    held = (record or {}).get("held")
    if not held:
        return None
    return int(held[0][1]), min(int(item[3]) for item in held)


def new_record(update: models.PodUpdate) -> PodRecord:
    meta = update.pod["metadata"]
    return {
        "uid": update.uid,
        "namespace": meta.get("namespace") or "default",
        "name": meta["name"],
        "node": update.node,
        "source": update.source,
        "pod": update.pod,
        "runtime": None,
        "probes": {},
        "reasons": {},
        "terminating": False,
        "terminated": False,
        "finished": False,
        "status": None,
        "version": 0,
        "applied": {},
    }


@dataclass(frozen=True, slots=True)
class HoldLimits:
    """How long events for a pod that pod-updates has not announced yet are held.

    Such events are normal in a race: the fold reads pleg or probe-results ahead of the
    pod-updates partition that announces the pod (topics are consumed independently, and far
    apart while a worker catches up). They wait in the pod's record and are applied, in arrival
    order, right after the pod's first pod-update. A pod that is never announced would hold them
    forever, so a pod holds at most `max_events`, and an event is given up once pod-updates of
    its partition has been read `max_ms` (event time) past it without announcing the pod. What
    is given up goes to dead-letter as `unknown_pod`.
    """

    max_events: int = 100
    max_ms: int = 60_000


DEFAULT_HOLD = HoldLimits()


def hold(
    record: PodRecord | None, at: Coordinates, event: Any, limits: HoldLimits, proof: Proof | None
) -> tuple[PodRecord | None, list[Output]]:
    uid = event.uid
    before: PodRecord = record or {}
    held = [*before.get("held", []), HeldEvent(at, to_dict(event), proof).to_json()]
    # str(): a Topic member as a key would not encode (orjson takes only exact str keys).
    applied = {**before.get("applied", {}), str(at.topic): at.offset}
    overflow = max(len(held) - limits.max_events, 0)
    why = f"held beyond {limits.max_events} events"
    outputs = [_held_dead_letter(uid, HeldEvent.from_json(item), why) for item in held[:overflow]]
    return {"uid": uid, "pod": None, "held": held[overflow:], "applied": applied}, outputs


def _held_dead_letter(uid: str, held: HeldEvent, why: str) -> Output:
    return dead_letter_unknown_pod(uid, held.at, from_dict(held.at.topic, held.value), why)


def expire_held(
    record: PodRecord, now_ms: int, limits: HoldLimits = DEFAULT_HOLD
) -> tuple[PodRecord, list[Output]]:
    """Dead-letter a waiting pod's held events older than the limit at event time `now_ms`."""
    keep: list[list[Any]] = []
    outputs: list[Output] = []
    for item in record.get("held") or []:
        held = HeldEvent.from_json(item)
        if now_ms - held.at.ts_ms > limits.max_ms:
            outputs.append(_held_dead_letter(record["uid"], held, f"held longer than {limits.max_ms} ms"))
        else:
            keep.append(item)
    return ({**record, "held": keep} if outputs else record), outputs
