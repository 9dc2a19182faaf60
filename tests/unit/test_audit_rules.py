"""Rule attribution for `podledger why`: a pod's journal folded again with the fold's own step
names each input's effect and the rule that decided each version (docs/kubelet-rules.md)."""

from __future__ import annotations

from typing import Any

from podledger.read.audit.rules import Step, refold
from podledger.schemas import models, to_dict
from podledger.streams.fold import event_type
from tests import pods

NODE = "node-a"
UID = "uid-1"
T0 = 1_714_572_120_000


def snapshot(state: str, *, exit_code: int | None = None, restarts: int = 0, at: int = T0) -> dict[str, Any]:
    return {
        "containers": [
            pods.runtime_container(
                f"c{restarts}", "worker", "busybox", state, exit_code=exit_code, restarts=restarts
            )
        ],
        "ips": ["10.0.0.7"],
        "runtime_type": "process",
        "sandbox": {"id": "s", "ready": True},
    }


class Journal:
    """A pod's journal as the fold writes it: entries with their input coordinates, in order."""

    def __init__(self, restart_policy: str = "Always") -> None:
        self.pod = pods.pod(("worker",), name="crashloop", uid=UID, node=NODE, restart_policy=restart_policy)
        self.entries: list[tuple[tuple[int, int], dict[str, Any]]] = []
        self.offsets: dict[str, int] = {}

    def add(self, topic: str, event: Any) -> tuple[int, int]:
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        entry = models.JournalEntry(event_type(topic, event), topic, 0, offset, event.ts_ms, to_dict(event))
        position = (0, len(self.entries))
        self.entries.append((position, to_dict(entry)))
        return position

    def update(self, op: str = "ADD", at: int = T0) -> tuple[int, int]:
        return self.add("pod-updates", models.PodUpdate(op, "api", NODE, self.pod, at))

    def pleg(self, kind: str, runtime: dict[str, Any], at: int) -> tuple[int, int]:
        return self.add(
            "pleg", models.PlegEvent(UID, NODE, kind, runtime["containers"][0]["id"], runtime, at)
        )

    def probe(self, result: str, at: int) -> tuple[int, int]:
        return self.add(
            "probe-results", models.ProbeResult(UID, NODE, "worker", "c0", "readiness", result, at)
        )

    def lifecycle(self, kind: str, at: int, **fields: Any) -> tuple[int, int]:
        return self.add("pod-lifecycle", models.PodLifecycle(UID, NODE, kind, at, **fields))


def steps_by_position(journal: Journal, start: tuple[int, int] = (0, 0)) -> dict[tuple[int, int], Step]:
    return {s.position: s for s in refold(journal.entries, start)}


def test_a_crash_under_restart_policy_never_fails_the_pod_by_the_phase_rule() -> None:
    j = Journal(restart_policy="Never")
    j.update()
    j.pleg("ContainerStarted", snapshot("running"), T0 + 1000)
    died = j.pleg("ContainerDied", snapshot("exited", exit_code=1), T0 + 4000)
    steps = steps_by_position(j)
    step = steps[died]
    [version] = step.versions
    assert version["status"]["phase"] == "Failed"
    assert step.effect == f"new version {version['version']}"
    [rule] = step.rules[version["version"]]
    assert rule.startswith("phase rule (getPhase): Running -> Failed, restartPolicy Never")
    assert "worker=terminated:Error(1)" in rule


def test_a_container_started_again_after_its_failure_is_an_illegal_transition_under_never() -> None:
    j = Journal(restart_policy="Never")
    j.update()
    j.pleg("ContainerStarted", snapshot("running"), T0 + 1000)
    j.pleg("ContainerDied", snapshot("exited", exit_code=1), T0 + 4000)
    again = j.pleg("ContainerStarted", snapshot("running", restarts=1), T0 + 5000)
    step = steps_by_position(j)[again]
    assert step.versions == []
    assert step.effect.startswith("illegal transition dropped (checkContainerStateTransition)")
    assert "terminated container worker attempted illegal transition" in step.effect


