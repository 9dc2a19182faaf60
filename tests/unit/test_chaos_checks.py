"""`podledger chaos` (pure side): the seeded plan of faults and churn pods, and the checks over
decoded records that decide whether a run lost input, left gaps, forked a version, disagrees with
the offline fold, or left the apiserver behind."""

from __future__ import annotations

import random
from functools import partial

import orjson
import pytest

from podledger.agents.runtime.sim import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS
from podledger.chaos import checks
from podledger.chaos.config import ChaosResult
from podledger.chaos.plan import (
    BROKER_CLEARANCE_S,
    MANAGED_BY,
    MANAGED_LABEL,
    SAME_TARGET_GAP_S,
    chaos_pod,
    fault_window,
    plan_faults,
)
from podledger.schemas import encode, models
from podledger.streams.batch import marker_key
from podledger.streams.replay import replay
from podledger.types import JSONDict, Topic
from podledger.workload import workload
from tests import pods

TARGETS = ["fold-a", "fold-b", "sink", "node-0", "node-1", "node-2"]
plan = partial(plan_faults, seconds=600, kills=50, targets=TARGETS, broker_restarts=1, apiserver_outage_s=30)

# --------------------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_faults_and_another_seed_others() -> None:
    assert plan(7) == plan(7)
    assert plan(7) != plan(8)


def test_the_plan_has_every_fault_asked_for_sorted_inside_the_window() -> None:
    faults = plan(3)
    start, end = fault_window(600)
    assert [f.at_s for f in faults] == sorted(f.at_s for f in faults)
    assert sum(f.kind == "kill" for f in faults) == 50
    assert sum(f.kind == "broker-restart" for f in faults) == 1
    [outage] = [f for f in faults if f.kind == "apiserver-outage"]
    assert outage.duration_s == 30 and start <= outage.at_s and outage.at_s + 30 <= end
    assert all(start <= f.at_s <= end for f in faults)
    assert {f.target for f in faults if f.kind == "kill"} == set(TARGETS)


@pytest.mark.parametrize("seed", range(20))
def test_a_target_is_killed_again_only_once_it_is_back(seed: int) -> None:
    up_again: dict[str, float] = {}
    for fault in plan(seed):
        if fault.kind != "kill":
            continue
        assert fault.at_s >= up_again.get(fault.target, 0.0) + SAME_TARGET_GAP_S - 0.01
        assert 0.5 <= fault.duration_s <= 3.0
        up_again[fault.target] = fault.at_s + fault.duration_s


@pytest.mark.parametrize("seed", range(20))
def test_broker_restarts_keep_clear_of_the_outage_and_of_each_other(seed: int) -> None:
    faults = plan_faults(
        seed, seconds=600, kills=0, targets=TARGETS, broker_restarts=3, apiserver_outage_s=30
    )
    [outage] = [f for f in faults if f.kind == "apiserver-outage"]
    restarts = [f.at_s for f in faults if f.kind == "broker-restart"]
    assert len(restarts) == 3
    for at in restarts:
        assert not outage.at_s - BROKER_CLEARANCE_S < at < outage.at_s + 30 + BROKER_CLEARANCE_S
    assert all(abs(a - b) >= BROKER_CLEARANCE_S for i, a in enumerate(restarts) for b in restarts[i + 1 :])


def test_no_outage_and_no_broker_restart_when_none_is_asked_for() -> None:
    faults = plan_faults(1, seconds=90, kills=8, targets=TARGETS, broker_restarts=0, apiserver_outage_s=0)
    assert [f.kind for f in faults] == ["kill"] * 8


def test_kills_need_targets() -> None:
    with pytest.raises(ValueError):
        plan_faults(1, seconds=90, kills=1, targets=[])


