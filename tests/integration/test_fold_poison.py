"""Poison on the real broker: schema-shaped values the rules cannot use, between good events, are
parked on dead-letter with their coordinates and bytes, and every good event around them is folded
once (none of the batch they arrived in is lost)."""

from __future__ import annotations

import asyncio
import base64
import hashlib

import orjson
import pytest

from podledger.config import Settings
from podledger.schemas import decode, encode
from podledger.streams.topics import ensure_topics
from podledger.workload import produce, workload
from tests.support.history import assert_versions_have_no_gaps, history_by_version
from tests.support.kafka import read_topic, send_raw, wait_for_topic
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

PODS, EVENTS = 20, 400


def poison_updates(template: dict) -> list[bytes]:
    """pod-updates ADDs of new pods whose shape the fold cannot use."""
    out = []
    for i, change in enumerate(
        [
            lambda pod: pod["spec"].__setitem__("containers", [1]),
            lambda pod: pod["spec"].__setitem__("initContainers", [{"image": "busybox"}]),
            lambda pod: pod.__setitem__("status", "Running"),
            lambda pod: pod["spec"].__setitem__("containers", [{"name": "c", "ports": "80"}]),
        ]
    ):
        value = orjson.loads(orjson.dumps(template))
        value["op"] = "ADD"
        value["pod"]["metadata"]["uid"] = f"poison-{i}"
        value["pod"]["metadata"]["name"] = f"poison-{i}"
        change(value["pod"])
        out.append(orjson.dumps(value))
    return out


def test_poison_in_a_batch_is_parked_and_every_good_event_is_folded(
    settings: Settings, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    events = list(workload(PODS, EVENTS, nodes=1, seed=11))
    first, rest = events[: EVENTS // 2], events[EVENTS // 2 :]
    # One large batch, so the poison shares it with many good events.
    proc = podledger_process(
        ["run", "--roles", "fold"],
        env=podledger_env(settings, None, PODLEDGER_FOLD_BATCH_SIZE="500", PODLEDGER_FOLD_BATCH_MS="500"),
    )
    node = first[0].node
    template = orjson.loads(encode(first[0].value))
    asyncio.run(produce(settings, first))
    poison = poison_updates(template)
    for i, value in enumerate(poison):
        asyncio.run(send_raw(settings, "pod-updates", node, f"poison-{i}".encode(), value, first[-1].ts_ms))
    # 800 KB of garbage: its dead letter, in base64, would not fit under the broker's 1 MiB limit.
    garbage = b"\xff" * 800_000
    asyncio.run(send_raw(settings, "pleg", node, b"garbage", garbage, first[-1].ts_ms))
    asyncio.run(produce(settings, rest))

    journal = wait_for_topic(settings, "journal", EVENTS, timeout=120, alive=proc)
    entries = [decode("journal", v) for _, _, v in journal]
    assert len({(e.topic, e.partition, e.offset) for e in entries}) == EVENTS == len(entries)
    letters = wait_for_topic(settings, "dead-letter", len(poison) + 1, timeout=60, alive=proc)
    dead = [decode("dead-letter", v) for _, _, v in letters]
    (big,) = [d for d in dead if d.topic == "pleg"]
    assert big.reason == "malformed" and big.value_size == len(garbage)
    assert big.value_sha256 == hashlib.sha256(garbage).hexdigest()
    assert garbage.startswith(base64.b64decode(big.value_b64 or ""))
    dead = [d for d in dead if d.topic != "pleg"]
    assert sorted(d.key_b64 for d in dead) == sorted(
        base64.b64encode(f"poison-{i}".encode()).decode() for i in range(len(poison))
    )
    assert all(d.reason == "schema" for d in dead), [(d.reason, d.detail) for d in dead]
    history = history_by_version(asyncio.run(read_topic(settings, "pod-status-history", 1, idle=1.0)))
    assert len(assert_versions_have_no_gaps(history)) == PODS
    assert proc.proc.poll() is None, proc.output()
    assert "Traceback" not in proc.output()
