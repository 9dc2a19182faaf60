"""Test vectors for probe workers and the probe manager (docs/kubelet-rules.md, "Prober").

test_Test* functions carry the names of upstream's worker_test.go and prober_manager_test.go cases. The
worker vectors drive the pure halves of doProbe (before_probe / after_probe) with a fake probe result and
a fixed `now`; the manager vectors run the asyncio Prober with an injected check; TestUpdatePodStatus*
exercise streams.status.apply_probe_results, which plays the manager's UpdatePodStatus in the fold.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from typing import Any

import pytest

from podledger.agents.prober import (
    CheckOutcome,
    CheckResult,
    Prober,
    ProbeWorkerState,
    ResultCache,
    execute_probe,
)
from podledger.agents.prober.specs import probe_termination_grace_seconds, workers_for_pod
from podledger.agents.prober.worker import after_probe, apply_ops, before_probe, verdict_for
from podledger.schemas import decode, encode, models
from podledger.streams.status import apply_probe_results, rfc3339
from podledger.types import JSONDict, ProbeResult, ProbeType
from tests import pods
from tests.support.processes import wait_for_async

NOW = 1_800_000_000.0
UID = "pod-uid-1"
NAME = "test_container"
CID = "process://cont_id"
ALL_TYPES = (ProbeType.LIVENESS, ProbeType.READINESS, ProbeType.STARTUP)


def container_with(probe_type: str, **probe: Any) -> JSONDict:
    return pods.container(NAME, **{f"{probe_type}Probe": {"exec": {"command": ["true"]}, **probe}})


def pod_with(
    *containers: JSONDict,
    init_containers: tuple[JSONDict, ...] = (),
    restart_policy: str | None = "Never",
    uid: str = UID,
) -> JSONDict:
    # upstream's test pod has restartPolicy Never, which is what makes a terminated container final
    return pods.pod(
        containers,
        init_containers,
        name="test_pod",
        namespace="test",
        uid=uid,
        restart_policy=restart_policy,
    )


def running_status(started: bool, *, started_at: float = NOW, cid: str = CID, name: str = NAME) -> JSONDict:
    return {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "containerStatuses": [
            {
                "name": name,
                "containerID": cid,
                "state": {"running": {"startedAt": rfc3339(started_at)}},
                "started": started,
                "ready": False,
            }
        ],
    }


class Worker:
    """A worker driven by hand: doProbe is before_probe, the fake probe, then after_probe."""

    def __init__(self, probe_type: str, *, pod: JSONDict | None = None, **probe: Any) -> None:
        self.container = container_with(probe_type, **probe)
        self.pod = pod if pod is not None else pod_with(self.container)
        self.state = ProbeWorkerState(probe_type)
        self.cache = ResultCache()
        self.status: JSONDict | None = None
        self.now = NOW
        self.probe_result = ProbeResult.SUCCESS
        self.probe_error: str | None = None
        self.probes_run = 0
        self.changes: list[tuple[str, str]] = []

    def do_probe(self) -> bool:
        self.state, step = before_probe(self.state, self.container, self.pod, self.status, self.now)
        self.changes += apply_ops(self.cache, step.ops)
        if not step.run_probe:
            return step.keep_going
        self.probes_run += 1
        self.state, step = after_probe(self.state, self.container, self.probe_result, self.probe_error)
        self.changes += apply_ops(self.cache, step.ops)
        return step.keep_going

    def result(self, cid: str = CID) -> str | None:
        return self.cache.get(cid)


# --------------------------------------------------------------------------- worker_test.go


@pytest.mark.parametrize("probe_type", ALL_TYPES)
def test_TestInitialDelay(probe_type: str) -> None:
    w = Worker(probe_type, initialDelaySeconds=10)
    w.status = running_status(probe_type != ProbeType.STARTUP, started_at=NOW)
    assert w.do_probe() is True
    assert w.probes_run == 0
    assert (
        w.result()
        == {
            ProbeType.LIVENESS: ProbeResult.SUCCESS,
            ProbeType.READINESS: ProbeResult.FAILURE,
            ProbeType.STARTUP: ProbeResult.UNKNOWN,
        }[probe_type]
    )

    w.status = running_status(probe_type != ProbeType.STARTUP, started_at=NOW - 100)
    assert w.do_probe() is True
    assert w.probes_run == 1
    assert w.result() == ProbeResult.SUCCESS


def test_initial_delay_truncates_seconds_toward_zero() -> None:
    """Elapsed time counts in whole seconds truncated toward zero (Go's int32(seconds)): a startedAt half a
    second ahead of the clock is 0 s, so a probe without initial delay runs."""
    w = Worker(ProbeType.READINESS)
    w.status = running_status(True, started_at=NOW)
    w.now = NOW - 0.5
    w.do_probe()
    assert w.probes_run == 1
    w = Worker(ProbeType.READINESS, initialDelaySeconds=10)
    w.status = running_status(True, started_at=NOW)
    w.now = NOW + 9.9
    w.do_probe()
    assert w.probes_run == 0
    w.now = NOW + 10.0
    w.do_probe()
    assert w.probes_run == 1


def _status_case(case: str, probe_type: str) -> JSONDict | None:
    status = running_status(probe_type != ProbeType.STARTUP)
    cs = status["containerStatuses"][0]
    if case == "no status":
        return None
    if case == "pod failed":
        status["phase"] = "Failed"
    elif case == "no container status":
        cs["name"] = "otherContainer"
    elif case == "container waiting":
        cs["state"] = {"waiting": {"reason": "ContainerCreating"}}
    elif case == "container terminated":
        cs["state"] = {"terminated": {"exitCode": 0, "startedAt": rfc3339(NOW)}}
    return status


# case -> (continues for liveness, readiness, startup; result set or None)
DO_PROBE_CASES: dict[str, tuple[tuple[bool, bool, bool], str | None]] = {
    "no status": ((True, True, True), None),
    "pod failed": ((False, False, False), None),
    "pod deletion": ((False, True, False), ProbeResult.SUCCESS),
    "no container status": ((True, True, True), None),
    "container waiting": ((True, True, True), ProbeResult.FAILURE),
    "container terminated": ((False, False, False), ProbeResult.FAILURE),
    "probe successful": ((True, True, True), ProbeResult.SUCCESS),
    "initial delay passed": ((True, True, True), ProbeResult.SUCCESS),
}


@pytest.mark.parametrize("case", list(DO_PROBE_CASES))
@pytest.mark.parametrize("probe_type", ALL_TYPES)
def test_TestDoProbe(probe_type: str, case: str) -> None:
    continues, expected = DO_PROBE_CASES[case]
    probe = {"initialDelaySeconds": -100} if case == "initial delay passed" else {}
    w = Worker(probe_type, **probe)
    w.status = _status_case(case, probe_type)
    if case == "pod deletion":
        w.pod["metadata"]["deletionTimestamp"] = rfc3339(NOW)
    assert w.do_probe() is continues[ALL_TYPES.index(probe_type)]
    assert w.result() == expected
    assert (CID in w.cache) is (expected is not None)


@pytest.mark.parametrize("restart_policy", ["Always", "OnFailure"])
def test_terminated_container_that_restarts_keeps_the_worker(restart_policy: str) -> None:
    w = Worker(ProbeType.LIVENESS)
    w.pod = pod_with(w.container, restart_policy=restart_policy)
    w.status = _status_case("container terminated", ProbeType.LIVENESS)
    assert w.do_probe() is True
    assert w.result() == ProbeResult.FAILURE


def test_terminated_sidecar_keeps_the_worker_under_restart_policy_never() -> None:
    """Sidecars are restarted whatever the pod's policy, so their workers go on (upstream worker.go)."""
    w = Worker(ProbeType.READINESS)
    w.container["restartPolicy"] = "Always"
    w.pod = pod_with(init_containers=(w.container,), restart_policy="Never")
    status = _status_case("container terminated", ProbeType.READINESS)
    assert status is not None
    status["initContainerStatuses"] = status.pop("containerStatuses")
    w.status = status
    assert w.do_probe() is True
    assert w.result() == ProbeResult.FAILURE


def test_TestFailureThreshold() -> None:
    w = Worker(ProbeType.READINESS, successThreshold=1, failureThreshold=3)
    w.status = running_status(True)
    for _ in range(2):
        w.probe_result = ProbeResult.SUCCESS
        for _ in range(3):
            assert w.do_probe() is True
            assert w.result() == ProbeResult.SUCCESS
        w.probe_result = ProbeResult.FAILURE
        for _ in range(2):  # failures 1-2: still Success
            assert w.do_probe() is True
            assert w.result() == ProbeResult.SUCCESS
        for _ in range(3):  # failure 3 and later
            assert w.do_probe() is True
            assert w.result() == ProbeResult.FAILURE


def test_TestSuccessThreshold() -> None:
    w = Worker(ProbeType.READINESS, successThreshold=3, failureThreshold=1)
    w.status = running_status(True)
    w.cache.set(CID, ProbeResult.FAILURE)  # start out Failure
    for _ in range(2):
        w.probe_result = ProbeResult.SUCCESS
        for _ in range(2):
            assert w.do_probe() is True
            assert w.result() == ProbeResult.FAILURE
        for _ in range(3):
            assert w.do_probe() is True
            assert w.result() == ProbeResult.SUCCESS
        w.probe_result = ProbeResult.FAILURE  # one flake is enough with failureThreshold 1
        assert w.do_probe() is True
        assert w.result() == ProbeResult.FAILURE


def test_TestStartupProbeFailureThreshold() -> None:
    w = Worker(ProbeType.STARTUP, successThreshold=1, failureThreshold=3)
    w.status = running_status(False)
    w.probe_result = ProbeResult.FAILURE
    for run in (1, 2):
        assert w.state.on_hold is False
        assert w.do_probe() is True
        assert w.result() == ProbeResult.UNKNOWN
        assert w.state.result_run == run
    assert w.do_probe() is True
    assert w.result() == ProbeResult.FAILURE
    assert (w.state.result_run, w.state.on_hold) == (0, True)
    assert w.do_probe() is True  # held: no probe runs
    assert (w.probes_run, w.state.result_run, w.state.on_hold) == (3, 0, True)


def test_TestStartupProbeSuccessThreshold() -> None:
    w = Worker(ProbeType.STARTUP, successThreshold=1, failureThreshold=3)
    w.status = running_status(False)
    assert w.state.on_hold is False
    assert w.do_probe() is True
    assert w.result() == ProbeResult.SUCCESS
    assert (w.state.result_run, w.state.on_hold) == (0, True)
    assert w.do_probe() is True
    assert w.probes_run == 1


@pytest.mark.parametrize("probe_type", [ProbeType.LIVENESS, ProbeType.STARTUP])
def test_TestOnHoldOnLivenessOrStartupCheckFailure(probe_type: str) -> None:
    w = Worker(probe_type, successThreshold=1, failureThreshold=1)
    w.status = running_status(probe_type != ProbeType.STARTUP)
    w.probe_result = ProbeResult.FAILURE
    assert w.do_probe() is True
    assert w.result() == ProbeResult.FAILURE
    assert w.state.on_hold is True

    w.probe_result = ProbeResult.SUCCESS  # ignored while on hold
    assert w.do_probe() is True
    assert w.result() == ProbeResult.FAILURE
    assert w.state.on_hold is True

    new_cid = "process://newCont_ID"
    w.status = running_status(probe_type != ProbeType.STARTUP, cid=new_cid)
    assert w.do_probe() is True
    assert w.result(new_cid) == ProbeResult.SUCCESS
    assert CID not in w.cache  # the old container's result was removed
    assert w.state.on_hold is (probe_type == ProbeType.STARTUP)


def test_TestResultRunOnLivenessCheckFailure() -> None:
    w = Worker(ProbeType.LIVENESS, successThreshold=1, failureThreshold=3)
    w.status = running_status(True)
    assert w.do_probe() is True
    assert (w.result(), w.state.result_run) == (ProbeResult.SUCCESS, 1)
    w.probe_result = ProbeResult.FAILURE
    for run in (1, 2):
        assert w.do_probe() is True
        assert (w.result(), w.state.result_run) == (ProbeResult.SUCCESS, run)
    assert w.do_probe() is True
    assert (w.result(), w.state.result_run, w.state.on_hold) == (ProbeResult.FAILURE, 0, True)


def test_TestLivenessProbeDisabledByStarted() -> None:
    w = Worker(ProbeType.LIVENESS, successThreshold=1, failureThreshold=1)
    w.status = running_status(False)
    w.probe_result = ProbeResult.FAILURE
    assert w.do_probe() is True
    assert (w.result(), w.probes_run) == (ProbeResult.SUCCESS, 0)
    w.status = running_status(True)
    assert w.do_probe() is True
    assert (w.result(), w.probes_run) == (ProbeResult.FAILURE, 1)


def test_TestStartupProbeDisabledByStarted() -> None:
    w = Worker(ProbeType.STARTUP, successThreshold=1, failureThreshold=2)
    w.status = running_status(False)
    w.probe_result = ProbeResult.FAILURE
    assert w.do_probe() is True
    assert w.result() == ProbeResult.UNKNOWN
    w.probe_result = ProbeResult.SUCCESS
    assert w.do_probe() is True
    assert w.result() == ProbeResult.SUCCESS
    w.status = running_status(True)
    w.probe_result = ProbeResult.FAILURE
    assert w.do_probe() is True
    assert w.result() == ProbeResult.SUCCESS
    assert w.probes_run == 2


def test_probe_error_is_discarded() -> None:
    w = Worker(ProbeType.READINESS, failureThreshold=1)
    w.status = running_status(True)
    w.probe_result, w.probe_error = ProbeResult.FAILURE, "port web not found"
    for _ in range(3):
        assert w.do_probe() is True
    assert (w.result(), w.state.result_run) == (
        ProbeResult.FAILURE,
        0,
    )  # still the initial value, nothing counted
    w.probe_result, w.probe_error = ProbeResult.SUCCESS, None
    w.do_probe()
    assert w.result() == ProbeResult.SUCCESS


def test_only_changes_are_reported() -> None:
    """Results manager: a new ID's first value is a change; a repeat is not; remove is silent."""
    w = Worker(ProbeType.READINESS)
    w.status = running_status(True)
    for _ in range(5):
        w.do_probe()
    assert w.changes == [(CID, ProbeResult.FAILURE), (CID, ProbeResult.SUCCESS)]
    w.status = running_status(True, cid="process://second")
    w.do_probe()
    assert w.changes[2:] == [
        ("process://second", ProbeResult.FAILURE),
        ("process://second", ProbeResult.SUCCESS),
    ]


def test_results_manager_set_and_remove() -> None:
    cache = ResultCache()
    assert cache.set("a", ProbeResult.SUCCESS) is True  # new ID
    assert cache.set("a", ProbeResult.SUCCESS) is False  # same result
    assert cache.set("a", ProbeResult.FAILURE) is True  # different result
    cache.remove("a")
    cache.remove("a")  # removing twice is fine and reports nothing
    assert cache.get("a") is None
    assert cache.set("a", ProbeResult.FAILURE) is True  # after a remove the ID is new again


# ------------------------------------------------------------- probe execution (runProbeWithRetries)


class ScriptedCheck:
    """A check answering from a script (the last entry repeats), counting attempts."""

    def __init__(self, *outcomes: CheckOutcome) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def __call__(
        self, probe: JSONDict, container: JSONDict | None = None, *, host: str = ""
    ) -> CheckOutcome:
        outcome = self.outcomes[min(self.calls, len(self.outcomes) - 1)]
        self.calls += 1
        return outcome

    def set(self, *outcomes: CheckOutcome) -> None:
        self.outcomes, self.calls = list(outcomes), 0


ERRORED = CheckOutcome(ProbeResult.UNKNOWN, "", "dial error")


@pytest.mark.parametrize(
    ("outcomes", "calls", "result", "error"),
    [
        ((CheckOutcome(ProbeResult.SUCCESS),), 1, ProbeResult.SUCCESS, None),
        (
            (CheckOutcome(ProbeResult.FAILURE, "boom"),),
            1,
            ProbeResult.FAILURE,
            None,
        ),  # failures are not retried
        ((ERRORED, ERRORED, CheckOutcome(ProbeResult.SUCCESS)), 3, ProbeResult.SUCCESS, None),
        ((ERRORED,), 3, ProbeResult.FAILURE, "dial error"),  # three errors: Failure with the error
    ],
)
def test_execute_probe_retries_only_on_error(
    outcomes: tuple[CheckOutcome, ...], calls: int, result: str, error: str | None
) -> None:
    check = ScriptedCheck(*outcomes)
    verdict = asyncio.run(execute_probe(ProbeType.LIVENESS, container_with(ProbeType.LIVENESS), check=check))
    assert (check.calls, verdict.result, verdict.error) == (calls, result, error)


def test_execute_probe_without_a_spec_is_success() -> None:
    check = ScriptedCheck(CheckOutcome(ProbeResult.FAILURE))
    verdict = asyncio.run(execute_probe(ProbeType.READINESS, pods.container(NAME), check=check))
    assert (verdict.result, check.calls) == (ProbeResult.SUCCESS, 0)


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (CheckOutcome(ProbeResult.SUCCESS, "ok"), (ProbeResult.SUCCESS, None, None, "")),
        (
            CheckOutcome(CheckResult.WARNING, "Probe terminated redirects, Response body: x"),
            (
                ProbeResult.SUCCESS,
                None,
                "ProbeWarning",
                "Readiness probe warning: Probe terminated redirects, Response body: x",
            ),
        ),
        (
            CheckOutcome(ProbeResult.FAILURE, "HTTP probe failed with statuscode: 500"),
            (
                ProbeResult.FAILURE,
                None,
                "Unhealthy",
                "Readiness probe failed: HTTP probe failed with statuscode: 500",
            ),
        ),
        (CheckOutcome(ProbeResult.UNKNOWN, ""), (ProbeResult.FAILURE, None, None, "")),
        (
            CheckOutcome(ProbeResult.UNKNOWN, "", "port web not found"),
            (
                ProbeResult.FAILURE,
                "port web not found",
                "Unhealthy",
                "Readiness probe errored and resulted in unknown state: port web not found",
            ),
        ),
    ],
)
def test_verdict_mapping(outcome: CheckOutcome, expected: tuple[str, str | None, str | None, str]) -> None:
    verdict = verdict_for(ProbeType.READINESS, outcome)
    assert (verdict.result, verdict.error, verdict.event_reason, verdict.event_message) == expected


