"""The pod metrics state machine (read/metrics/pods.py): counters from every version, once each.

Vectors: a crash-looping container, an OOMKill between two scrapes, Ready flapping, duplicate
delivery, removal, and pod-status (which skips versions) beside pod-status-history. Every page is
read back with the Prometheus client's own parser.
"""

from __future__ import annotations

import asyncio
import copy

import pytest

from podledger.read.metrics.pods import PodMetrics
from podledger.schemas import models
from podledger.types import JSONDict
from tests import pods
from tests.support.metrics import PromSamples, prometheus_samples, sample_value

POD = pods.pod(("main",), name="web", namespace="shop", uid="uid-web")
NODE = "node-a"
T0 = "2026-01-01T00:00:00Z"

TERMINATIONS = "podledger_pod_container_terminations_total"
READY_TRANSITIONS = "podledger_pod_ready_transitions_total"
WAITS = "podledger_pod_container_waits_total"


# ------------------------------------------------------------------ statuses of the one container


def running(cid: str, restarts: int = 0, last: JSONDict | None = None, ready: bool = True) -> JSONDict:
    status = pods.running_status(ready="True" if ready else "False")
    main = status["containerStatuses"][0]
    main.update(containerID=cid, restartCount=restarts, lastState={"terminated": last} if last else {})
    main["state"] = {"running": {"startedAt": T0}}
    return status


def terminated(term: JSONDict, restarts: int = 0, last: JSONDict | None = None) -> JSONDict:
    status = running(term.get("containerID", ""), restarts, last, ready=False)
    status["containerStatuses"][0]["state"] = {"terminated": term}
    return status


def waiting(reason: str, restarts: int, last: JSONDict | None) -> JSONDict:
    status = running("", restarts, last, ready=False)
    status["containerStatuses"][0]["state"] = {"waiting": {"reason": reason}}
    return status


def termination(cid: str, reason: str, exit_code: int, finished: str) -> JSONDict:
    return {
        "exitCode": exit_code,
        "reason": reason,
        "startedAt": T0,
        "finishedAt": finished,
        "containerID": cid,
    }


def versions(*statuses: JSONDict, pod: JSONDict = POD) -> list[models.VersionedPodStatus]:
    return [pods.versioned(pod, NODE, n, copy.deepcopy(s)) for n, s in enumerate(statuses, start=1)]


def scrape(metrics: PodMetrics) -> PromSamples:
    return prometheus_samples(metrics.render())


def fed(*history: models.VersionedPodStatus) -> PodMetrics:
    metrics = PodMetrics()
    for vs in history:
        metrics.apply(vs)
    return metrics


# ------------------------------------------------------------------ vectors

OOM = termination("process://a", "OOMKilled", 137, "2026-01-01T00:01:00Z")
ERROR_A = termination("process://a", "Error", 1, "2026-01-01T00:01:00Z")
ERROR_B = termination("process://b", "Error", 1, "2026-01-01T00:02:00Z")


def test_a_crash_looping_container_counts_each_crash_and_each_back_off_once() -> None:
    history = versions(
        running("process://a"),
        terminated(ERROR_A),
        waiting("CrashLoopBackOff", 1, ERROR_A),
        running("process://b", 1, ERROR_A),
        terminated(ERROR_B, 1, ERROR_A),
        waiting("CrashLoopBackOff", 2, ERROR_B),
        waiting("CrashLoopBackOff", 2, ERROR_B),  # a later version repeating the same state
    )
    page = scrape(fed(*history))
    assert sample_value(page, TERMINATIONS, container="main", reason="Error") == 2
    assert sample_value(page, TERMINATIONS, container="main", reason="OOMKilled") == 0
    assert sample_value(page, WAITS, container="main", reason="CrashLoopBackOff") == 2
    # kube-state-metrics' view of the same pod: only the current state.
    assert sample_value(page, "kube_pod_container_status_restarts_total", container="main") == 2
    assert sample_value(page, "kube_pod_container_status_waiting_reason", reason="CrashLoopBackOff") == 1
    assert sample_value(page, "kube_pod_container_status_last_terminated_reason", reason="Error") == 1
    assert sample_value(page, "kube_pod_container_status_last_terminated_exitcode", container="main") == 1
    assert sample_value(page, "kube_pod_container_status_terminated_reason") is None


