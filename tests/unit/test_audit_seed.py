"""The fold's record rebuilt from a pod's journal and history (read/audit/seed.py) is the record
the fold itself had, after every input of pods that live, probe, crash, back off, terminate, are
removed and come back; and `why` answers the same from it as from folding the whole journal."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest

from podledger.read.audit import queries, rules
from podledger.read.audit.parse import PodRef
from podledger.read.audit.seed import record_before
from podledger.read.index import SqliteIndex
from podledger.schemas import models, to_dict
from podledger.streams.fold import Coordinates, PodRecord, fold_event
from podledger.types import Topic
from podledger.workload import IngressEvent, make_pod, workload
from tests import pods
from tests.support.audit import fill_audit_index

NODE = "node-000"
T0 = 1_714_572_000_000


def json(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


def runtime(uid: str, state: str, restarts: int, exit_code: int | None = None) -> dict[str, Any]:
    container = pods.runtime_container(
        f"sim://{uid}-app-{restarts}", "app", "example/app:1", state, exit_code=exit_code, restarts=restarts
    )
    return {
        "containers": [container],
        "ips": ["10.0.0.7"],
        "runtime_type": "sim",
        "sandbox": {"id": "s", "ready": True},
    }


def ending_story(uid: str, static: bool) -> list[tuple[str, Any]]:
    """A pod that runs, is probed, backs off, is told to terminate, terminates, is removed from the
    config and comes back under the same UID (a static pod re-added)."""
    pod = make_pod(uid, f"story-{uid}", NODE)
    if static:
        pod["metadata"]["annotations"] = {"kubernetes.io/config.source": "file"}
    ts = iter(range(T0, T0 + 1000, 10))
    started = runtime(uid, "running", 0)
    cid = started["containers"][0]["id"]
    return [
        (Topic.POD_UPDATES, models.PodUpdate("ADD", "file" if static else "api", NODE, pod, next(ts))),
        (Topic.PLEG, models.PlegEvent(uid, NODE, "ContainerStarted", cid, started, next(ts))),
        (Topic.PROBE_RESULTS, models.ProbeResult(uid, NODE, "app", cid, "readiness", "Success", next(ts))),
        (
            Topic.PLEG,
            models.PlegEvent(uid, NODE, "ContainerDied", cid, runtime(uid, "exited", 0, 1), next(ts)),
        ),
        (
            Topic.POD_LIFECYCLE,
            models.PodLifecycle(
                uid, NODE, "sync_result", next(ts), [{"container": "app", "reason": "CrashLoopBackOff"}]
            ),
        ),
        (Topic.POD_LIFECYCLE, models.PodLifecycle(uid, NODE, "terminating", next(ts), grace_s=30)),
        (
            Topic.POD_LIFECYCLE,
            models.PodLifecycle(uid, NODE, "terminated", next(ts), runtime=runtime(uid, "exited", 0, 137)),
        ),
        (Topic.POD_UPDATES, models.PodUpdate("REMOVE", "api", NODE, pod, next(ts))),
        (Topic.POD_UPDATES, models.PodUpdate("ADD", "api", NODE, pod, next(ts))),
        (Topic.PLEG, models.PlegEvent(uid, NODE, "ContainerStarted", cid, started, next(ts))),
    ]


def events() -> list[tuple[str, str, Any]]:
    """(uid, topic, event) of a workload's pods and of two pods with the whole story."""
    out = [(e.key, e.topic, e.value) for e in workload(4, 160, nodes=1, seed=9, start_ms=T0)]
    for uid, static in (("uid-api", False), ("uid-static", True)):
        out += [(uid, topic, event) for topic, event in ending_story(uid, static)]
    return out


def test_the_rebuilt_record_is_the_folds_own_after_every_input() -> None:
    records: dict[str, PodRecord | None] = {}
    journal: dict[str, list[dict[str, Any]]] = {}
    last_version: dict[str, dict[str, Any] | None] = {}
    offsets: dict[str, int] = {}
    compared = 0
    for uid, topic, event in events():
        at = Coordinates(topic, 0, offsets.setdefault(topic, 0), event.ts_ms)
        offsets[topic] += 1
        record, outputs = fold_event(records.get(uid), at, event)
        records[uid] = record
        for o in outputs:
            if o.topic == Topic.JOURNAL:
                journal.setdefault(uid, []).append(to_dict(o.value))
            elif o.topic == Topic.POD_STATUS_HISTORY:
                last_version[uid] = to_dict(o.value)
        if record is None:  # removed: the next life starts without a version
            last_version[uid] = None
        rebuilt = record_before(journal[uid], last_version.get(uid))
        assert json(rebuilt) == json(record), (uid, topic, event)
        compared += 1
    assert compared == 180


def test_why_from_the_rebuilt_record_answers_as_a_fold_of_the_whole_journal(
    index: SqliteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    uids = {uid for uid, _, _ in events()}
    answers = {}
    for uid in sorted(uids):
        *older, newest = queries.history(index, PodRef(uid=uid))
        # A version of an older life is asked for by its time (a version number means the newest life's).
        asks = [{"at_ms": row["ts_ms"]} for life in older for row in life["versions"]]
        asks += [{"version": row["version"]} for row in newest["versions"]]
        for ask in asks:
            answers[(uid, *ask.items())] = queries.why(index, PodRef(uid=uid), **ask)

    def whole_journal(entries: Any, start: Any, life: Any, i: int, limits: Any) -> list[rules.Step]:
        return rules.refold([(e.position, e.value) for e in entries], start, limits)

    monkeypatch.setattr(queries, "_explain", whole_journal)
    for (uid, ask), answer in answers.items():
        assert queries.why(index, PodRef(uid=uid), **dict([ask])) == answer
    assert len(answers) > 40 and all(a["replayed"] for a in answers.values())


@pytest.fixture
def index(tmp_path: Path) -> SqliteIndex:
    """An index of the journal and history the fold makes of events(), on partition 0."""
    idx = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    fill_audit_index(
        idx, [IngressEvent(topic, uid, NODE, event, event.ts_ms) for uid, topic, event in events()]
    )
    return idx


def test_a_rebuilt_record_that_misses_falls_back_to_the_whole_journal(
    index: SqliteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    [*_, life] = queries.history(index, PodRef(uid="uid-api"))
    expected = [queries.why(index, PodRef(uid="uid-api"), version=r["version"]) for r in life["versions"]]

    def amiss(entries: Any, last_version: Any) -> Any:
        record = record_before(entries, last_version)
        if record is not None:
            record["status"], record["version"] = None, 0  # as if a version had been missed
        return record

    monkeypatch.setattr(queries, "record_before", amiss)
    again = [queries.why(index, PodRef(uid="uid-api"), version=r["version"]) for r in life["versions"]]
    assert again == expected and all(a["replayed"] for a in again)


def test_why_of_the_second_version_one_input_made_names_that_input_alone(index: SqliteIndex) -> None:
    [first_life, _] = queries.history(index, PodRef(uid="uid-api"))
    rows = first_life["versions"]
    # The pod worker's terminated fact: the generated status, then TerminatePod's rewrite.
    twice = [b for a, b in itertools.pairwise(rows) if a["cause"] == b["cause"]]
    assert twice and twice[0]["cause"]["type"] == "pod-lifecycle:terminated"
    answer = queries.why(index, PodRef(uid="uid-api"), at_ms=twice[0]["ts_ms"])
    assert answer["version"]["version"] == twice[0]["version"] and answer["replayed"]
    assert [i["input"]["offset"] for i in answer["chain"]] == [twice[0]["cause"]["offset"]]
    assert answer["rules"][0].startswith("TerminatePod:")