def test_probe_termination_grace_seconds() -> None:
    container = container_with(ProbeType.LIVENESS, terminationGracePeriodSeconds=7)
    pod = pod_with(container)
    assert probe_termination_grace_seconds(pod, NAME, ProbeType.LIVENESS) == 7
    assert probe_termination_grace_seconds(pod, NAME, ProbeType.STARTUP) is None
    assert probe_termination_grace_seconds(pod, "other", ProbeType.LIVENESS) is None


# --------------------------------------------------------------------------- prober_manager_test.go


def probed(name: str, *types: str, init_policy: str | None = None, period: float = 0.05) -> JSONDict:
    probes = {f"{t}Probe": {"exec": {"command": ["true"]}, "periodSeconds": period} for t in types}
    return pods.container(name, **probes, **({"restartPolicy": init_policy} if init_policy else {}))


async def eventually(condition: Callable[[], bool], timeout: float = 3.0) -> None:
    await wait_for_async(condition, timeout=timeout, interval=0.01)


def test_TestAddRemovePods() -> None:
    no_probes = pod_with(pods.container("no_probe1"), pods.container("no_probe2"), uid="no_probe_pod")
    with_probes = pod_with(
        probed("probe1", ProbeType.READINESS),
        probed("readiness", ProbeType.READINESS),
        probed("liveness", ProbeType.LIVENESS),
        probed("startup", ProbeType.STARTUP),
        probed("all", *ALL_TYPES),
        pods.container("no_probe"),
        uid="probed_pod",
    )
    expected = {
        ("probed_pod", "probe1", ProbeType.READINESS),
        ("probed_pod", "readiness", ProbeType.READINESS),
        ("probed_pod", "liveness", ProbeType.LIVENESS),
        ("probed_pod", "startup", ProbeType.STARTUP),
        ("probed_pod", "all", ProbeType.READINESS),
        ("probed_pod", "all", ProbeType.LIVENESS),
        ("probed_pod", "all", ProbeType.STARTUP),
    }

    async def scenario() -> None:
        prober = Prober("node-1")
        assert prober.add_pod(no_probes) == 0
        assert prober.add_pod(with_probes) == 7
        assert prober.worker_keys() == expected
        assert prober.add_pod(copy.deepcopy(with_probes)) == 0  # AddPod skips existing keys
        assert prober.worker_keys() == expected
        prober.remove_pod("no_probe_pod")  # nothing to remove
        assert prober.worker_keys() == expected
        prober.remove_pod("probed_pod")
        await eventually(lambda: not prober.worker_keys())
        await prober.close()

    asyncio.run(scenario())