def test_an_oom_kill_between_two_scrapes_is_counted_though_no_scrape_saw_it_terminated() -> None:
    first, oom, restarted = versions(running("process://a"), terminated(OOM), running("process://b", 1, OOM))
    metrics = fed(first)
    before = scrape(metrics)
    metrics.apply(oom)
    metrics.apply(restarted)
    after = scrape(metrics)
    assert sample_value(before, TERMINATIONS, reason="OOMKilled") == 0  # the series exists before, at 0
    assert sample_value(after, TERMINATIONS, reason="OOMKilled") == 1
    # Neither scrape saw the container terminated: kube-state-metrics' gauge shows nothing.
    for page in (before, after):
        assert sample_value(page, "kube_pod_container_status_terminated_reason") is None
        assert sample_value(page, "kube_pod_container_status_running", container="main") == 1


def test_two_oom_kills_between_scrapes_count_two() -> None:
    oom_b = termination("process://b", "OOMKilled", 137, "2026-01-01T00:02:00Z")
    history = versions(
        running("process://a"),
        terminated(OOM),
        running("process://b", 1, OOM),
        terminated(oom_b, 1, OOM),
        running("process://c", 2, oom_b),
    )
    page = scrape(fed(*history))
    assert sample_value(page, TERMINATIONS, reason="OOMKilled") == 2
    assert sample_value(page, "kube_pod_container_status_last_terminated_reason", reason="OOMKilled") == 1


def test_ready_flapping_counts_every_transition() -> None:
    flaps = [False, True, False, True, False, True]
    metrics = fed(*versions(*(running("process://a", ready=r) for r in flaps)))
    page = scrape(metrics)
    assert sample_value(page, READY_TRANSITIONS, to="true") == 3
    assert sample_value(page, READY_TRANSITIONS, to="false") == 2
    assert sample_value(page, "kube_pod_status_ready", condition="true") == 1
    assert sample_value(page, "kube_pod_status_ready", condition="false") == 0


def test_the_first_ready_status_is_no_transition() -> None:
    page = scrape(fed(*versions(running("process://a", ready=True))))
    assert sample_value(page, READY_TRANSITIONS, to="true") == 0
    assert sample_value(page, READY_TRANSITIONS, to="false") == 0


def test_duplicate_and_late_deliveries_count_nothing_twice() -> None:
    history = versions(
        running("process://a"),
        terminated(OOM),
        running("process://b", 1, OOM),
        running("process://b", 1, OOM, ready=False),
    )
    once = fed(*history)
    delivered = [history[0], history[1], history[1], history[0], history[2], history[2], history[3]]
    twice = PodMetrics()
    applied = [twice.apply(vs) for vs in delivered + history]
    assert applied == [True, True, False, False, True, False, True] + [False] * 4
    assert twice.render() == once.render()
    assert sample_value(scrape(twice), TERMINATIONS, reason="OOMKilled") == 1


def test_a_termination_repeated_as_last_state_is_one_termination() -> None:
    gone = {"exitCode": 137, "reason": "ContainerStatusUnknown", "message": "gone"}  # no ID, no times
    history = versions(
        running("process://a"),
        waiting("ContainerCreating", 1, gone),
        waiting("ContainerCreating", 1, gone),
        running("process://b", 1, gone),
        running("process://b", 1, gone, ready=False),
    )
    page = scrape(fed(*history))
    assert sample_value(page, TERMINATIONS, reason="ContainerStatusUnknown") == 1
    assert sample_value(page, WAITS, reason="ContainerCreating") == 1


def test_a_removed_pod_loses_its_gauges_at_once_and_its_counters_after_the_keep_time() -> None:
    history = versions(running("process://a"), terminated(OOM), running("process://b", 1, OOM))
    metrics = PodMetrics(removed_keep_s=60)
    for vs in history:
        metrics.apply(vs)
    metrics.remove("uid-web", now_s=1000)
    page = scrape(metrics)
    assert sample_value(page, "kube_pod_status_phase", phase="Running") is None
    assert sample_value(page, "kube_pod_info") is None
    assert sample_value(page, TERMINATIONS, reason="OOMKilled") == 1  # still there for the next scrape
    # Late history of the removed pod changes nothing.
    late = versions(running("process://a"), terminated(OOM), running("process://b", 1, OOM), terminated(OOM))
    assert not metrics.apply(late[3])
    metrics.expire(now_s=1059)
    assert sample_value(scrape(metrics), TERMINATIONS, reason="OOMKilled") == 1
    metrics.expire(now_s=1060)
    assert metrics.render() == ""