def test_a_terminal_phase_is_kept_against_get_phase() -> None:
    j = Journal()
    j.update()
    j.pleg("ContainerStarted", snapshot("running"), T0 + 1000)
    j.lifecycle("terminated", T0 + 2000, runtime=snapshot("exited", exit_code=1))
    # A newer relist that shows the container running again: getPhase says Running, the pod stays Failed.
    late = j.pleg("ContainerStarted", snapshot("running", restarts=1), T0 + 3000)
    step = steps_by_position(j)[late]
    [version] = step.versions
    assert version["status"]["phase"] == "Failed"
    assert step.rules[version["version"]] == [
        "terminal phase kept: getPhase gives Running, but a pod never leaves Failed"
    ]


def test_the_apiservers_terminal_phase_wins() -> None:
    j = Journal()
    j.pod["status"] = {"phase": "Failed", "reason": "Evicted"}
    added = j.update()
    step = steps_by_position(j)[added]
    [version] = step.versions
    assert version["status"]["phase"] == "Failed"
    assert step.rules[version["version"]] == [
        "the apiserver's terminal phase Failed wins over getPhase's Pending"
    ]


def test_terminated_produces_the_terminate_pod_version() -> None:
    j = Journal()
    j.update()
    j.pleg("ContainerStarted", snapshot("running"), T0 + 1000)
    gone = j.lifecycle("terminated", T0 + 2000, runtime=snapshot("running"))
    step = steps_by_position(j)[gone]
    last = step.versions[-1]
    assert last["status"]["phase"] == "Failed"
    assert last["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    assert step.rules[last["version"]][0].startswith("TerminatePod:")


def test_inputs_that_change_nothing_say_so() -> None:
    j = Journal()
    j.update()
    j.pleg("ContainerStarted", snapshot("running"), T0 + 1000)
    j.probe("Success", T0 + 2000)
    same = j.probe("Success", T0 + 3000)
    step = steps_by_position(j)[same]
    assert step.versions == []
    assert step.effect == "no change in the kubelet-owned status (isPodStatusByKubeletEqual)"


def test_a_crash_loop_under_always_stays_running_and_names_no_phase_rule() -> None:
    j = Journal()
    j.update()
    j.pleg("ContainerStarted", snapshot("running"), T0 + 1000)
    died = j.pleg("ContainerDied", snapshot("exited", exit_code=1), T0 + 4000)
    backoff = j.lifecycle(
        "sync_result",
        T0 + 4100,
        sync_results=[
            {"container": "worker", "reason": "CrashLoopBackOff", "message": "back-off 10s restarting"}
        ],
    )
    steps = steps_by_position(j)
    for position in (died, backoff):
        [version] = steps[position].versions
        assert version["status"]["phase"] == "Running"
        assert steps[position].rules == {version["version"]: []}
    waiting = steps[backoff].versions[0]["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "CrashLoopBackOff"


def test_removal_and_steps_before_the_window() -> None:
    j = Journal()
    j.update()
    started = j.pleg("ContainerStarted", snapshot("running"), T0 + 1000)
    removed = j.update("REMOVE", T0 + 2000)
    steps = refold(j.entries, started)
    assert [s.position for s in steps] == [started, removed]  # the ADD only rebuilt the record
    assert steps[-1].effect.startswith("pod removed from the config")


def test_an_unreadable_entry_is_reported_and_the_rest_still_folds() -> None:
    j = Journal()
    j.update()
    broken = (0, 99)
    j.entries.append(
        (broken, {"topic": "pleg", "partition": 0, "offset": 9, "ts_ms": T0, "event": {"nope": 1}})
    )
    steps = refold(j.entries, (0, 0))
    assert steps[0].versions and steps[1].effect.startswith("unreadable journal entry")