def test_TestAddRemovePodsWithRestartableInitContainer() -> None:
    pod = pod_with(
        pods.container("main"),
        init_containers=(
            probed("init", *ALL_TYPES),  # plain init containers never get workers
            probed("sidecar", ProbeType.READINESS, ProbeType.LIVENESS, init_policy="Always"),
        ),
        restart_policy=None,
        uid="restartable_init_container_pod",
    )
    assert [(name, t) for name, t, _ in workers_for_pod(pod)] == [
        ("sidecar", ProbeType.READINESS),
        ("sidecar", ProbeType.LIVENESS),
    ]

    async def scenario() -> None:
        prober = Prober("node-1")
        assert prober.add_pod(pod) == 2
        assert prober.worker_keys() == {
            ("restartable_init_container_pod", "sidecar", ProbeType.READINESS),
            ("restartable_init_container_pod", "sidecar", ProbeType.LIVENESS),
        }
        prober.remove_pod("restartable_init_container_pod")
        await eventually(lambda: not prober.worker_keys())

    asyncio.run(scenario())


def test_TestCleanupPods() -> None:
    async def scenario() -> None:
        prober = Prober("node-1")
        prober.add_pod(pod_with(probed("prober1", *ALL_TYPES), uid="pod_cleanup"))
        prober.add_pod(pod_with(probed("prober1", *ALL_TYPES), uid="pod_keep"))
        prober.cleanup_pods({"pod_keep"})
        await eventually(lambda: all(uid == "pod_keep" for uid, _, _ in prober.worker_keys()))
        assert len(prober.worker_keys()) == 3
        prober.cleanup_pods({"pod_keep"})  # repeated cleanups are harmless
        await asyncio.sleep(0.05)
        assert len(prober.worker_keys()) == 3
        await prober.close()
        assert not prober.worker_keys()

    asyncio.run(scenario())