def test_with_no_keep_time_a_removed_pod_disappears_whole() -> None:
    metrics = PodMetrics(removed_keep_s=0)
    metrics.apply(versions(running("process://a"))[0])
    metrics.remove("uid-web", now_s=5)
    assert metrics.render() == ""


def test_a_static_pod_put_back_under_the_same_uid_starts_again() -> None:
    metrics = fed(*versions(running("process://a"), terminated(OOM)))
    metrics.remove("uid-web", now_s=0)
    again = versions(running("process://z"))[0]
    metrics.observe(again)  # pod-status says it exists again: versions restart at 1
    assert metrics.apply(again)
    page = scrape(metrics)
    assert sample_value(page, "kube_pod_status_phase", phase="Running") == 1
    assert sample_value(page, TERMINATIONS, reason="OOMKilled") == 0


def test_pod_status_sets_the_gauges_but_never_counts() -> None:
    history = versions(running("process://a"), terminated(OOM), running("process://b", 1, OOM, ready=False))
    metrics = PodMetrics()
    metrics.observe(history[2])  # pod-status: only the latest version
    page = scrape(metrics)
    assert sample_value(page, "kube_pod_container_status_restarts_total") == 1
    assert sample_value(page, TERMINATIONS, reason="OOMKilled") == 0
    for vs in history:  # history arrives later: counted, and the gauges stay on the newest version
        metrics.apply(vs)
    page = scrape(metrics)
    assert sample_value(page, TERMINATIONS, reason="OOMKilled") == 1
    assert sample_value(page, "kube_pod_status_ready", condition="false") == 1
    metrics.observe(history[0])  # an older pod-status value never rewinds the gauges
    assert sample_value(scrape(metrics), "kube_pod_status_ready", condition="false") == 1


def test_init_containers_are_counted_by_name() -> None:
    status = running("process://a")
    init_done = termination("process://i", "Completed", 0, "2026-01-01T00:00:30Z")
    status["initContainerStatuses"] = [
        {
            "name": "setup",
            "state": {"terminated": init_done},
            "lastState": {},
            "ready": True,
            "restartCount": 0,
            "image": "setup:1",
            "imageID": "",
            "containerID": "process://i",
        }
    ]
    page = scrape(fed(*versions(status, status)))
    assert sample_value(page, TERMINATIONS, container="setup", reason="Completed") == 1
    assert sample_value(page, "kube_pod_init_container_status_terminated_reason", reason="Completed") == 1
    assert sample_value(page, "kube_pod_init_container_status_restarts_total", container="setup") == 0


@pytest.mark.parametrize("reason", ["OOMKilled", "Error", "Completed"])
def test_common_termination_reasons_start_at_zero(reason: str) -> None:
    page = scrape(fed(*versions(running("process://a"))))
    assert sample_value(page, TERMINATIONS, container="main", reason=reason) == 0


def test_the_endpoint_answers_503_until_caught_up_then_the_page() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from podledger.config import Settings
    from podledger.read.metrics.server import PodMetricsFeed, make_app

    async def scenario() -> list[tuple[int, str, str]]:
        feed = PodMetricsFeed(Settings.from_env(env={}, node="n"), fed(*versions(running("process://a"))))
        answers = []
        async with TestClient(TestServer(make_app(feed))) as client:
            for ready in (False, True):
                feed.ready = ready
                for path in ("/healthz", "/metrics"):
                    response = await client.get(path)
                    answers.append((response.status, response.headers["Content-Type"], await response.text()))
        return answers

    (h1, m1, h2, m2) = asyncio.run(scenario())
    assert (h1[0], m1[0], h2[0], m2[0]) == (503, 503, 200, 200)
    assert m2[1] == "text/plain; version=0.0.4; charset=utf-8"
    assert sample_value(prometheus_samples(m2[2]), "kube_pod_status_phase", phase="Running") == 1
