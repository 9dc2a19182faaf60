"""A real Prometheus (the Debian package, which `make test` installs) scrapes `podledger metrics`
every second; its query API then answers with kube-state-metrics' series and podledger's counters,
including an OOMKill that came and went between two scrapes."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from podledger import local
from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from podledger.types import JSONDict
from tests import pods
from tests.support import wait_for
from tests.support.kafka import publish_versions
from tests.support.metrics import http_get
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka


class Prometheus:
    """A Prometheus server on a loopback port, scraping one target every second."""

    def __init__(self, tmp_path: Path, target_port: int) -> None:
        binary = shutil.which("prometheus")
        assert binary, "prometheus is needed (make test installs Debian's package)"
        self.port = local.free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            json.dumps(  # JSON is valid YAML
                {
                    "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                    "scrape_configs": [
                        {
                            "job_name": "podledger-metrics",
                            "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}],
                        }
                    ],
                }
            )
        )
        self.log_path = tmp_path / "prometheus.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def query(self, promql: str) -> list[JSONDict]:
        """The instant vector `promql` evaluates to now (the API's data.result)."""
        code, body = http_get(self.port, "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert code == 200, body
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def value(self, promql: str) -> float | None:
        """The one value `promql` evaluates to now; None while it has none."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@pytest.fixture
def prometheus_for(tmp_path: Path) -> Iterator:
    started: list[Prometheus] = []

    def start(target_port: int) -> Prometheus:
        started.append(Prometheus(tmp_path, target_port))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def test_prometheus_scrapes_podledger_metrics(settings: Settings, podledger_process, prometheus_for) -> None:
    asyncio.run(ensure_topics(settings))
    node = settings.node
    web = pods.pod(("main",), name="web", namespace="shop", uid=f"web-{uuid.uuid4().hex[:8]}")
    uid = web["metadata"]["uid"]
    asyncio.run(publish_versions(settings, pods.versioned(web, node, 1, pods.oom_status())))
    port = local.free_port()
    metrics = podledger_process(["metrics", "--port", str(port)], env=podledger_env(settings))
    wait_for(
        lambda: http_get(port, "/healthz")[0] == 200, timeout=60, what="metrics caught up", alive=metrics
    )

    prometheus = prometheus_for(port)
    oom_kills = f'podledger_pod_container_terminations_total{{uid="{uid}",reason="OOMKilled"}}'
    wait_for(
        lambda: prometheus.value(f'kube_pod_status_phase{{uid="{uid}",phase="Running"}}') == 1,
        timeout=60,
        what="Prometheus to scrape web's phase",
        alive=metrics,
    )
    assert prometheus.value('up{job="podledger-metrics"}') == 1
    assert prometheus.value(oom_kills) == 0
    phases = prometheus.query(f'kube_pod_status_phase{{uid="{uid}"}}')
    assert {r["metric"]["phase"]: r["value"][1] for r in phases} == {
        "Pending": "0",
        "Succeeded": "0",
        "Failed": "0",
        "Unknown": "0",
        "Running": "1",
    }
    assert {r["metric"]["namespace"] for r in phases} == {"shop"}

    # The container is OOM-killed and running again between two scrapes.
    asyncio.run(
        publish_versions(
            settings,
            pods.versioned(web, node, 2, pods.oom_status(oom="now")),
            pods.versioned(web, node, 3, pods.oom_status(restarts=1, cid="process://second", oom="last")),
        )
    )
    wait_for(
        lambda: prometheus.value(oom_kills) == 1, timeout=60, what="the OOM kill in Prometheus", alive=metrics
    )
    assert prometheus.value(f"increase({oom_kills}[1m])") > 0
    assert prometheus.value(f'kube_pod_container_status_restarts_total{{uid="{uid}"}}') == 1
