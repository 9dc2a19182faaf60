"""The watermark on the real broker (docs/guarantees.md, "Completeness: the watermark"): a fold worker
publishes, per partition, a time T such that every ingress record stamped at or before T has been
applied. Checked while it folds a paced burst (every observation is compared with the final topics),
while it idles, with an input held for a pod not announced yet, and with an ingress topic whose
records keep their writers' stamps (no claim at all until it is repaired)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.read.client import partition_watermarks, watermark
from podledger.read.client.pods import STATUS_VERSION_ANNOTATION
from podledger.schemas import decode, encode
from podledger.schemas.cloud_events import rfc3339_ms
from podledger.streams.topics import ensure_topics
from podledger.types import Topic
from podledger.workload import IngressEvent, PodLife, workload
from tests.support import wait_for
from tests.support.kafka import declared_configs, read_records, set_topic_configs
from tests.support.processes import PodledgerProcess, podledger_env, serve_kubeconfig, start_serve

pytestmark = pytest.mark.kafka

Coords = tuple[str, int, int]  # (topic, partition, offset) of an input


async def produce_stamped(settings: Settings, events: list[IngressEvent]) -> list[tuple[Coords, int]]:
    """Send `events`; each input's coordinates and the stamp the broker gave it."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", linger_ms=2)
    await producer.start()
    try:
        futures = [
            await producer.send(
                settings.topic(e.topic),
                key=e.key.encode(),
                value=encode(e.value),
                partition=partition_for_node(e.node, settings.partitions),
            )
            for e in events
        ]
        metas: list[RecordMetadata] = list(await asyncio.gather(*futures))
    finally:
        await producer.stop()
    assert all(m.timestamp_type == 1 for m in metas), "ingress topics are stamped by the broker"
    return [((e.topic, m.partition, m.offset), m.timestamp) for e, m in zip(events, metas, strict=True)]


def versions(records: list[Any]) -> set[tuple[str, int, Coords, int]]:
    """(uid, version, cause, cause stamp) of every history record."""
    out = set()
    for r in records:
        vs = decode(Topic.POD_STATUS_HISTORY, r.value)
        out.add((vs.uid, vs.version, (vs.cause.topic, vs.cause.partition, vs.cause.offset), vs.cause.ts_ms))
    return out


def journaled(records: list[Any]) -> set[Coords]:
    entries = (decode(Topic.JOURNAL, r.value) for r in records)
    return {(e.topic, e.partition, e.offset) for e in entries}


class Observation:
    """The watermarks, then what the topics held right after reading them."""

    def __init__(self, settings: Settings) -> None:
        marks = asyncio.run(partition_watermarks(settings))
        self.t_ms = {p: w.t_ms for p, w in marks.items() if w is not None and w.t_ms is not None}
        self.journal = journaled(asyncio.run(read_records(settings, Topic.JOURNAL)))
        self.history = versions(asyncio.run(read_records(settings, Topic.POD_STATUS_HISTORY)))

    def covers(self, partition: int, stamp: int) -> bool:
        return partition in self.t_ms and stamp <= self.t_ms[partition]


def start_fold(start: Callable[..., PodledgerProcess], settings: Settings) -> PodledgerProcess:
    env = podledger_env(settings, None, PODLEDGER_WATERMARK_MS="200", PODLEDGER_FOLD_BATCH_SIZE="40")
    return start(["run", "--roles", "fold"], env=env)


