"""The floors `podledger bench fold` measures the fold against: a bare aiokafka loop that consumes
the same inputs, decodes and re-encodes each and produces it (the floor any Kafka pipeline in
Python stands on), the same loop producing the fold's own output volume per input, and offline
the reading of every input and the writing of every output without the fold between them."""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import NewTopic

from podledger.config import Settings
from podledger.schemas import decode, encode
from podledger.streams.fold import Coordinates, Output, PodRecord, fold_event
from podledger.streams.replay import parse_line
from podledger.streams.topics import start_admin
from podledger.types import INGRESS_TOPICS, Topic
from podledger.workload import IngressEvent

# What the fold writes per input, in this order: its journal entry, the pod-status and
# pod-status-history records of a new version, and the pod's record on fold-state.
FAN_OUT_TOPICS = (Topic.JOURNAL, Topic.POD_STATUS, Topic.POD_STATUS_HISTORY, Topic.FOLD_STATE)


def fan_out(events: list[IngressEvent]) -> dict[int, tuple[int, ...]]:
    """Per input (by its event time, unique in a workload), the byte sizes of the records the fold
    writes for it, one per FAN_OUT_TOPICS (0: none). The fold-state size is the pod's whole record
    after the event, as the live worker stores it (once per batch, so this is an upper bound)."""
    records: dict[str, PodRecord | None] = {}
    offsets: dict[str, int] = {}
    out: dict[int, tuple[int, ...]] = {}
    for event in events:
        offsets[event.topic] = offset = offsets.get(event.topic, -1) + 1
        at = Coordinates(event.topic, 0, offset, event.ts_ms)
        decoded = decode(event.topic, encode(event.value))  # as the worker reads it: plain JSON inside
        record, outputs = fold_event(records.get(event.key), at, decoded)
        records[event.key] = record
        sizes: dict[str, int] = {str(topic): 0 for topic in FAN_OUT_TOPICS}
        for output in outputs:
            if output.topic in sizes:
                sizes[output.topic] += len(output.wire_value() or b"")
        sizes[Topic.FOLD_STATE] = 0 if record is None else len(orjson.dumps(record))
        out[event.ts_ms] = tuple(sizes.values())
    return out


def offline_floor(lines: list[bytes], outputs: list[Output]) -> float:
    """Events/s of the offline fold's reading and writing alone: every input line parsed and
    validated as the offline fold reads it, and every output it wrote encoded again from plain JSON
    of the same bytes (the least any encoder does, with no fold-built objects to walk)."""
    written = [orjson.loads(wire) for wire in (out.wire_value() for out in outputs) if wire is not None]
    started = time.perf_counter()
    for line_no, line in enumerate(lines, 1):
        parse_line(line_no, line)
    for value in written:
        orjson.dumps(value)
    return len(lines) / (time.perf_counter() - started)


async def raw_floor(
    settings: Settings, total: int, volume: dict[int, tuple[int, ...]] | None = None
) -> float:
    """Consume the ingress topics, decode and re-encode each value, produce it: events/s.

    With `volume` (fan_out's sizes) each input produces instead the records the fold writes for
    it, of the same sizes, to as many topics: the floor under the fold's own output volume."""
    consumer = AIOKafkaConsumer(
        *(settings.topic(t) for t in INGRESS_TOPICS),
        bootstrap_servers=settings.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=f"{settings.topic_prefix}{'volume' if volume else 'raw'}-floor",
        **settings.kafka_client_options(),
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap,
        linger_ms=5,
        max_batch_size=1 << 20,
        **settings.kafka_client_options(),
    )
    names = [f"floor-{t}" for t in FAN_OUT_TOPICS] if volume else ["raw-floor"]
    sinks = [settings.topic(name) for name in names]
    admin = await start_admin(settings)
    try:
        await admin.create_topics(
            [NewTopic(sink, settings.partitions, settings.replication_factor) for sink in sinks]
        )
    finally:
        await admin.close()
    blob = b"x" * max((max(sizes) for sizes in volume.values()), default=0) if volume else b""
    await consumer.start()
    await producer.start()
    try:
        done = 0
        started: float | None = None
        while done < total:
            batch = await consumer.getmany(timeout_ms=1000, max_records=5000)
            if started is None and batch:
                started = time.monotonic()
            for tp, records in batch.items():
                for record in records:
                    value: Any = orjson.loads(record.value)
                    encoded = orjson.dumps(value)
                    if volume is None:
                        await producer.send(sinks[0], key=record.key, value=encoded, partition=tp.partition)
                    elif value.get("ts_ms") not in volume:  # by event time: brokers may stamp their own
                        continue  # not the backlog's (the latency run's events come after it)
                    else:
                        for sink, size in zip(sinks, volume[value["ts_ms"]], strict=True):
                            if size:
                                await producer.send(
                                    sink, key=record.key, value=blob[:size], partition=tp.partition
                                )
                    done += 1
        await producer.flush()
        return done / (time.monotonic() - (started or time.monotonic()))
    finally:
        await consumer.stop()
        await producer.stop()