def test_churn_pods_are_bound_labelled_and_the_same_for_a_seed() -> None:
    made = [chaos_pod(random.Random(5), f"chaos-pod-{i}", "chaos-node-1") for i in range(3)]
    assert made == [chaos_pod(random.Random(5), f"chaos-pod-{i}", "chaos-node-1") for i in range(3)]
    rng = random.Random(11)
    kinds = set()
    for i in range(200):
        pod = chaos_pod(rng, f"chaos-pod-{i}", "chaos-node-1")
        meta, spec = pod["metadata"], pod["spec"]
        assert spec["nodeName"] == "chaos-node-1" and "uid" not in meta
        assert meta["labels"][MANAGED_LABEL] == MANAGED_BY
        kinds.add(meta["labels"]["chaos.podledger.io/kind"])
        for key, value in meta["annotations"].items():  # what the sim runtime will parse
            assert (int if key.startswith(ANNOTATION_EXIT_CODE) else float)(value) >= 0
        if spec["restartPolicy"] == "Never":
            assert ANNOTATION_RUN_SECONDS in meta["annotations"]
    assert kinds == {"steady", "crashloop", "completes", "fails", "init"}


# --------------------------------------------------------------------------------------------------
# No lost input
# --------------------------------------------------------------------------------------------------


def folded(
    lines: list[bytes],
) -> tuple[list[checks.Coord], list[models.JournalEntry], list[models.DeadLetter]]:
    """The ingress coordinates of `lines` (as the offline fold numbers them), its journal and dead letters."""
    outputs = list(replay(lines))
    journal = [o.value for o in outputs if o.topic == Topic.JOURNAL]
    letters = [o.value for o in outputs if o.topic == Topic.DEAD_LETTER]
    return (
        [(j.topic, 0, j.offset) for j in journal] + [("input", 0, d.offset) for d in letters],
        journal,
        letters,
    )


def test_every_input_journaled_or_dead_lettered_is_accounted_for() -> None:
    lines = [encode(e.value) for e in workload(5, 60, nodes=2, seed=3)]
    lines.insert(10, b"{not json")
    ingress, journal, letters = folded(lines)
    assert len(ingress) == 61 and len(letters) == 1
    assert checks.lost_inputs(ingress, checks.accounted_coordinates(journal, letters, ())) == []


def test_an_input_neither_journaled_nor_dead_lettered_nor_held_is_lost() -> None:
    lines = [encode(e.value) for e in workload(5, 60, nodes=2, seed=3)]
    ingress, journal, letters = folded(lines)
    dropped = journal.pop(17)
    lost = checks.lost_inputs(ingress, checks.accounted_coordinates(journal, letters, ()))
    assert lost == [(dropped.topic, 0, dropped.offset)]
    held = {(dropped.topic, 0, dropped.offset)}  # ... unless fold-state still holds it
    assert checks.lost_inputs(ingress, checks.accounted_coordinates(journal, letters, held)) == []


def test_coordinates_count_not_contents() -> None:
    """A record written twice is two inputs; a coordinate journaled twice (a batch re-applied) is one."""
    entry = models.JournalEntry("pleg:ContainerStarted", "pleg", 2, 40, 1, {})
    again = models.JournalEntry("pleg:ContainerStarted", "pleg", 2, 40, 1, {})
    ingress = [("pleg", 2, 40), ("pleg", 2, 41)]  # the same value at two offsets
    assert checks.lost_inputs(ingress, checks.accounted_coordinates([entry, again], [], ())) == [
        ("pleg", 2, 41)
    ]


def test_held_events_come_from_the_newest_record_of_each_pod() -> None:
    def record(*held: tuple[str, int, int]) -> bytes:
        return orjson.dumps({"uid": "u", "pod": None, "held": [[t, p, o, 1, {}] for t, p, o in held]})

    state = [
        (b"uid-1", record(("pleg", 1, 5), ("probe-results", 1, 2))),
        (b"uid-2", record(("pleg", 0, 9))),
        (b"uid-1", record(("pleg", 1, 5))),  # probe-results 1@2 was applied or dead-lettered since
        (b"uid-2", None),  # removed
        (marker_key(1), orjson.dumps({"journal_offset": 7})),
    ]
    assert checks.held_coordinates(state) == {("pleg", 1, 5)}


