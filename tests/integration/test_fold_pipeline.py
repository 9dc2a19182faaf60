"""The Faust fold agent on the real broker: its outputs, the offline fold over the journal it wrote,
and bad input between good events going to dead-letter. The worker folds with the native fold core
where it covers a batch (streams/fold_core_live.py) and in Python where it does not: the offline
Python fold of its journal must still give its history byte for byte."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from pathlib import Path

import orjson
import pytest

from podledger.config import Settings
from podledger.local.processes import free_port
from podledger.partitioner import partition_for_node
from podledger.schemas import decode, encode
from podledger.streams.topics import ensure_topics
from podledger.workload import produce, workload
from tests.support.history import assert_versions_have_no_gaps, history_by_version, offline_fold
from tests.support.kafka import read_topic, send_raw, wait_for_topic
from tests.support.metrics import http_get, prometheus_samples, sample_value
from tests.support.processes import podledger_env

pytestmark = pytest.mark.kafka

PODS, EVENTS = 40, 800


def test_live_fold_and_offline_fold_of_its_journal_agree_and_bad_input_is_dead_lettered(
    settings: Settings, podledger_process, tmp_path: Path
) -> None:
    asyncio.run(ensure_topics(settings))
    events = list(workload(PODS, EVENTS, nodes=5, seed=3))
    first, rest = events[: EVENTS // 2], events[EVENTS // 2 :]
    port = free_port()
    proc = podledger_process(
        ["run", "--roles", "fold"],
        env=podledger_env(
            settings,
            None,
            PODLEDGER_MAX_EVENT_BYTES="65536",
            PODLEDGER_HOLD_MAX_MS="2000",
            PODLEDGER_HEALTH_PORT=str(port),
        ),
    )
    asyncio.run(produce(settings, first))

    # Bad input of every kind, between the good events, on the partitions of real pods.
    node = first[0].node
    ts = first[-1].ts_ms
    good_pleg = next(e for e in first if e.topic == "pleg")
    stranger = dataclasses.replace(good_pleg.value, uid="never-announced", ts_ms=ts)
    unknown_op = orjson.loads(encode(first[0].value)) | {"op": "EXPLODE"}
    wrong_type = orjson.loads(encode(good_pleg.value)) | {"ts_ms": "yesterday"}
    huge = orjson.loads(encode(good_pleg.value)) | {"padding": "x" * 70_000}
    bad = [
        ("pleg", b"\x00\xffnot json at all"),
        ("pleg", orjson.dumps(wrong_type)),
        ("pod-updates", orjson.dumps(unknown_op)),
        ("pleg", orjson.dumps(huge)),
        ("pleg", encode(stranger)),
    ]
    for topic, value in bad:
        asyncio.run(send_raw(settings, topic, node, b"bad-key", value, ts))
    asyncio.run(produce(settings, rest))
    # A later pod-update on the stranger's partition passes it by: it is given up. The broker stamps
    # ingress records (LogAppendTime), so the hold limit has to pass for real.
    time.sleep(2.5)
    src = next(e for e in events if e.node == node and e.topic == "pod-updates")
    late = dataclasses.replace(src.value, ts_ms=rest[-1].ts_ms + 5000)
    asyncio.run(send_raw(settings, src.topic, node, src.key.encode(), encode(late), late.ts_ms))

    good = EVENTS + 1
    journal = wait_for_topic(settings, "journal", good, timeout=120, alive=proc)
    letters = wait_for_topic(settings, "dead-letter", 5, timeout=60, alive=proc)
    history_msgs = asyncio.run(read_topic(settings, "pod-status-history", 1, idle=1.0))

    # Every good event was journaled once, in per-partition order, on its input's partition.
    entries = [decode("journal", v) for _, _, v in journal]
    assert len({(e.topic, e.partition, e.offset) for e in entries}) == good
    assert all(p == e.partition for (p, _, _), e in zip(journal, entries, strict=True))

    # Bad input: each kind dead-lettered with its reason and coordinates, original bytes kept.
    dead = sorted((decode("dead-letter", v) for _, _, v in letters), key=lambda d: (d.topic, d.offset))
    reasons = sorted(d.reason for d in dead)
    assert reasons == ["malformed", "oversize", "schema", "unknown_op", "unknown_pod"]
    by_reason = {d.reason: d for d in dead}
    assert base64.b64decode(by_reason["malformed"].value_b64) == b"\x00\xffnot json at all"
    assert "'ts_ms'" in by_reason["schema"].detail and "'op'" in by_reason["unknown_op"].detail
    assert by_reason["unknown_pod"].detail.startswith("pleg event for pod never-announced")
    assert {d.partition for d in dead} == {partition_for_node(node, settings.partitions)}

    # Versions 1..N per pod, no (uid, version) with two statuses; every pod has a status.
    history = history_by_version(history_msgs)
    latest = assert_versions_have_no_gaps(history)
    assert len(latest) == PODS

    # The offline fold over the journal reproduces the live history exactly.
    offline_lines = offline_fold(journal, tmp_path)
    offline_history = history_by_version([(0, b"", line) for line in offline_lines])
    assert offline_history == history
    live_values = {(v.uid, v.version): v for v in (decode("pod-status-history", m[2]) for m in history_msgs)}
    for line in offline_lines:
        vs = decode("pod-status-history", line)
        assert vs == live_values[(vs.uid, vs.version)]  # cause and all

    # pod-status carries the latest version of each pod.
    latest_msgs = asyncio.run(read_topic(settings, "pod-status", 1, idle=0.5))
    newest: dict[str, int] = {}
    for _, _, v in latest_msgs:
        vs = decode("pod-status", v)
        newest[vs.uid] = max(newest.get(vs.uid, 0), vs.version)
    assert newest == latest

    # The native core folded the good batches; those with bad input went to the Python fold.
    samples = prometheus_samples(http_get(port, "/metrics")[1])
    native = sample_value(samples, "podledger_fold_native_batches_total") or 0
    python = sample_value(samples, "podledger_fold_python_batches_total") or 0
    assert native >= 1 and python >= 1, (native, python)
    assert proc.stop() == 0, proc.output()
