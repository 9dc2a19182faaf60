"""A watch of pods: the events after a resourceVersion (or the current pods as ADDED), then live
ones, as newline-separated JSON; BOOKMARKs when asked for; 410 Gone as an ERROR event when the
topics no longer hold the point asked for."""

from __future__ import annotations

import asyncio
import time

import orjson
from aiohttp import web

from podledger.read.client.position import InvalidToken, ahead_partitions, decode_position, expired_reason
from podledger.read.client.reader import now_ms
from podledger.read.client.select import PodFilter
from podledger.read.client.watch import TOMBSTONE_RETENTION_MS
from podledger.read.kubeapi import objects
from podledger.read.kubeapi.ledger import Ledger, Watcher
from podledger.read.kubeapi.store import ADDED, StoreEvent, event_for
from podledger.read.kubeapi.table import row_basis, row_object, table, table_row
from podledger.types import JSONDict

DEFAULT_TIMEOUT_S = 1800.0
AHEAD_WAIT_S = 3.0


class _Stream:
    """Writes watch events, as objects or as Table rows (column definitions on the first only)."""

    def __init__(self, response: web.StreamResponse, gv: str | None, include: str) -> None:
        self.response, self.gv, self.include = response, gv, include
        self.headers_sent = False

    async def send(self, kind: str, obj: JSONDict) -> None:
        if self.gv is not None and kind in ("ADDED", "MODIFIED", "DELETED"):
            row = table_row(row_basis(obj), row_object(obj, self.include, self.gv), time.time())
            obj = table([row], obj["metadata"]["resourceVersion"], self.gv, headers=not self.headers_sent)
            self.headers_sent = True
        await self.response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")


async def _start_point(ledger: Ledger, rv: str) -> JSONDict | tuple[int, ...] | None:
    """The offsets to resume at; None for "now, with the current pods first"; or the Status to
    answer with."""
    if rv in ("", "0"):
        return None
    try:
        position = decode_position(rv)
    except InvalidToken as exc:
        return objects.bad_request(f"resourceVersion {rv!r}: {exc}")
    starts = await ledger.reader.log_starts()
    reason = expired_reason(position, starts, now_ms(), TOMBSTONE_RETENTION_MS)
    if reason is None and (below := ledger.store.refused_below(position.offsets)):
        reason = f"removed pods before it are forgotten (partitions {below})"
    if reason is None and ahead_partitions(position, await ledger.reader.end_offsets()):
        reason = "the resourceVersion is past the end of the topics"
    if reason is not None:
        return objects.expired(reason)
    if not await ledger.reached(position.offsets, AHEAD_WAIT_S):
        return objects.too_large("this server has not read that far yet")
    return position.offsets


async def serve_watch(
    request: web.Request,
    ledger: Ledger,
    pod_filter: PodFilter,
    gv: str | None,
    include: str,
    bookmark_s: float,
) -> web.StreamResponse:
    query = request.query
    bookmarks = objects.parse_bool(query.get("allowWatchBookmarks"))
    send_initial = query.get("sendInitialEvents")
    try:
        timeout_s = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT_S)
    except ValueError:
        timeout_s = DEFAULT_TIMEOUT_S
    rv = query.get("resourceVersion", "")
    start = await _start_point(ledger, rv)
    if isinstance(start, dict) and start["code"] != 410:
        return web.Response(body=orjson.dumps(start), status=start["code"], content_type="application/json")
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    stream = _Stream(response, gv, include)
    if isinstance(start, dict):  # 410, as the apiserver sends it: an ERROR event on a 200 stream
        await stream.send("ERROR", start)
        return response
    watcher = Watcher(pod_filter)
    # No await between registering and taking the backlog: both see the store at the same point.
    ledger.watchers.add(watcher)
    try:
        if start is None:
            backlog = [] if send_initial == "false" else _current(ledger, pod_filter)
            current = ledger.resource_version
        else:
            backlog = [e for e in (event_for(ev, pod_filter) for ev in ledger.store.since(start)) if e]
            current = ledger.resource_version
        for kind, obj in backlog:
            await stream.send(kind, obj)
        if bookmarks and objects.parse_bool(send_initial):
            await stream.send("BOOKMARK", objects.bookmark(current, initial_events_end=True))
        await _live(stream, ledger, watcher, timeout_s, bookmark_s if bookmarks else None)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        ledger.watchers.discard(watcher)
    return response


def _current(ledger: Ledger, pod_filter: PodFilter) -> list[tuple[str, JSONDict]]:
    """The pods now, as ADDED events at the current resourceVersion (a watch from "now")."""
    rv = ledger.resource_version
    return [
        (ADDED, {**e.obj, "metadata": {**e.obj["metadata"], "resourceVersion": rv}})
        for e in ledger.store.select(pod_filter)
    ]


async def _live(
    stream: _Stream, ledger: Ledger, watcher: Watcher, timeout_s: float, bookmark_s: float | None
) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    next_bookmark = loop.time() + (bookmark_s or timeout_s)
    while (now := loop.time()) < end:
        try:
            event: StoreEvent | None = await asyncio.wait_for(
                watcher.queue.get(), min(end, next_bookmark) - now
            )
        except TimeoutError:
            if bookmark_s is not None and loop.time() >= next_bookmark:
                await stream.send("BOOKMARK", objects.bookmark(ledger.resource_version))
                next_bookmark = loop.time() + bookmark_s
            continue
        if event is None:  # fell too far behind: end, the client resumes from its last version
            return
        seen = event_for(event, watcher.pod_filter)
        if seen is not None:
            await stream.send(*seen)
        while not watcher.queue.empty():  # drain what is already there without waking again
            more = watcher.queue.get_nowait()
            if more is None:
                return
            if (seen := event_for(more, watcher.pod_filter)) is not None:
                await stream.send(*seen)