def test_a_watermark_covers_an_input_only_once_its_versions_are_on_the_topics(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess]
) -> None:
    asyncio.run(ensure_topics(settings))
    fold = start_fold(podledger_process, settings)

    # Idle, with nothing to fold: every partition gets a watermark, and it keeps advancing.
    first = wait_for(lambda: asyncio.run(watermark(settings)), 120, 0.5, "a first watermark", fold)
    time.sleep(1.0)
    assert asyncio.run(watermark(settings)) > first

    # A burst in chunks, observed while it is folded.
    events = list(workload(60, 1_800, nodes=5, seed=11))
    stamped: list[tuple[Coords, int]] = []
    observations: list[Observation] = []
    for at in range(0, len(events), 300):
        stamped += asyncio.run(produce_stamped(settings, events[at : at + 300]))
        observations.append(Observation(settings))
    newest = max(stamp for _, stamp in stamped)
    wait_for(
        lambda: (
            (observations.append(o := Observation(settings)) or o).t_ms
            and all(o.covers(p, newest) for p in range(settings.partitions))
        ),
        180,
        0.2,
        "the watermark to pass the burst",
        fold,
    )
    final = versions(asyncio.run(read_records(settings, Topic.POD_STATUS_HISTORY)))
    final_journal = journaled(asyncio.run(read_records(settings, Topic.JOURNAL)))
    assert {coords for coords, _ in stamped} <= final_journal  # every input was accepted

    partial = 0
    for seen in observations:
        covered = [(c, s) for c, s in stamped if seen.covers(c[1], s)]
        partial += 0 < len(covered) < len(stamped)
        missing = [c for c, _ in covered if c not in seen.journal]
        assert not missing, f"covered by the watermark {seen.t_ms} but not journaled yet: {missing[:5]}"
        late = [v for v in final if seen.covers(v[2][1], v[3]) and v not in seen.history]
        assert not late, f"versions caused up to the watermark {seen.t_ms} appeared later: {late[:5]}"
    assert partial, "no observation caught the watermark in the middle of the burst"
    assert fold.stop() == 0, fold.output()[-3000:]


def test_an_input_waiting_for_its_pod_holds_its_partition_below_it(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess]
) -> None:
    asyncio.run(ensure_topics(settings))
    fold = start_fold(podledger_process, settings)
    node = settings.node
    partition = partition_for_node(node, settings.partitions)
    life = PodLife(1, node, random.Random(3), int(time.time() * 1000))
    add, started = life.next_event(life.born_ms), life.next_event(life.born_ms + 1)
    wait_for(lambda: asyncio.run(watermark(settings)), 120, 0.5, "a first watermark", fold)

    # The pod's PLEG event arrives before its announcement: it is held, not applied.
    [(held_at, held_stamp)] = asyncio.run(produce_stamped(settings, [started]))
    others = [p for p in range(settings.partitions) if p != partition]
    wait_for(
        lambda: all(Observation(settings).covers(p, held_stamp + 1_000) for p in others),
        60,
        0.2,
        "the other partitions to pass the held input, idle",
        fold,
    )
    held = Observation(settings)
    assert held.t_ms[partition] < held_stamp, "a held input was covered before it was applied"
    assert not any(v[2] == held_at for v in held.history)

    # Announced: the held event is applied, its version written, and only then covered.
    asyncio.run(produce_stamped(settings, [add]))
    done = wait_for(
        lambda: (o := Observation(settings)).covers(partition, held_stamp) and o,
        60,
        0.2,
        "the watermark to pass the released input",
        fold,
    )
    assert any(v[2] == held_at for v in done.history), "covered, but the held event's version is missing"
    assert asyncio.run(watermark(settings, node=node)) >= held_stamp
    assert fold.stop() == 0, fold.output()[-3000:]


def test_a_stopped_fold_claims_nothing_new_and_its_successor_resumes(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess]
) -> None:
    asyncio.run(ensure_topics(settings))
    fold = start_fold(podledger_process, settings)
    life = PodLife(2, settings.node, random.Random(4), int(time.time() * 1000))
    partition = partition_for_node(settings.node, settings.partitions)
    wait_for(lambda: asyncio.run(watermark(settings)), 120, 0.5, "a first watermark", fold)
    assert fold.stop() == 0, fold.output()[-3000:]

    # Written while no fold runs: not covered, however long we wait.
    [(coords, stamp)] = asyncio.run(produce_stamped(settings, [life.next_event(life.born_ms)]))
    time.sleep(1.0)
    assert not Observation(settings).covers(partition, stamp)

    successor = start_fold(podledger_process, settings)
    seen = wait_for(
        lambda: (o := Observation(settings)).covers(partition, stamp) and o,
        120,
        0.2,
        "the successor's watermark to pass the input",
        successor,
    )
    assert coords in seen.journal and any(v[2] == coords for v in seen.history)
    assert successor.stop() == 0, successor.output()[-3000:]


