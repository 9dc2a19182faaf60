"""Test vectors for pod phase and the kubelet-owned pod conditions (docs/kubelet-rules.md, "Phase" and
"Conditions").

Each test_Test* function reproduces the upstream kubernetes test of that name (kubelet_pods_test.go,
status/generate_test.go), with that test's inputs in the list named after it; the `*_EXTRA` lists are
podledger's own cases for rules the upstream tables do not cover.

Notation in the case ids: R running, W waiting, S stopped (terminated, exit 0),
OK terminated exit 0, F terminated exit -1, WL waiting with a last termination, st started, T terminal.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from podledger.streams import status as status_mod
from podledger.types import JSONDict
from tests import pods

STARTED_AT = "2025-01-01T00:00:00Z"


# --------------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------------


# The test pod of upstream's status tests: two containers on node "machine".
make_pod = partial(pods.pod, containers=("containerA", "containerB"), node="machine", restart_policy="Always")
sidecar = pods.sidecar


def _status(
    name: str,
    state: JSONDict,
    last_state: JSONDict | None = None,
    ready: bool = False,
    started: bool | None = None,
) -> JSONDict:
    cs: JSONDict = {
        "name": name,
        "state": state,
        "lastState": last_state or {},
        "ready": ready,
        "restartCount": 0,
    }
    if started is not None:
        cs["started"] = started
    return cs


def running(name: str, started: bool | None = None, ready: bool = False) -> JSONDict:
    """Running; `started` None leaves the field out (the API's nil), as upstream's runningState does."""
    return _status(name, {"running": {"startedAt": STARTED_AT}}, ready=ready, started=started)


def waiting(name: str, last_exit: int | None = None, reason: str = "") -> JSONDict:
    """Waiting; with `last_exit` it carries lastState.terminated (a crash loop, WL in case ids)."""
    state: JSONDict = {"waiting": {"reason": reason} if reason else {}}
    last = None if last_exit is None else {"terminated": {"exitCode": last_exit}}
    return _status(name, state, last)


def terminated(name: str, code: int = 0) -> JSONDict:
    reason = "Completed" if code == 0 else "Error"
    return _status(name, {"terminated": {"exitCode": code, "reason": reason}})


def no_state(name: str) -> JSONDict:
    """A status whose state has none of running / waiting / terminated set."""
    return _status(name, {})


def bare(name: str, ready: bool = False, started: bool | None = None) -> JSONDict:
    """Only name / ready / started matter (upstream's getReadyStatus, getStartedStatus, ...)."""
    return _status(name, {}, ready=ready, started=started)


def cond(type_: str, status: str, reason: str = "", message: str = "") -> JSONDict:
    """The exact dict a condition function must return: reason/message present only when non-empty."""
    c: JSONDict = {"type": type_, "status": status}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def R(name: str) -> JSONDict:
    return running(name)


def ST(name: str) -> JSONDict:
    return running(name, started=True)


def S(name: str) -> JSONDict:
    return terminated(name, 0)


def OK(name: str) -> JSONDict:
    return terminated(name, 0)


def F(name: str) -> JSONDict:
    return terminated(name, -1)


def W(name: str) -> JSONDict:
    return waiting(name)


def WL(name: str, code: int = 0) -> JSONDict:
    return waiting(name, last_exit=code)


A, B, X, Y = "containerA", "containerB", "containerX", "containerY"

ALWAYS = make_pod(restart_policy="Always")
NEVER = make_pod(restart_policy="Never")
ON_FAILURE = make_pod(restart_policy="OnFailure")
ALWAYS_INIT = make_pod(init_containers=(X,), restart_policy="Always")
NEVER_INIT = make_pod(init_containers=(X,), restart_policy="Never")
ALWAYS_SIDECAR = make_pod(init_containers=(sidecar(X),), restart_policy="Always")
NEVER_SIDECAR = make_pod(init_containers=(sidecar(X),), restart_policy="Never")
ALWAYS_HAS_RUN = make_pod(containers=(A,), init_containers=(X, sidecar(Y)), restart_policy="Always")


# --------------------------------------------------------------------------------------------------
# getPhase. Case: (init_statuses, statuses, pod_is_terminal, expected phase)
# --------------------------------------------------------------------------------------------------

PhaseCase = tuple[list[JSONDict] | None, list[JSONDict] | None, bool, str]


def _phase(pod: JSONDict, init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool) -> str:
    return status_mod.get_phase(pod, init, regular, terminal)


TEST_POD_PHASE_WITH_RESTART_ALWAYS: list[Any] = [
    pytest.param(None, None, False, "Pending", id="none-null"),
    pytest.param([], [], False, "Pending", id="none-empty-lists"),
    pytest.param([], [R(A), R(B)], False, "Running", id="R,R"),
    pytest.param([], [S(A), S(B)], False, "Running", id="S,S"),
    pytest.param([], [OK(A), OK(B)], True, "Succeeded", id="OK,OK+T"),
    pytest.param([], [OK(A), F(B)], True, "Failed", id="OK,F+T"),
    pytest.param([], [R(A), S(B)], False, "Running", id="R,S"),
    pytest.param([], [R(A)], False, "Pending", id="R-only"),
    pytest.param([], [R(A), W(B)], False, "Pending", id="R,W"),
    pytest.param([], [R(A), WL(B)], False, "Running", id="R,WL"),
]


@pytest.mark.parametrize(("init", "regular", "terminal", "expected"), TEST_POD_PHASE_WITH_RESTART_ALWAYS)
def test_TestPodPhaseWithRestartAlways(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(ALWAYS, init, regular, terminal) == expected


TEST_POD_PHASE_WITH_RESTART_NEVER: list[Any] = [
    pytest.param(None, None, False, "Pending", id="none"),
    pytest.param([], [R(A), R(B)], False, "Running", id="R,R"),
    pytest.param([], [OK(A), OK(B)], False, "Succeeded", id="OK,OK"),
    pytest.param([], [F(A), F(B)], False, "Failed", id="F,F"),
    pytest.param([], [R(A), OK(B)], False, "Running", id="R,OK"),
    pytest.param([], [R(A)], False, "Pending", id="R-only"),
    pytest.param([], [R(A), W(B)], False, "Pending", id="R,W"),
]


@pytest.mark.parametrize(("init", "regular", "terminal", "expected"), TEST_POD_PHASE_WITH_RESTART_NEVER)
def test_TestPodPhaseWithRestartNever(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(NEVER, init, regular, terminal) == expected


TEST_POD_PHASE_WITH_RESTART_ON_FAILURE: list[Any] = [
    pytest.param(None, None, False, "Pending", id="none"),
    pytest.param([], [R(A), R(B)], False, "Running", id="R,R"),
    pytest.param([], [OK(A), OK(B)], False, "Succeeded", id="OK,OK"),
    pytest.param([], [F(A), F(B)], False, "Running", id="F,F"),
    pytest.param([], [R(A), OK(B)], False, "Running", id="R,OK"),
    pytest.param([], [R(A)], False, "Pending", id="R-only"),
    pytest.param([], [R(A), W(B)], False, "Pending", id="R,W"),
    pytest.param([], [R(A), WL(B)], False, "Running", id="R,WL"),
]


@pytest.mark.parametrize(("init", "regular", "terminal", "expected"), TEST_POD_PHASE_WITH_RESTART_ON_FAILURE)
def test_TestPodPhaseWithRestartOnFailure(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(ON_FAILURE, init, regular, terminal) == expected


TEST_POD_PHASE_WITH_RESTART_ALWAYS_INIT_CONTAINERS: list[Any] = [
    pytest.param(None, None, False, "Pending", id="none"),
    pytest.param([R(X)], [], False, "Pending", id="X=R"),
    pytest.param([F(X)], [], False, "Pending", id="X=F"),
    pytest.param([WL(X, 0)], [], False, "Pending", id="X=WL(0)"),
    pytest.param([WL(X, -1)], [], False, "Pending", id="X=WL(-1)"),
    pytest.param([W(X)], [], False, "Pending", id="X=W"),
    pytest.param([OK(X)], [R(A), R(B)], False, "Running", id="X=OK+A,B=R"),
]


@pytest.mark.parametrize(
    ("init", "regular", "terminal", "expected"), TEST_POD_PHASE_WITH_RESTART_ALWAYS_INIT_CONTAINERS
)
def test_TestPodPhaseWithRestartAlwaysInitContainers(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(ALWAYS_INIT, init, regular, terminal) == expected


TEST_POD_PHASE_WITH_RESTART_NEVER_INIT_CONTAINERS: list[Any] = [
    pytest.param(None, None, False, "Pending", id="none"),
    pytest.param([R(X)], [], False, "Pending", id="X=R"),
    pytest.param([F(X)], [], False, "Failed", id="X=F"),
    pytest.param([WL(X, 0)], [], False, "Pending", id="X=WL(0)"),
    pytest.param([WL(X, -1)], [], False, "Failed", id="X=WL(-1)"),
    pytest.param([W(X)], [], False, "Pending", id="X=W"),
    pytest.param([OK(X)], [R(A), R(B)], False, "Running", id="X=OK+A,B=R"),
]


@pytest.mark.parametrize(
    ("init", "regular", "terminal", "expected"), TEST_POD_PHASE_WITH_RESTART_NEVER_INIT_CONTAINERS
)
def test_TestPodPhaseWithRestartNeverInitContainers(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(NEVER_INIT, init, regular, terminal) == expected


TEST_POD_PHASE_WITH_RESTART_ALWAYS_RESTARTABLE_INIT_CONTAINERS: list[Any] = [
    pytest.param(None, None, False, "Pending", id="none"),
    pytest.param([R(X)], [], False, "Pending", id="X=R(not-started)"),
    pytest.param([S(X)], [], False, "Pending", id="X=S"),
    pytest.param([WL(X, 0)], [], False, "Pending", id="X=WL(0)"),
    pytest.param([WL(X, -1)], [], False, "Pending", id="X=WL(-1)"),
    pytest.param([W(X)], [], False, "Pending", id="X=W"),
    pytest.param([ST(X)], [R(A)], False, "Pending", id="X=st+A=R"),
    pytest.param([ST(X)], [R(A), R(B)], False, "Running", id="X=st+A,B=R"),
    pytest.param([R(X)], [R(A), R(B)], False, "Running", id="X=R(not-started)+A,B=R"),
    pytest.param([S(X)], [R(A), R(B)], False, "Running", id="X=S+A,B=R"),
    pytest.param([WL(X, 0)], [R(A), R(B)], False, "Running", id="X=WL+A,B=R"),
    pytest.param([F(X)], [OK(A), OK(B)], True, "Succeeded", id="X=F+A,B=OK+T"),
    pytest.param([OK(X)], [OK(A), OK(B)], True, "Succeeded", id="X=OK+A,B=OK+T"),
]


@pytest.mark.parametrize(
    ("init", "regular", "terminal", "expected"),
    TEST_POD_PHASE_WITH_RESTART_ALWAYS_RESTARTABLE_INIT_CONTAINERS,
)
def test_TestPodPhaseWithRestartAlwaysRestartableInitContainers(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(ALWAYS_SIDECAR, init, regular, terminal) == expected


# Upstream expects Pending for the first two rows even though containerA has started: a plain init
# container that is still running keeps the pod Pending (upstream counts plain-init and sidecar
# "pending" separately; only the sidecar count is waived once a regular container has started).
TEST_POD_PHASE_WITH_RESTART_ALWAYS_AND_POD_HAS_RUN: list[Any] = [
    pytest.param([R(X), R(Y)], [R(A)], False, "Pending", id="X=R,Y=R,A=R"),
    pytest.param([R(X), R(Y)], [S(A)], False, "Pending", id="X=R,Y=R,A=S"),
    pytest.param([OK(X), R(Y)], [S(A)], False, "Running", id="X=OK,Y=R,A=S"),
    pytest.param([OK(X), R(Y)], [R(A)], False, "Running", id="X=OK,Y=R,A=R"),
]


@pytest.mark.parametrize(
    ("init", "regular", "terminal", "expected"), TEST_POD_PHASE_WITH_RESTART_ALWAYS_AND_POD_HAS_RUN
)
def test_TestPodPhaseWithRestartAlwaysAndPodHasRun(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(ALWAYS_HAS_RUN, init, regular, terminal) == expected


TEST_POD_PHASE_WITH_RESTART_NEVER_RESTARTABLE_INIT_CONTAINERS: list[Any] = [
    pytest.param(None, None, False, "Pending", id="none"),
    pytest.param([R(X)], [], False, "Pending", id="X=R(not-started)"),
    pytest.param([S(X)], [], False, "Pending", id="X=S"),
    pytest.param([WL(X, 0)], [], False, "Pending", id="X=WL(0)"),
    pytest.param([WL(X, -1)], [], False, "Pending", id="X=WL(-1)"),
    pytest.param([W(X)], [], False, "Pending", id="X=W"),
    pytest.param([ST(X)], [R(A)], False, "Pending", id="X=st+A=R"),
    pytest.param([ST(X)], [OK(A), OK(B)], False, "Running", id="X=st+A,B=OK"),
    pytest.param([R(X)], [OK(A), OK(B)], False, "Running", id="X=R(not-started)+A,B=OK"),
    pytest.param([OK(X)], [OK(A), OK(B)], False, "Succeeded", id="X=OK+A,B=OK"),
    pytest.param([F(X)], [OK(A), OK(B)], False, "Succeeded", id="X=F+A,B=OK"),
    pytest.param([WL(X, 0)], [OK(A), OK(B)], False, "Succeeded", id="X=WL(0)+A,B=OK"),
    pytest.param([WL(X, -1)], [OK(A), OK(B)], False, "Succeeded", id="X=WL(-1)+A,B=OK"),
]


@pytest.mark.parametrize(
    ("init", "regular", "terminal", "expected"), TEST_POD_PHASE_WITH_RESTART_NEVER_RESTARTABLE_INIT_CONTAINERS
)
def test_TestPodPhaseWithRestartNeverRestartableInitContainers(
    init: list[JSONDict] | None, regular: list[JSONDict] | None, terminal: bool, expected: str
) -> None:
    assert _phase(NEVER_SIDECAR, init, regular, terminal) == expected


# Our own phase cases, for branches of getPhase the upstream tables leave out. "rule N" in an id is
# getPhase's rule N as docs/kubelet-rules.md ("Phase") numbers them; 5a-5e are rule 5's outcomes in the
# order it lists them (terminal and not static; then Always, all succeeded, Never, OnFailure).
# Case: (pod, init, regular, terminal, expected)
STATIC_ALWAYS = make_pod(restart_policy="Always", source="file")
STATIC_NEVER = make_pod(restart_policy="Never", source="file")
STATIC_ON_FAILURE = make_pod(restart_policy="OnFailure", source="http")
API_SOURCED_ALWAYS = make_pod(restart_policy="Always", source="api")
ON_FAILURE_INIT = make_pod(init_containers=(X,), restart_policy="OnFailure")

POD_PHASE_EXTRA: list[Any] = [
    # 5a applies only to non-static pods; a static pod with T falls through to 5b-5e.
    pytest.param(STATIC_ALWAYS, [], [OK(A), F(B)], True, "Running", id="static-always-T-rule5b"),
    pytest.param(STATIC_ALWAYS, [], [OK(A), OK(B)], True, "Running", id="static-always-all-ok-T-rule5b"),
    pytest.param(STATIC_NEVER, [], [OK(A), OK(B)], True, "Succeeded", id="static-never-T-rule5c"),
    pytest.param(STATIC_NEVER, [], [OK(A), F(B)], True, "Failed", id="static-never-T-rule5d"),
    pytest.param(STATIC_ON_FAILURE, [], [OK(A), F(B)], True, "Running", id="static-onfailure-T-rule5e"),
    # config.source "api" is not a static pod, so 5a applies.
    pytest.param(API_SOURCED_ALWAYS, [], [OK(A), F(B)], True, "Failed", id="api-source-not-static-T-rule5a"),
    # Rule 4 comes before rule 5a: a running container keeps the pod Running even with T.
    pytest.param(ALWAYS, [], [R(A), OK(B)], True, "Running", id="terminal-but-running-rule4"),
    # Rule 1: a failed plain init container under Never fails the pod, whatever else is true.
    pytest.param(NEVER_INIT, [terminated(X, 1)], [], False, "Failed", id="never-init-exit1-rule1"),
    pytest.param(NEVER_INIT, [terminated(X, 1)], [R(A), R(B)], False, "Failed", id="never-init-failed-first"),
    # ... but not under OnFailure: nothing pending, regular containers unknown -> rule 6.
    pytest.param(ON_FAILURE_INIT, [terminated(X, 1)], [], False, "Pending", id="onfailure-init-failed-rule6"),
    # Plain init container with no state counts as pending.
    pytest.param(ALWAYS_INIT, [no_state(X)], [], False, "Pending", id="init-no-state-pending"),
    # Regular container with no state counts as unknown: R + unknown -> rule 6.
    pytest.param(ALWAYS, [], [R(A), no_state(B)], False, "Pending", id="regular-no-state-unknown"),
    # Sidecar with no state: pending + unknown; with regulars running, unknown blocks rule 4.
    pytest.param(ALWAYS_SIDECAR, [no_state(X)], [R(A), R(B)], False, "Pending", id="sidecar-no-state"),
    # Sidecar waiting without history: waiting++ -> rule 3, even with regulars running.
    pytest.param(ALWAYS_SIDECAR, [W(X)], [R(A), R(B)], False, "Pending", id="sidecar-waiting-rule3"),
    # Sidecar missing entirely: unknown++ blocks rule 4.
    pytest.param(ALWAYS_SIDECAR, [], [R(A), R(B)], False, "Pending", id="sidecar-missing-unknown"),
    # HasAnyRegularContainerStarted looks only at the current state, not lastState: crash-looping
    # regulars do not waive an unstarted sidecar's pending count.
    pytest.param(
        ALWAYS_SIDECAR, [R(X)], [WL(A, 1), WL(B, 1)], False, "Pending", id="regular-started-ignores-laststate"
    ),
    # Crash loops count as stopped: all stopped under Always -> 5b.
    pytest.param(ALWAYS, [], [WL(A, 1), WL(B, 1)], False, "Running", id="always-all-crashlooping-rule5b"),
    # A crash-looping container is stopped but never succeeded, so stopped != succeeded -> 5d.
    pytest.param(NEVER, [], [OK(A), WL(B, 0)], False, "Failed", id="never-waiting-last-term-not-succeeded"),
]


@pytest.mark.parametrize(("pod", "init", "regular", "terminal", "expected"), POD_PHASE_EXTRA)
def test_pod_phase_extra_rules(
    pod: JSONDict,
    init: list[JSONDict] | None,
    regular: list[JSONDict] | None,
    terminal: bool,
    expected: str,
) -> None:
    assert _phase(pod, init, regular, terminal) == expected


# --------------------------------------------------------------------------------------------------
# ContainersReady (GenerateContainersReadyCondition).
# Case: (pod, init_statuses, statuses, phase, expected condition)
# --------------------------------------------------------------------------------------------------


def cr(status: str, reason: str = "", message: str = "") -> JSONDict:
    return cond("ContainersReady", status, reason, message)


TWO = make_pod(containers=("1234", "5678"))
ONE = make_pod(containers=("1234",))
EMPTY_SPEC = make_pod(containers=())
ONE_SIDECAR = make_pod(containers=("regular-1",), init_containers=(sidecar("restartable-init-1"),))
TWO_SIDECARS = make_pod(
    containers=("regular-1",),
    init_containers=(sidecar("restartable-init-1"), sidecar("restartable-init-2")),
)

TEST_GENERATE_CONTAINERS_READY_CONDITION: list[Any] = [
    pytest.param(
        EMPTY_SPEC, None, None, "Running", cr("False", "UnknownContainerStatuses"), id="statuses-null"
    ),
    pytest.param(EMPTY_SPEC, [], [], "Running", cr("True"), id="empty-statuses-no-containers"),
    pytest.param(
        ONE,
        [],
        [],
        "Running",
        cr("False", "ContainersNotReady", "containers with unknown status: [1234]"),
        id="one-container-no-status",
    ),
    pytest.param(
        TWO, [], [bare("1234", ready=True), bare("5678", ready=True)], "Running", cr("True"), id="all-ready"
    ),
    pytest.param(
        TWO,
        [],
        [bare("1234", ready=True)],
        "Running",
        cr("False", "ContainersNotReady", "containers with unknown status: [5678]"),
        id="one-missing",
    ),
    pytest.param(
        TWO,
        [],
        [bare("1234", ready=True), bare("5678")],
        "Running",
        cr("False", "ContainersNotReady", "containers with unready status: [5678]"),
        id="one-unready",
    ),
    pytest.param(ONE, [], [bare("1234")], "Succeeded", cr("False", "PodCompleted"), id="succeeded"),
    pytest.param(
        ONE_SIDECAR,
        [],
        [bare("regular-1", ready=True)],
        "Running",
        cr("False", "ContainersNotReady", "containers with unknown status: [restartable-init-1]"),
        id="sidecar-missing",
    ),
    pytest.param(
        TWO_SIDECARS,
        [bare("restartable-init-1", ready=True), bare("restartable-init-2", ready=True)],
        [bare("regular-1", ready=True)],
        "Running",
        cr("True"),
        id="sidecars-all-ready",
    ),
    pytest.param(
        TWO_SIDECARS,
        [bare("restartable-init-1", ready=True)],
        [bare("regular-1", ready=True)],
        "Running",
        cr("False", "ContainersNotReady", "containers with unknown status: [restartable-init-2]"),
        id="second-sidecar-missing",
    ),
    pytest.param(
        TWO_SIDECARS,
        [bare("restartable-init-1", ready=True), bare("restartable-init-2")],
        [bare("regular-1", ready=True)],
        "Running",
        cr("False", "ContainersNotReady", "containers with unready status: [restartable-init-2]"),
        id="second-sidecar-unready",
    ),
]


@pytest.mark.parametrize(
    ("pod", "init", "regular", "phase", "expected"), TEST_GENERATE_CONTAINERS_READY_CONDITION
)
def test_TestGenerateContainersReadyCondition(
    pod: JSONDict, init: list[JSONDict] | None, regular: list[JSONDict] | None, phase: str, expected: JSONDict
) -> None:
    assert status_mod.containers_ready_condition(pod, init, regular, phase) == expected


FOUR = make_pod(containers=("a", "b", "c", "d"))
SIDECAR_AND_REGULAR = make_pod(containers=("r",), init_containers=(sidecar("s"),))
PLAIN_INIT_AND_REGULAR = make_pod(containers=("regular-1",), init_containers=("init-1",))

CONTAINERS_READY_EXTRA: list[Any] = [
    # A Failed pod gives PodFailed, even when every container is ready ...
    pytest.param(
        TWO,
        [],
        [bare("1234", ready=True), bare("5678", ready=True)],
        "Failed",
        cr("False", "PodFailed"),
        id="failed-all-ready",
    ),
    # ... and even with unknown containers (unlike PodCompleted, PodFailed does not need "no unknown").
    pytest.param(TWO, [], [], "Failed", cr("False", "PodFailed"), id="failed-with-unknown"),
    # PodCompleted needs "no unknown": Succeeded with a missing container gives ContainersNotReady.
    pytest.param(
        TWO,
        [],
        [bare("1234", ready=True)],
        "Succeeded",
        cr("False", "ContainersNotReady", "containers with unknown status: [5678]"),
        id="succeeded-with-unknown",
    ),
    # Both message parts, several names space-separated, joined by ", ".
    pytest.param(
        FOUR,
        [],
        [bare("c"), bare("d", ready=True)],
        "Running",
        cr(
            "False",
            "ContainersNotReady",
            "containers with unknown status: [a b], containers with unready status: [c]",
        ),
        id="unknown-and-unready-joined",
    ),
    # Sidecars are walked before regular containers.
    pytest.param(
        SIDECAR_AND_REGULAR,
        [bare("s")],
        [bare("r")],
        "Running",
        cr("False", "ContainersNotReady", "containers with unready status: [s r]"),
        id="sidecars-listed-first",
    ),
    # Plain init containers are not part of ContainersReady.
    pytest.param(
        PLAIN_INIT_AND_REGULAR,
        [],
        [bare("regular-1", ready=True)],
        "Running",
        cr("True"),
        id="plain-init-ignored",
    ),
]


@pytest.mark.parametrize(("pod", "init", "regular", "phase", "expected"), CONTAINERS_READY_EXTRA)
def test_containers_ready_condition_extra_rules(
    pod: JSONDict, init: list[JSONDict] | None, regular: list[JSONDict] | None, phase: str, expected: JSONDict
) -> None:
    assert status_mod.containers_ready_condition(pod, init, regular, phase) == expected


# --------------------------------------------------------------------------------------------------
# Ready (GeneratePodReadyCondition).
# Case: (pod, conditions, init_statuses, statuses, phase, expected condition)
# --------------------------------------------------------------------------------------------------


def rd(status: str, reason: str = "", message: str = "") -> JSONDict:
    return cond("Ready", status, reason, message)


def gate(name: str, status: str) -> JSONDict:
    return {"type": name, "status": status}


GATE1 = make_pod(containers=(), readiness_gates=("gate1",))
GATE12 = make_pod(containers=(), readiness_gates=("gate1", "gate2"))
ONE_WITH_GATE1 = make_pod(containers=("1234",), readiness_gates=("gate1",))

GATE1_MISSING = 'corresponding condition of pod readiness gate "gate1" does not exist.'
GATE2_MISSING = 'corresponding condition of pod readiness gate "gate2" does not exist.'
GATE1_FALSE = 'the status of pod readiness gate "gate1" is not "True", but False'
GATE2_FALSE = 'the status of pod readiness gate "gate2" is not "True", but False'

TEST_GENERATE_POD_READY_CONDITION: list[Any] = [
    pytest.param(EMPTY_SPEC, [], None, None, "Running", rd("False", "UnknownContainerStatuses"), id="null"),
    pytest.param(EMPTY_SPEC, [], [], [], "Running", rd("True"), id="empty"),
    pytest.param(
        ONE,
        [],
        [],
        [],
        "Running",
        rd("False", "ContainersNotReady", "containers with unknown status: [1234]"),
        id="one-container-no-status",
    ),
    pytest.param(
        TWO,
        [],
        [],
        [bare("1234", ready=True), bare("5678", ready=True)],
        "Running",
        rd("True"),
        id="all-ready",
    ),
    pytest.param(
        TWO,
        [],
        [],
        [bare("1234", ready=True)],
        "Running",
        rd("False", "ContainersNotReady", "containers with unknown status: [5678]"),
        id="one-missing",
    ),
    pytest.param(
        TWO,
        [],
        [],
        [bare("1234", ready=True), bare("5678")],
        "Running",
        rd("False", "ContainersNotReady", "containers with unready status: [5678]"),
        id="one-unready",
    ),
    pytest.param(ONE, [], [], [bare("1234")], "Succeeded", rd("False", "PodCompleted"), id="succeeded"),
    pytest.param(
        GATE1, [], [], [], "Running", rd("False", "ReadinessGatesNotReady", GATE1_MISSING), id="gate1-missing"
    ),
    pytest.param(
        GATE1,
        [gate("gate1", "False")],
        [],
        [],
        "Running",
        rd("False", "ReadinessGatesNotReady", GATE1_FALSE),
        id="gate1-false",
    ),
    pytest.param(GATE1, [gate("gate1", "True")], [], [], "Running", rd("True"), id="gate1-true"),
    pytest.param(
        GATE12,
        [gate("gate1", "True")],
        [],
        [],
        "Running",
        rd("False", "ReadinessGatesNotReady", GATE2_MISSING),
        id="gate1-true-gate2-missing",
    ),
    pytest.param(
        GATE12,
        [gate("gate1", "True"), gate("gate2", "False")],
        [],
        [],
        "Running",
        rd("False", "ReadinessGatesNotReady", GATE2_FALSE),
        id="gate1-true-gate2-false",
    ),
    pytest.param(
        GATE12,
        [gate("gate1", "True"), gate("gate2", "True")],
        [],
        [],
        "Running",
        rd("True"),
        id="both-gates-true",
    ),
    pytest.param(
        ONE_WITH_GATE1,
        [gate("gate1", "True")],
        [],
        [bare("1234")],
        "Running",
        rd("False", "ContainersNotReady", "containers with unready status: [1234]"),
        id="gate-true-container-unready",
    ),
]


@pytest.mark.parametrize(
    ("pod", "conditions", "init", "regular", "phase", "expected"), TEST_GENERATE_POD_READY_CONDITION
)
def test_TestGeneratePodReadyCondition(
    pod: JSONDict,
    conditions: list[JSONDict],
    init: list[JSONDict] | None,
    regular: list[JSONDict] | None,
    phase: str,
    expected: JSONDict,
) -> None:
    assert status_mod.ready_condition(pod, conditions, init, regular, phase) == expected


POD_READY_EXTRA: list[Any] = [
    # Gate messages are joined by ", ".
    pytest.param(
        GATE12,
        [gate("gate2", "False")],
        [],
        [],
        "Running",
        rd("False", "ReadinessGatesNotReady", f"{GATE1_MISSING}, {GATE2_FALSE}"),
        id="two-gate-messages-joined",
    ),
    # The gate's status is printed as-is.
    pytest.param(
        GATE1,
        [gate("gate1", "Unknown")],
        [],
        [],
        "Running",
        rd(
            "False",
            "ReadinessGatesNotReady",
            'the status of pod readiness gate "gate1" is not "True", but Unknown',
        ),
        id="gate-unknown-status",
    ),
    # Ready copies ContainersReady's PodFailed.
    pytest.param(
        TWO,
        [],
        [],
        [bare("1234", ready=True), bare("5678", ready=True)],
        "Failed",
        rd("False", "PodFailed"),
        id="failed",
    ),
    # Ready copies ContainersReady when it is not True, before looking at any gate.
    pytest.param(
        ONE_WITH_GATE1,
        [],
        [],
        [bare("1234")],
        "Running",
        rd("False", "ContainersNotReady", "containers with unready status: [1234]"),
        id="containers-not-ready-wins-over-missing-gate",
    ),
]


@pytest.mark.parametrize(("pod", "conditions", "init", "regular", "phase", "expected"), POD_READY_EXTRA)
def test_pod_ready_condition_extra_rules(
    pod: JSONDict,
    conditions: list[JSONDict],
    init: list[JSONDict] | None,
    regular: list[JSONDict] | None,
    phase: str,
    expected: JSONDict,
) -> None:
    assert status_mod.ready_condition(pod, conditions, init, regular, phase) == expected


# --------------------------------------------------------------------------------------------------
# Initialized (GeneratePodInitializedCondition).
# Case: (pod, init_statuses, statuses, phase, expected condition)
# --------------------------------------------------------------------------------------------------


def ini(status: str, reason: str = "", message: str = "") -> JSONDict:
    return cond("Initialized", status, reason, message)


NO_INIT = make_pod(containers=("regular",))
ONE_INIT = make_pod(containers=("regular",), init_containers=("1234",))
TWO_INIT = make_pod(containers=("regular",), init_containers=("1234", "5678"))
ONE_SIDECAR_INIT = make_pod(containers=("regular",), init_containers=(sidecar("1234"),))

TEST_GENERATE_POD_INITIALIZED_CONDITION: list[Any] = [
    pytest.param(
        TWO_INIT, None, None, "Running", ini("False", "UnknownContainerStatuses"), id="two-init-null"
    ),
    pytest.param(NO_INIT, [], [], "Running", ini("True"), id="no-init-empty"),
    pytest.param(
        ONE_INIT,
        [],
        [],
        "Running",
        ini("False", "ContainersNotInitialized", "containers with unknown status: [1234]"),
        id="one-init-empty",
    ),
    pytest.param(
        TWO_INIT,
        [bare("1234", ready=True), bare("5678", ready=True)],
        [],
        "Running",
        ini("True"),
        id="all-ready",
    ),
    pytest.param(
        TWO_INIT,
        [bare("1234", ready=True)],
        [],
        "Running",
        ini("False", "ContainersNotInitialized", "containers with unknown status: [5678]"),
        id="one-missing",
    ),
    pytest.param(
        TWO_INIT,
        [bare("1234", ready=True), bare("5678")],
        [],
        "Running",
        ini("False", "ContainersNotInitialized", "containers with incomplete status: [5678]"),
        id="one-not-ready",
    ),
    pytest.param(
        ONE_INIT, [bare("1234", ready=True)], [], "Succeeded", ini("True", "PodCompleted"), id="succeeded"
    ),
    pytest.param(
        ONE_SIDECAR_INIT,
        [bare("1234", started=False)],
        [],
        "Pending",
        ini("False", "ContainersNotInitialized", "containers with incomplete status: [1234]"),
        id="sidecar-not-started",
    ),
    pytest.param(
        ONE_SIDECAR_INIT, [bare("1234", started=True)], [], "Running", ini("True"), id="sidecar-started"
    ),
    pytest.param(
        ONE_SIDECAR_INIT,
        [bare("1234", started=False)],
        [running("regular")],
        "Running",
        ini("True"),
        id="sidecar-not-started-regular-running",
    ),
    pytest.param(
        ONE_INIT,
        [waiting("1234")],
        [terminated("regular", 0)],
        "Running",
        ini("True"),
        id="init-waiting-regular-terminated",
    ),
]


@pytest.mark.parametrize(
    ("pod", "init", "regular", "phase", "expected"), TEST_GENERATE_POD_INITIALIZED_CONDITION
)
def test_TestGeneratePodInitializedCondition(
    pod: JSONDict, init: list[JSONDict] | None, regular: list[JSONDict] | None, phase: str, expected: JSONDict
) -> None:
    assert status_mod.initialized_condition(pod, init, regular, phase) == expected


INITIALIZED_EXTRA: list[Any] = [
    # UnknownContainerStatuses needs init containers: with none, null statuses are simply True.
    pytest.param(NO_INIT, None, None, "Running", ini("True"), id="no-init-null"),
    # Both message parts joined by ", ".
    pytest.param(
        TWO_INIT,
        [bare("5678")],
        [],
        "Running",
        ini(
            "False",
            "ContainersNotInitialized",
            "containers with unknown status: [1234], containers with incomplete status: [5678]",
        ),
        id="unknown-and-incomplete-joined",
    ),
    # Several incomplete names, space-separated, in spec order.
    pytest.param(
        TWO_INIT,
        [bare("1234"), bare("5678")],
        [],
        "Pending",
        ini("False", "ContainersNotInitialized", "containers with incomplete status: [1234 5678]"),
        id="two-incomplete",
    ),
    # PodCompleted needs "no unknown": Succeeded with a missing init status is not PodCompleted.
    pytest.param(
        ONE_INIT,
        [],
        [],
        "Succeeded",
        ini("False", "ContainersNotInitialized", "containers with unknown status: [1234]"),
        id="succeeded-with-unknown",
    ),
    # A sidecar is judged by `started`, not `ready`; a missing `started` is not started.
    pytest.param(
        ONE_SIDECAR_INIT,
        [bare("1234", ready=True)],
        [],
        "Pending",
        ini("False", "ContainersNotInitialized", "containers with incomplete status: [1234]"),
        id="sidecar-ready-but-started-unset",
    ),
    # A plain init container is judged by `ready`, not `started`.
    pytest.param(
        ONE_INIT,
        [bare("1234", started=True)],
        [],
        "Pending",
        ini("False", "ContainersNotInitialized", "containers with incomplete status: [1234]"),
        id="plain-init-started-but-not-ready",
    ),
    # "A regular container has started" looks at the current state only, not lastState.
    pytest.param(
        ONE_INIT,
        [waiting("1234")],
        [waiting("regular", last_exit=1)],
        "Running",
        ini("False", "ContainersNotInitialized", "containers with incomplete status: [1234]"),
        id="regular-crashlooping-is-not-started",
    ),
]


@pytest.mark.parametrize(("pod", "init", "regular", "phase", "expected"), INITIALIZED_EXTRA)
def test_initialized_condition_extra_rules(
    pod: JSONDict, init: list[JSONDict] | None, regular: list[JSONDict] | None, phase: str, expected: JSONDict
) -> None:
    assert status_mod.initialized_condition(pod, init, regular, phase) == expected