@pytest.mark.parametrize("probe_type", ALL_TYPES)
def test_TestCleanUp(probe_type: str) -> None:
    """A worker that reached Success; stop() ten times; then its result and the worker are gone."""

    async def scenario() -> None:
        prober = Prober("node-1")
        prober.update_status(
            UID, running_status(probe_type != ProbeType.STARTUP, started_at=time.time() - 100)
        )
        prober.add_pod(pod_with(probed(NAME, probe_type)))  # a real exec of `true`
        await eventually(lambda: prober.result(probe_type, CID) == ProbeResult.SUCCESS)
        worker = prober.worker(UID, NAME, probe_type)
        assert worker is not None and worker.task is not None
        for _ in range(10):
            worker.stop()
        await asyncio.wait_for(worker.task, 2)
        assert prober.result(probe_type, CID) is None
        assert not prober.has_worker(UID, NAME, probe_type)
        for _ in range(10):
            prober.stop()  # also idempotent at the manager level

    asyncio.run(scenario())


def _manager_scenario(
    check: ScriptedCheck,
    pod: JSONDict,
    status: JSONDict,
    body: Callable[[Prober, list[models.ProbeResult]], Any],
) -> list[models.ProbeResult]:
    published: list[models.ProbeResult] = []

    async def publish(change: models.ProbeResult) -> None:
        published.append(decode("probe-results", encode(change)))  # each value fits the v1 schema

    async def scenario() -> None:
        prober = Prober("node-1", publish, check=check, clock=lambda: NOW)
        prober.update_status(UID, status)
        prober.add_pod(pod)
        await body(prober, published)
        await prober.close()

    asyncio.run(scenario())
    return published