def test_serve_says_whether_a_past_answer_is_complete_and_kubectl_prints_the_warning(
    settings: Settings,
    podledger_process: Callable[..., PodledgerProcess],
    kubectl_binary: str,
    tmp_path: Path,
) -> None:
    asyncio.run(ensure_topics(settings))
    fold = start_fold(podledger_process, settings)
    life = PodLife(3, settings.node, random.Random(5), int(time.time() * 1000))
    add, started = life.next_event(life.born_ms), life.next_event(life.born_ms + 1)
    [_, (_, started_stamp)] = asyncio.run(produce_stamped(settings, [add, started]))
    wait_for(
        lambda: (asyncio.run(watermark(settings)) or 0) >= started_stamp, 120, 0.2, "the watermark", fold
    )
    _, url = start_serve(podledger_process, settings)

    # Covered by the watermark: complete, and the pod as its PLEG event left it.
    status, headers, body = get(f"{url}/at/{rfc3339_ms(started_stamp)}/api/v1/pods")
    assert status == 200 and headers["Podledger-Complete"] == "true" and "Warning" not in headers
    assert [p["metadata"]["annotations"][STATUS_VERSION_ANNOTATION] for p in body["items"]] == ["2"]

    # The fold stops; a later input is not applied: an answer at its moment says it is incomplete.
    assert fold.stop() == 0, fold.output()[-3000:]
    [(_, probe_stamp)] = asyncio.run(produce_stamped(settings, [life.next_event(life.born_ms + 2)]))
    moment = rfc3339_ms(probe_stamp)
    status, headers, body = get(f"{url}/at/{moment}/api/v1/pods")
    assert status == 200 and headers["Podledger-Complete"] == "false"
    assert headers["Podledger-Watermark"] < moment and headers["Warning"].startswith('299 - "incomplete')
    then = serve_kubeconfig(f"{url}/at/{moment}", tmp_path / "kubeconfig-then")
    shown = subprocess.run(
        [kubectl_binary, "--kubeconfig", then, "--cache-dir", str(tmp_path / "kube-cache"), "get", "pods"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Warning: incomplete: the ledger has applied every input only up to" in shown.stderr


async def stamp_by_writers(settings: Settings, topic: Topic) -> None:
    """Make `topic` CreateTime, as a topic an older podledger created (its other configs kept)."""
    configs = declared_configs(settings, topic) | {"message.timestamp.type": "CreateTime"}
    await set_topic_configs(settings, topic, configs)


def test_no_claim_while_an_ingress_topic_keeps_its_writers_stamps_until_it_is_repaired(
    settings: Settings, podledger_process: Callable[..., PodledgerProcess]
) -> None:
    asyncio.run(ensure_topics(settings))
    asyncio.run(stamp_by_writers(settings, Topic.PLEG))
    fold = start_fold(podledger_process, settings)

    # The fold runs and publishes every partition's record, none with a T: no pleg record was
    # applied, yet a writer may stamp its next one with any time.
    def every_partition_published() -> bool:
        marks = asyncio.run(partition_watermarks(settings))
        return all(w is not None for w in marks.values())

    wait_for(every_partition_published, 120, 0.5, "a record on every partition", fold)
    time.sleep(1.0)  # several more ticks
    marks = asyncio.run(partition_watermarks(settings))
    assert all(w is not None and w.t_ms is None for w in marks.values()), marks
    assert "podledger topics create" in fold.output()

    # Repaired: claims start within the publisher's re-reading of the configs.
    assert any(c.action == "altered" for c in asyncio.run(ensure_topics(settings)))
    wait_for(lambda: asyncio.run(watermark(settings)), 60, 0.5, "a watermark after the repair", fold)
    assert fold.stop() == 0, fold.output()[-3000:]


def get(url: str) -> tuple[int, dict[str, str], Any]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, dict(response.headers), json.loads(response.read())
