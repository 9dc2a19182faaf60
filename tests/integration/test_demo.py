"""`podledger demo` on the broker and apiserver the user names, with clear output, stopping cleanly
on SIGTERM and on Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from podledger.local import alive
from tests.support import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.kube]


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_demo_uses_the_given_broker_and_cluster_and_stops_cleanly(
    kafka_bootstrap: str,
    kubeconfig: str,
    topic_prefix: str,
    node_name: str,
    podledger_process,
    stop_signal: int,
) -> None:
    proc = podledger_process(
        ["demo"],
        env={
            "PODLEDGER_BOOTSTRAP": kafka_bootstrap,
            "KUBECONFIG": kubeconfig,
            "PODLEDGER_TOPIC_PREFIX": topic_prefix,
            "PODLEDGER_NODE": node_name,
            "PODLEDGER_PARTITIONS": "2",
        },
    )
    pod_name = f"hello-{node_name}"
    line = wait_for(
        lambda: next((ln for ln in proc.output().splitlines() if f"default/{pod_name}  v1" in ln), None),
        timeout=120,
        what="the demo to print version 1 of its example pod",
        alive=proc,
    )
    assert "Pending" in line and "PodScheduled=True" in line and "pod-updates:ADD" in line
    out = proc.output()
    # It says what runs where, and how to stop it; it started nothing of its own.
    assert f"Kafka:       {kafka_bootstrap}" in out and f"KUBECONFIG={kubeconfig}" in out
    assert f"topics: {topic_prefix}*" in out and "Ctrl-C" in out
    assert "starting a local" not in out
    # The static pods run as local processes: the init container first, then the web server.
    running = wait_for(
        lambda: next(
            (ln for ln in proc.output().splitlines() if f"default/{pod_name} " in ln and "web=running" in ln),
            None,
        ),
        timeout=60,
        what="the example web server running",
        alive=proc,
    )
    assert "setup=terminated:Completed(0)" in running and "Running" in running
    # Flipping the probed pod's readiness shows the probe result and the Ready condition following it.
    flip = f"default/flip-{node_name} "

    def flip_line(*needles: str) -> Any:
        lines = [ln for ln in proc.output().splitlines() if flip in ln and all(n in ln for n in needles)]
        return lines[-1] if lines else None

    wait_for(lambda: flip_line("Ready=True"), timeout=60, what="the flip pod Ready", alive=proc)
    urllib.request.urlopen("http://127.0.0.1:18081/toggle", timeout=5).read()
    line = wait_for(
        lambda: flip_line("probe-results:readiness=Failure"), timeout=30, what="readiness Failure", alive=proc
    )
    assert "Ready=False" in line and "app=running,not-ready" in line
    runtime_dir = Path(re.search(r"logs under (\S+)", out).group(1))  # type: ignore[union-attr]
    pids = [
        c["pid"]
        for pod in json.loads((runtime_dir / "state.json").read_text()).values()
        for c in pod["containers"]
        if c["state"] == "running" and c["name"] == "web"
    ]
    assert pids and all(alive(pid) for pid in pids)

    assert proc.stop(stop_signal) == 0, proc.output()
    assert "Traceback" not in proc.output()
    assert proc.output().rstrip().endswith("podledger demo: stopped")
    assert not any(alive(pid) for pid in pids)  # the demo's containers stopped with it
