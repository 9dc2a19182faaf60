"""`podledger metrics` on the real broker: versions published as the fold writes them are scraped
from the running command, read back with the Prometheus client's parser.

It checks what a scrape-based exporter cannot do: an OOMKill that comes and goes between two
scrapes is counted, duplicate deliveries count nothing twice, a removed pod's series go, and a
restarted command rebuilds the same counters from pod-status-history.
"""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest

from podledger import local
from podledger.config import Settings
from podledger.schemas import models
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict
from tests import pods
from tests.support import wait_for
from tests.support.kafka import publish_versions
from tests.support.metrics import PromSamples, http_get, prometheus_samples, sample_value
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

TERMINATIONS = "podledger_pod_container_terminations_total"


def scrape(port: int) -> PromSamples:
    code, body = http_get(port, "/metrics")
    assert code == 200, body
    return prometheus_samples(body)


def start_metrics(settings: Settings, podledger_process, port: int):
    proc = podledger_process(
        ["metrics", "--port", str(port)],
        env=podledger_env(settings, PODLEDGER_METRICS_REMOVED_KEEP_S="3", PODLEDGER_LOG_LEVEL="info"),
    )
    wait_for(lambda: http_get(port, "/healthz")[0] == 200, timeout=60, what="metrics caught up", alive=proc)
    return proc


def test_metrics_from_the_stream_live_and_after_a_restart(settings: Settings, podledger_process) -> None:
    asyncio.run(ensure_topics(settings))
    node = settings.node
    web = pods.pod(("main",), name="web", namespace="shop", uid=f"web-{uuid.uuid4().hex[:8]}")
    api = pods.pod(("main",), name="api", namespace="shop", uid=f"api-{uuid.uuid4().hex[:8]}")
    gone = pods.pod(("main",), name="gone", namespace="shop", uid=f"gone-{uuid.uuid4().hex[:8]}")
    uid = {p["metadata"]["name"]: p["metadata"]["uid"] for p in (web, api, gone)}

    def v(pod: JSONDict, version: int, s: JSONDict) -> models.VersionedPodStatus:
        return pods.versioned(pod, node, version, s)

    # Before the command starts: api crashed once (pods.OOM_KILLED), web runs, gone was removed.
    asyncio.run(
        publish_versions(
            settings,
            v(api, 1, pods.oom_status()),
            v(api, 2, pods.oom_status(oom="now", ready=False)),
            v(api, 3, pods.oom_status(restarts=1, cid="process://second", oom="last")),
            v(web, 1, pods.oom_status(ready=False)),
            v(web, 2, pods.oom_status()),
            v(gone, 1, pods.oom_status()),
            removed=((uid["gone"], node),),
        )
    )
    port = local.free_port()
    proc = start_metrics(settings, podledger_process, port)
    first = scrape(port)
    assert sample_value(first, "kube_pod_status_phase", uid=uid["web"], phase="Running") == 1
    assert sample_value(first, "kube_pod_status_ready", uid=uid["web"], condition="true") == 1
    assert sample_value(first, "kube_pod_info", uid=uid["web"], node=node) == 1
    assert sample_value(first, "kube_pod_container_status_restarts_total", uid=uid["api"]) == 1
    assert sample_value(first, TERMINATIONS, uid=uid["api"], reason="OOMKilled") == 1
    assert sample_value(first, TERMINATIONS, uid=uid["web"], reason="OOMKilled") == 0
    assert sample_value(first, "podledger_pod_ready_transitions_total", uid=uid["web"], to="true") == 1
    assert not [key for key in first if ("uid", uid["gone"]) in key[1]], "a removed pod is on the page"

    # Live: web is OOM-killed and restarted between two scrapes, each version delivered twice,
    # then flaps Ready.
    oom_and_back = [
        v(web, 3, pods.oom_status(oom="now", ready=False)),
        v(web, 4, pods.oom_status(restarts=1, cid="process://second", oom="last")),
    ]
    flap = [
        v(web, 5, pods.oom_status(restarts=1, cid="process://second", oom="last", ready=False)),
        v(web, 6, pods.oom_status(restarts=1, cid="process://second", oom="last")),
    ]
    asyncio.run(publish_versions(settings, *oom_and_back, *oom_and_back, *flap, flap[0]))

    def web_caught_up() -> PromSamples | None:
        page = scrape(port)
        transitions = sample_value(page, "podledger_pod_ready_transitions_total", uid=uid["web"], to="true")
        return page if transitions == 3 else None  # v1 false, then true, false (OOM), true, false, true

    second = wait_for(web_caught_up, timeout=30, what="web's new versions on the page", alive=proc)
    assert sample_value(second, TERMINATIONS, uid=uid["web"], reason="OOMKilled") == 1
    assert sample_value(second, "podledger_pod_ready_transitions_total", uid=uid["web"], to="false") == 2
    assert sample_value(second, "kube_pod_container_status_restarts_total", uid=uid["web"]) == 1
    assert sample_value(second, "kube_pod_container_status_terminated_reason", uid=uid["web"]) is None
    assert sample_value(second, "kube_pod_container_status_last_terminated_reason", uid=uid["web"]) == 1

    # A restart rebuilds the same page from the topics.
    assert proc.stop(signal.SIGTERM) == 0, proc.output()
    proc = start_metrics(settings, podledger_process, port)
    assert scrape(port) == second

    # Removal: web's gauges go at once, its counters after PODLEDGER_METRICS_REMOVED_KEEP_S.
    asyncio.run(publish_versions(settings, removed=((uid["web"], node),)))

    def web_gauges_gone() -> PromSamples | None:
        page = scrape(port)
        return page if sample_value(page, "kube_pod_info", uid=uid["web"]) is None else None

    removed = wait_for(
        web_gauges_gone,
        timeout=30,
        what="web's gauges gone",
        alive=proc,
    )
    assert sample_value(removed, TERMINATIONS, uid=uid["web"], reason="OOMKilled") == 1
    wait_for(
        lambda: sample_value(scrape(port), TERMINATIONS, uid=uid["web"], reason="OOMKilled") is None,
        timeout=30,
        what="web's counters gone",
        alive=proc,
    )
    assert sample_value(scrape(port), "kube_pod_status_phase", uid=uid["api"], phase="Running") == 1
    assert proc.stop(signal.SIGTERM) == 0, proc.output()