def test_TestUpdateReadiness_publishes_only_changes() -> None:
    check = ScriptedCheck(CheckOutcome(ProbeResult.SUCCESS))
    seen: list[str] = []

    async def body(prober: Prober, published: list[models.ProbeResult]) -> None:
        prober.on_change = lambda change: seen.append(change.result)
        await eventually(lambda: prober.result(ProbeType.READINESS, CID) == ProbeResult.SUCCESS)
        calls = check.calls
        await eventually(lambda: check.calls >= calls + 5)  # many more ticks, no more changes
        assert [p.result for p in published] == [ProbeResult.FAILURE, ProbeResult.SUCCESS]
        check.set(CheckOutcome(ProbeResult.FAILURE, "down"))
        await eventually(lambda: prober.result(ProbeType.READINESS, CID) == ProbeResult.FAILURE)
        await eventually(lambda: len(published) == 3)
        check.set(CheckOutcome(ProbeResult.SUCCESS))
        await eventually(lambda: len(published) == 4)

    pod = pod_with(probed(NAME, ProbeType.READINESS, period=0.02))
    published = _manager_scenario(check, pod, running_status(True), body)
    assert [(p.probe, p.result) for p in published] == [
        (ProbeType.READINESS, ProbeResult.FAILURE),  # the initial value for a new container ID
        (ProbeType.READINESS, ProbeResult.SUCCESS),
        (ProbeType.READINESS, ProbeResult.FAILURE),
        (ProbeType.READINESS, ProbeResult.SUCCESS),
    ]
    assert {(p.uid, p.node, p.container_name, p.container_id, p.ts_ms) for p in published} == {
        (UID, "node-1", NAME, CID, int(NOW * 1000))
    }
    assert seen == [
        ProbeResult.FAILURE,
        ProbeResult.SUCCESS,
        ProbeResult.FAILURE,
        ProbeResult.SUCCESS,
    ]  # on_change sees the same changes