# --------------------------------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------------------------------


def history(lines: list[bytes]) -> list[models.VersionedPodStatus]:
    return [o.value for o in replay(lines) if o.topic == Topic.POD_STATUS_HISTORY]


def test_versions_one_to_n_have_no_gap_and_duplicates_are_no_gap() -> None:
    assert checks.version_gaps([("a", 1), ("a", 2), ("a", 2), ("a", 3), ("b", 1)]) == {}
    assert checks.version_gaps([("a", 1), ("a", 3), ("b", 2), ("b", 5)]) == {"a": [2], "b": [1, 3, 4]}


def test_a_version_with_two_statuses_is_a_conflict_a_repeated_one_is_not() -> None:
    versions = history([encode(e.value) for e in workload(4, 40, nodes=2, seed=9)])
    assert checks.version_conflicts(versions + versions) == {}
    forked = models.VersionedPodStatus(**{**_fields(versions[5]), "status": {"phase": "Unknown"}})
    conflicts = checks.version_conflicts([*versions, forked])
    assert list(conflicts) == [(forked.uid, forked.version)]
    assert {"phase": "Unknown"} in conflicts[(forked.uid, forked.version)]


def _fields(vs: models.VersionedPodStatus) -> dict[str, object]:
    return {name: getattr(vs, name) for name in vs.__slots__}  # type: ignore[attr-defined]


def test_the_live_history_equals_the_offline_fold_of_its_journal() -> None:
    outputs = list(replay([encode(e.value) for e in workload(6, 120, nodes=3, seed=4)]))
    live = [o.value for o in outputs if o.topic == Topic.POD_STATUS_HISTORY]
    journal = [encode(o.value) for o in outputs if o.topic == Topic.JOURNAL]
    offline = checks.offline_history(journal)
    assert checks.history_mismatches(live + live[:10], offline) == {}  # republished versions count once

    changed = models.VersionedPodStatus(**{**_fields(live[3]), "finished": not live[3].finished})
    mismatches = checks.history_mismatches([*live[:3], changed, *live[4:]], offline)
    assert list(mismatches) == [(changed.uid, changed.version)]
    missing = checks.history_mismatches(live[:-1], offline)
    assert list(missing) == [(live[-1].uid, live[-1].version)]
    assert missing[(live[-1].uid, live[-1].version)][0] == []


def test_latest_versions_are_the_highest_per_pod() -> None:
    versions = history([encode(e.value) for e in workload(3, 60, nodes=1, seed=2)])
    latest = checks.latest_versions(reversed(versions))
    assert {uid: vs.version for uid, vs in latest.items()} == {
        uid: max(v.version for v in versions if v.uid == uid) for uid in latest
    }


# --------------------------------------------------------------------------------------------------
# The apiserver
# --------------------------------------------------------------------------------------------------

NOW = 1_800_000_000.0
api_pod = partial(pods.pod, ("main",), node="n1", image="app:1")


def on_api(name: str, status: JSONDict | None, created_s: float = NOW - 60) -> JSONDict:
    created = checks.rfc3339(created_s)
    return api_pod(name=name, uid=f"uid-{name}", status=status, metadata={"creationTimestamp": created})


def version(pod: JSONDict, number: int, status: JSONDict, **flags: bool) -> models.VersionedPodStatus:
    return pods.versioned(pod, "n1", number, status, **flags)


def not_ready() -> JSONDict:
    return pods.running_status("False")


