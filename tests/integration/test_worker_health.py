"""A fold worker whose broker refuses its writes neither drops them nor dies: it reports itself
unhealthy on /healthz, keeps resending, and folds everything once the broker takes writes again.

The refusal is real: `pod-status-history` is reconfigured on the broker to accept no record the
size of a version (max.message.bytes), so every version write is answered MESSAGE_TOO_LARGE.
The operator then takes the setting back."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from podledger import local
from podledger.config import Settings
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import produce, workload
from tests.support import wait_for
from tests.support.history import assert_versions_have_no_gaps, history_by_version
from tests.support.kafka import accept_writes, read_records, read_topic, refuse_writes, wait_for_topic
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

PODS, EVENTS = 10, 200


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_fold_worker_that_cannot_deliver_turns_unhealthy_and_catches_up(
    settings: Settings, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    port = local.free_port()
    events = list(workload(PODS, EVENTS, nodes=1, seed=5))
    first, rest = events[: EVENTS // 2], events[EVENTS // 2 :]
    proc = podledger_process(
        ["run", "--roles", "fold"], env=podledger_env(settings, None, PODLEDGER_HEALTH_PORT=str(port))
    )
    wait_for(lambda: get(port, "/healthz") == (200, "ok\n"), timeout=60, what="a healthy worker", alive=proc)
    asyncio.run(produce(settings, first))
    wait_for(
        lambda: len(asyncio.run(read_topic(settings, "journal", EVENTS // 2, idle=0.5))) >= EVENTS // 2,
        timeout=120,
        what="the first half folded",
        alive=proc,
    )
    before = len(asyncio.run(read_records(settings, "pod-status-history")))

    asyncio.run(refuse_writes(settings, Topic.POD_STATUS_HISTORY))
    asyncio.run(produce(settings, rest))
    _, body = wait_for(
        lambda: (answer := get(port, "/healthz/kafka"))[0] == 500 and answer,
        timeout=120,
        what="/healthz/kafka to fail",
        alive=proc,
    )
    assert "kafka delivery failing" in body and "MessageSizeTooLarge" in body
    assert get(port, "/healthz")[0] == 500
    assert len(asyncio.run(read_records(settings, "pod-status-history"))) == before

    asyncio.run(accept_writes(settings, Topic.POD_STATUS_HISTORY))  # the operator's repair
    wait_for(lambda: get(port, "/healthz") == (200, "ok\n"), timeout=60, what="healthy again", alive=proc)
    journal = wait_for_topic(settings, "journal", EVENTS, timeout=120, alive=proc)
    assert len({(m[1], m[2]) for m in journal}) == EVENTS  # each event once (resends are exact copies)
    records = asyncio.run(read_records(settings, "pod-status-history"))
    history = history_by_version([(r.partition, r.key, r.value) for r in records])
    versions = assert_versions_have_no_gaps(history)
    assert len(versions) == PODS
    code, metrics = get(port, "/metrics")
    assert code == 200
    folded = next(line for line in metrics.splitlines() if line.startswith("podledger_fold_events_total"))
    assert float(folded.split()[-1]) >= EVENTS
    assert proc.proc.poll() is None  # it never exited


STATIC_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: steady
spec:
  containers:
    - name: main
      image: sim:1
"""


def test_a_node_agent_that_cannot_deliver_turns_unhealthy_and_sends_once_it_can(
    settings: Settings, tmp_path: Path, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    asyncio.run(refuse_writes(settings, Topic.PLEG))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    port = local.free_port()
    proc = podledger_process(
        ["node"],
        env=podledger_env(
            settings,
            None,
            PODLEDGER_API_SOURCE="false",
            PODLEDGER_RUNTIME="sim",
            PODLEDGER_MANIFEST_DIR=str(manifests),
            PODLEDGER_FILE_CHECK_S="1",
            PODLEDGER_HEALTH_PORT=str(port),
        ),
    )
    wait_for(lambda: get(port, "/healthz")[0] == 200, timeout=60, what="a healthy node agent", alive=proc)
    (manifests / "steady.yaml").write_text(STATIC_POD)
    _, body = wait_for(
        lambda: (answer := get(port, "/healthz/kafka"))[0] == 500 and answer,
        timeout=120,
        what="/healthz/kafka to fail",
        alive=proc,
    )
    assert "MessageSizeTooLarge" in body
    assert get(port, "/healthz/pleg")[0] == 200  # the runtime is fine; only Kafka is not
    assert asyncio.run(read_records(settings, "pleg")) == []
    assert asyncio.run(read_records(settings, "pod-updates"))  # other topics still take writes

    asyncio.run(accept_writes(settings, Topic.PLEG))  # the operator's repair
    wait_for(lambda: get(port, "/healthz") == (200, "ok\n"), timeout=60, what="healthy again", alive=proc)
    pleg = wait_for(lambda: asyncio.run(read_records(settings, "pleg")), timeout=60, what="pleg events")
    uids = {r.key for r in asyncio.run(read_records(settings, "pod-updates"))}
    assert {r.key for r in pleg} <= uids and pleg
    assert proc.proc.poll() is None