def test_workers_stop_when_the_pod_fails() -> None:
    check = ScriptedCheck(CheckOutcome(ProbeResult.SUCCESS))

    async def body(prober: Prober, published: list[models.ProbeResult]) -> None:
        await eventually(
            lambda: (
                prober.result(ProbeType.READINESS, CID)
                == prober.result(ProbeType.LIVENESS, CID)
                == ProbeResult.SUCCESS
            )
        )
        failed = running_status(True)
        failed["phase"] = "Failed"
        prober.update_status(UID, failed)
        await eventually(lambda: not prober.worker_keys())
        assert (
            prober.result(ProbeType.READINESS, CID) is None and prober.result(ProbeType.LIVENESS, CID) is None
        )

    pod = pod_with(probed(NAME, ProbeType.READINESS, ProbeType.LIVENESS, period=0.02))
    published = _manager_scenario(check, pod, running_status(True), body)
    # results were removed silently: the stream only ever saw initial values and successes
    assert {(p.probe, p.result) for p in published} == {
        (ProbeType.READINESS, ProbeResult.FAILURE),
        (ProbeType.READINESS, ProbeResult.SUCCESS),
        (ProbeType.LIVENESS, ProbeResult.SUCCESS),
    }


def test_liveness_failure_is_visible_to_the_pod_worker() -> None:
    check = ScriptedCheck(CheckOutcome(ProbeResult.FAILURE, "dead"))
    container = probed(NAME, ProbeType.LIVENESS, period=0.02)
    container["livenessProbe"].update(failureThreshold=2, terminationGracePeriodSeconds=4)

    async def body(prober: Prober, published: list[models.ProbeResult]) -> None:
        await eventually(lambda: prober.result(ProbeType.LIVENESS, CID) == ProbeResult.FAILURE)
        assert prober.probe_failures(UID) == {"cont_id": ProbeType.LIVENESS}
        assert prober.probe_termination_grace(UID, NAME, ProbeType.LIVENESS) == 4
        calls = check.calls
        await asyncio.sleep(0.1)
        assert check.calls == calls  # on hold until a new container ID
        prober.update_status(UID, running_status(True, cid="process://restarted"))
        await eventually(lambda: check.calls > calls)
        assert prober.result(ProbeType.LIVENESS, CID) is None  # the old container's result was removed

    published = _manager_scenario(check, pod_with(container), running_status(True), body)
    assert [(p.container_id, p.result) for p in published][:3] == [
        (CID, ProbeResult.SUCCESS),
        (CID, ProbeResult.FAILURE),
        ("process://restarted", ProbeResult.SUCCESS),
    ]