def test_the_apiserver_shows_the_last_version_as_the_sink_writes_it() -> None:
    ready = pods.running_status("True")
    other = pods.api_condition("example.com/Gate", "True")
    # Another controller's condition stays, ahead of the kubelet's (mergePodStatus's order).
    shown = on_api("a", {**ready, "conditions": [other, *ready["conditions"]]})
    behind = on_api("b", not_ready())
    unknown = on_api("c", ready)
    last = {
        "uid-a": version(shown, 3, ready),
        "uid-b": version(behind, 2, ready),
        "uid-gone": version(on_api("gone", None), 7, ready),  # deleted from the API: fine gone
    }
    mismatches = checks.apiserver_mismatches([shown, behind, unknown], last, NOW)
    assert [(m.name, m.reason.split(" ")[0]) for m in mismatches] == [("b", "shows"), ("c", "no")]


def test_a_terminal_phase_the_sink_holds_back_counts_as_shown() -> None:
    """While containers may still run, the sink keeps the API's phase (mergePodStatus)."""
    running = pods.running_status("False")
    failed = {**running, "phase": "Failed"}
    pod = on_api("a", running)
    assert checks.shows(pod, failed, True, NOW)
    assert not checks.shows(pod, failed, False, NOW)


def seen(status: JSONDict, age_s: float, cause: checks.Coord = ("pleg", 0, 0)) -> checks.SeenVersion:
    return checks.SeenVersion(status, True, NOW - age_s, cause)


def test_live_a_pod_is_behind_once_a_version_it_does_not_show_is_older_than_the_slack() -> None:
    pod = on_api("a", not_ready())
    fresh = {"uid-a": {1: seen(not_ready(), 30), 2: seen(pods.running_status(), 2)}}
    assert checks.live_mismatches([pod], fresh, NOW, slack_s=5) == []
    stale = {"uid-a": {1: seen(not_ready(), 30), 2: seen(pods.running_status(), 8)}}
    [mismatch] = checks.live_mismatches([pod], stale, NOW, slack_s=5)
    assert mismatch.reason.startswith("shows v1; v2 was published 8.0s ago")


def test_live_a_version_made_from_input_before_the_last_fault_is_due_at_once() -> None:
    pod = on_api("a", not_ready())
    versions = {"uid-a": {1: seen(not_ready(), 30), 2: seen(pods.running_status(), 1, ("pleg", 2, 99))}}
    assert checks.live_mismatches([pod], versions, NOW, input_ends={("pleg", 2): 99}) == []
    [mismatch] = checks.live_mismatches([pod], versions, NOW, input_ends={("pleg", 2): 100})
    assert "v2" in mismatch.reason


def test_live_a_new_pod_may_wait_for_its_first_version() -> None:
    young, old = on_api("young", None, created_s=NOW - 3), on_api("old", None, created_s=NOW - 30)
    assert [m.name for m in checks.live_mismatches([young, old], {}, NOW, new_pod_s=15)] == ["old"]
    assert [m.name for m in checks.live_mismatches([young, old], {}, NOW, new_pod_s=0)] == ["young", "old"]


def test_live_a_pod_that_shows_none_of_its_versions_is_behind() -> None:
    pod = on_api("a", {"phase": "Pending"})
    [mismatch] = checks.live_mismatches([pod], {"uid-a": {1: seen(pods.running_status(), 60)}}, NOW)
    assert mismatch.reason.startswith("shows none")


# --------------------------------------------------------------------------------------------------
# The last line
# --------------------------------------------------------------------------------------------------


def test_the_last_line_is_machine_readable() -> None:
    result = ChaosResult(seed=1, kills=50, broker_restarts=1, apiserver_outage_s=36.4, converge_s=4.25)
    assert result.line() == (
        "chaos kills=50 broker_restarts=1 apiserver_outage_s=36 lost=0 gaps=0 conflicts=0 converge_s=4.2"
    )
    result.gaps = {"u": [2, 3]}
    result.converge_s = None
    assert result.line().endswith("gaps=2 conflicts=0 converge_s=never")
    assert not result.ok()
