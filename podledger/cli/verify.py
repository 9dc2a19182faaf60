"""`podledger verify`: prove journal and pod-status-history complete and unaltered.

A thin reader around read/audit/verify.py: per partition it reads the fold's journal marker
(fold-state), then pod-status-history, then the journal, each from its start, and feeds them to
the pure audit. `--since` limits which versions are compared, not what is read: re-folding a pod
needs its whole journal, and a chain is checked from its first record.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from podledger.cli.common import add_connection_options, settings_from
from podledger.errors import UserError

PROGRESS_EVERY = 50_000


def cmd_verify(args: argparse.Namespace) -> int:
    """Check the chains and re-fold the journal; print the first divergence and the summary."""
    from podledger.heap import long_lived_heap
    from podledger.read.audit import parse
    from podledger.read.audit import verify as audit

    settings = settings_from(args)
    if not settings.bootstrap:
        raise UserError("podledger verify reads Kafka: set PODLEDGER_BOOTSTRAP or --bootstrap")
    since_ms = 0
    if args.since:
        try:
            since_ms = parse.parse_time_ms(args.since, int(time.time() * 1000))
        except ValueError as exc:
            raise UserError(f"--since: {exc}") from None
    started = time.monotonic()
    with long_lived_heap():  # the re-fold's records live as long as the read does
        audits = asyncio.run(_read_all(settings, since_ms, args.partition))
    elapsed = time.monotonic() - started

    total = audit.Counts()
    problems, divergences = [], []
    for one in audits:
        total.add(one.counts)
        problems += one.problems
        divergences += one.divergences
    divergences.sort(key=audit.Divergence.order)
    out: list[str] = []
    if divergences:
        first = divergences[0]
        if first.offset is not None:
            first.history_value = asyncio.run(_history_value(settings, first.partition, first.offset))
        out += audit.divergence_lines(first)
        out += [f"also {audit.short_line(d)}" for d in divergences[1 : audit.KEPT]]
        if total.mismatches > audit.KEPT:
            out.append(f"... {total.mismatches - audit.KEPT} more divergences")
    out += [str(p) for p in problems]
    if total.broken_links > len(problems):
        out.append(f"... {total.broken_links - len(problems)} more broken links")
    out.append(audit.detail_line(total))
    out.append(audit.summary_line(total, total.journal_entries / max(elapsed, 1e-9)))
    print("\n".join(out), flush=True)
    return 1 if total.mismatches or total.broken_links else 0


async def _read_all(settings: Any, since_ms: int, only: int | None) -> list[Any]:
    from podledger.kafka import new_consumer
    from podledger.streams.topic_state import topic_partitions
    from podledger.streams.topics import start_admin
    from podledger.types import Topic

    admin = await start_admin(settings, "podledger-verify")
    try:
        names = [settings.topic(t) for t in (Topic.JOURNAL, Topic.POD_STATUS_HISTORY, Topic.FOLD_STATE)]
        missing = sorted(set(names) - set(await admin.list_topics()))
        if missing:
            raise UserError(f"topic {missing[0]} does not exist (wrong --topic-prefix?)")
        count = (await topic_partitions(admin, names[:1]))[names[0]]
    finally:
        await admin.close()
    partitions = list(range(count))
    if only is not None:
        if only not in partitions:
            raise UserError(f"--partition {only}: the journal has partitions 0..{count - 1}")
        partitions = [only]
    consumer = new_consumer(settings)
    await consumer.start()
    try:
        return [await _audit_partition(consumer, settings, p, since_ms) for p in partitions]
    finally:
        await consumer.stop()


async def _audit_partition(consumer: Any, settings: Any, partition: int, since_ms: int) -> Any:
    from aiokafka import TopicPartition

    from podledger.kafka import read_to_end
    from podledger.read.audit.verify import PartitionAudit
    from podledger.streams.fold import HoldLimits
    from podledger.types import Topic

    history, journal = (
        TopicPartition(settings.topic(t), partition) for t in (Topic.POD_STATUS_HISTORY, Topic.JOURNAL)
    )
    marker = await _marker(consumer, settings, partition)  # before history: see read/audit/verify.py
    starts = await consumer.beginning_offsets([history, journal])
    audit = PartitionAudit(
        partition,
        since_ms=since_ms,
        marker=marker,
        journal_from_start=starts[journal] == 0,
        history_from_start=starts[history] == 0,
        limits=HoldLimits(settings.hold_max_events, settings.hold_max_ms),
    )
    for tp, feed in ((history, audit.history), (journal, audit.journal)):
        consumer.assign([tp])
        n = 0
        async for message in read_to_end(consumer, tp):
            feed(message.offset, message.key or b"", message.value, message.headers or ())
            n += 1
            if n % PROGRESS_EVERY == 0:
                _progress(f"{tp.topic} partition {partition}: {n} records ...")
    audit.finish()
    c = audit.counts
    _progress(
        f"partition {partition}: {c.history_records} history records, {c.journal_entries} journal"
        f" entries, {c.mismatches} mismatches, {c.broken_links} broken links"
    )
    return audit


async def _marker(consumer: Any, settings: Any, partition: int) -> int | None:
    """The fold's journal marker of a partition: its batches up to that journal offset are stored,
    their versions acknowledged."""
    import orjson
    from aiokafka import TopicPartition

    from podledger.kafka import read_to_end
    from podledger.streams.batch import marker_key
    from podledger.types import Topic

    tp = TopicPartition(settings.topic(Topic.FOLD_STATE), partition)
    consumer.assign([tp])
    key, value = marker_key(partition), None
    async for message in read_to_end(consumer, tp):
        if message.key == key:
            value = message.value
    offset = orjson.loads(value).get("journal_offset") if value else None
    return None if offset is None else int(offset)


async def _history_value(settings: Any, partition: int, offset: int) -> Any:
    """One pod-status-history record's value, decoded (None if it is not JSON)."""
    import orjson
    from aiokafka import TopicPartition

    from podledger.kafka import new_consumer, read_to_end
    from podledger.types import Topic

    consumer = new_consumer(settings)
    await consumer.start()
    tp = TopicPartition(settings.topic(Topic.POD_STATUS_HISTORY), partition)
    try:
        consumer.assign([tp])
        async for message in read_to_end(consumer, tp, offset, offset + 1):
            try:
                return orjson.loads(message.value or b"")
            except orjson.JSONDecodeError:
                return None
    finally:
        await consumer.stop()
    return None


def _progress(text: str) -> None:
    print(f"podledger verify: {text}", file=sys.stderr, flush=True)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "verify",
        help="prove journal and pod-status-history complete and unaltered (hash chains, re-fold)",
        description="Checks the hash chains of journal and pod-status-history partition by partition,"
        " re-folds the journal offline with the fold's rules and compares every version on"
        " pod-status-history with what they give. Prints the first divergence with both statuses,"
        " each broken link with its topic, partition and offset, and last"
        " `verify versions=... mismatches=... broken_links=... events_per_s=...`; exits 1 on any"
        " mismatch or broken link.",
    )
    p.add_argument(
        "--since",
        help="compare only versions at or after this time: RFC 3339, or a duration ago (2h, 7d);"
        " the topics are still read from their start",
    )
    p.add_argument("--partition", type=int, help="verify only this partition")
    add_connection_options(p)
    p.set_defaults(func=cmd_verify)