def test_stop_liveness_and_startup_keeps_readiness() -> None:
    check = ScriptedCheck(CheckOutcome(ProbeResult.SUCCESS))

    async def body(prober: Prober, published: list[models.ProbeResult]) -> None:
        await eventually(lambda: len(prober.worker_keys()) == 3)
        prober.stop_liveness_and_startup(UID)
        await eventually(lambda: prober.worker_keys() == {(UID, NAME, ProbeType.READINESS)})

    _manager_scenario(check, pod_with(probed(NAME, *ALL_TYPES, period=0.02)), running_status(True), body)


def test_deletion_timestamp_stops_startup_with_success() -> None:
    """A pod being deleted: startup sets Success and stops although its probe keeps failing; readiness
    (waiting for startup here) goes on."""
    check = ScriptedCheck(CheckOutcome(ProbeResult.FAILURE, "not yet"))
    container = probed(NAME, ProbeType.STARTUP, ProbeType.READINESS, period=0.02)
    container["startupProbe"]["failureThreshold"] = 1000
    pod = pod_with(container)

    async def body(prober: Prober, published: list[models.ProbeResult]) -> None:
        await eventually(lambda: check.calls >= 3)
        assert prober.result(ProbeType.STARTUP, CID) == ProbeResult.UNKNOWN
        deleting = copy.deepcopy(pod)
        deleting["metadata"]["deletionTimestamp"] = rfc3339(NOW)
        assert prober.add_pod(deleting) == 0  # same keys: only the pod object is refreshed
        await eventually(lambda: prober.worker_keys() == {(UID, NAME, ProbeType.READINESS)})

    published = _manager_scenario(check, pod, running_status(False), body)
    assert [p.result for p in published if p.probe == ProbeType.STARTUP] == [
        ProbeResult.UNKNOWN,
        ProbeResult.SUCCESS,
    ]
    assert [p.result for p in published if p.probe == ProbeType.READINESS] == [ProbeResult.FAILURE]


def test_readiness_trigger_runs_a_probe_now() -> None:
    check = ScriptedCheck(CheckOutcome(ProbeResult.SUCCESS))

    async def body(prober: Prober, published: list[models.ProbeResult]) -> None:
        assert prober.trigger(UID, NAME) is True  # cuts the first sleep (up to one 60 s period) short
        await eventually(lambda: check.calls == 1, timeout=1.0)
        assert prober.trigger(UID, NAME) is True
        await eventually(lambda: check.calls == 2, timeout=1.0)
        assert prober.trigger(UID, "nope") is False

    _manager_scenario(
        check, pod_with(probed(NAME, ProbeType.READINESS, period=60)), running_status(True), body
    )


# --------------------------------------------------------------------------- UpdatePodStatus (streams.status)


def _running(name: str) -> JSONDict:
    return {
        "name": name,
        "containerID": f"process://{name}_id",
        "state": {"running": {"startedAt": rfc3339(NOW)}},
        "ready": False,
    }


def _terminated(name: str) -> JSONDict:
    return {
        "name": name,
        "containerID": f"process://{name}_id",
        "state": {"terminated": {"exitCode": 0, "startedAt": rfc3339(NOW)}},
        "ready": False,
    }


def _probe_results(**by_name: dict[str, str]) -> JSONDict:
    return {name: {f"process://{name}_id": results} for name, results in by_name.items()}


UPDATE_POD_STATUS_READY = {
    "unprobed_container": True,  # only a liveness probe
    "probed_container_ready": True,
    "probed_container_pending": False,  # readiness worker without a result
    "probed_container_unready": False,
    "not_started_container_no_readiness": False,
    "started_container_no_readiness": True,
    "terminated_container": False,
}


@pytest.mark.parametrize("name", list(UPDATE_POD_STATUS_READY))
def test_TestUpdatePodStatus(name: str) -> None:
    pod = pod_with(
        probed("unprobed_container", ProbeType.LIVENESS),
        probed("probed_container_ready", ProbeType.READINESS),
        probed("probed_container_pending", ProbeType.READINESS),
        probed("probed_container_unready", ProbeType.READINESS),
        probed("not_started_container_no_readiness", ProbeType.STARTUP),
        probed("started_container_no_readiness", ProbeType.STARTUP),
        probed("terminated_container", ProbeType.READINESS),
    )
    status = {
        "phase": "Running",
        "containerStatuses": [
            _terminated(n) if n == "terminated_container" else _running(n) for n in UPDATE_POD_STATUS_READY
        ],
    }
    probes = _probe_results(
        probed_container_ready={ProbeType.READINESS: ProbeResult.SUCCESS},
        probed_container_unready={ProbeType.READINESS: ProbeResult.FAILURE},
        started_container_no_readiness={ProbeType.STARTUP: ProbeResult.SUCCESS},
        terminated_container={ProbeType.READINESS: ProbeResult.SUCCESS},
    )
    apply_probe_results(pod, status, probes)
    [cs] = [cs for cs in status["containerStatuses"] if cs["name"] == name]
    assert cs["ready"] is UPDATE_POD_STATUS_READY[name]


# (sidecars?, container) -> (started, ready)
INIT_CONTAINER_CASES = {
    ("plain", "not_started_container"): (False, False),
    ("plain", "started_container"): (True, False),
    ("plain", "terminated_container"): (False, True),
    ("sidecar", "not_started_container"): (False, False),
    ("sidecar", "started_container"): (True, True),
    ("sidecar", "terminated_container"): (False, False),
}


@pytest.mark.parametrize(("kind", "name"), list(INIT_CONTAINER_CASES))
def test_TestUpdatePodStatusWithInitContainers(kind: str, name: str) -> None:
    policy = "Always" if kind == "sidecar" else None
    pod = pod_with(
        init_containers=(
            probed("not_started_container", ProbeType.STARTUP, init_policy=policy),
            probed("started_container", ProbeType.STARTUP, init_policy=policy),
            probed("terminated_container", init_policy=policy),
        ),
        restart_policy=None,
    )
    status = {
        "phase": "Running",
        "initContainerStatuses": [
            _running("not_started_container"),
            _running("started_container"),
            _terminated("terminated_container"),
        ],
    }
    apply_probe_results(
        pod, status, _probe_results(started_container={ProbeType.STARTUP: ProbeResult.SUCCESS})
    )
    [cs] = [cs for cs in status["initContainerStatuses"] if cs["name"] == name]
    assert (cs["started"], cs["ready"]) == INIT_CONTAINER_CASES[(kind, name)]
