"""A watch of pods: the events after a resourceVersion (or the current pods as ADDED), then live
ones, as newline-separated JSON; BOOKMARKs when asked for; 410 Gone as an ERROR event when the
topics no longer hold the point asked for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import orjson
from aiohttp import web

from podledger.read.client.position import InvalidToken, ahead_partitions, decode_position, expired_reason
from podledger.read.client.reader import now_ms
from podledger.read.client.select import PodFilter
from podledger.read.client.watch import TOMBSTONE_RETENTION_MS
from podledger.read.kubeapi import objects
from podledger.read.kubeapi.ledger import Ledger, Watcher
from podledger.read.kubeapi.served import PodDoc, chunks, event_json, watch_object
from podledger.read.kubeapi.store import ADDED, StoreEvent, event_for
from podledger.read.kubeapi.table import Clock
from podledger.types import JSONDict

DEFAULT_TIMEOUT_S = 1800.0
AHEAD_WAIT_S = 3.0

Seen = tuple[str, PodDoc, str]  # (type, pod, resourceVersion) of one event a watch sends


class _Stream:
    """Writes watch events, as objects or as Table rows (column definitions on the first only).
    Events already waiting are written together, in one write."""

    def __init__(self, response: web.StreamResponse, gv: str | None, include: str) -> None:
        self.response, self.gv, self.include = response, gv, include
        self.headers_sent = False

    def line(self, seen: Seen, clock: Clock) -> bytes:
        kind, doc, rv = seen
        obj = watch_object(doc, rv, self.gv, self.include, clock, headers=not self.headers_sent)
        self.headers_sent = self.headers_sent or self.gv is not None
        return event_json(kind, obj)

    async def send_all(self, events: Iterable[Seen]) -> None:
        clock = Clock(time.time())
        for chunk in chunks(self.line(seen, clock) for seen in events):
            await self.response.write(chunk)

    async def send(self, kind: str, obj: JSONDict) -> None:
        """An event whose object is not a pod: an ERROR's Status, a BOOKMARK."""
        await self.response.write(event_json(kind, orjson.dumps(obj)))


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
    if request.method == "HEAD":
        return web.Response(content_type="application/json")
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
        current = ledger.resource_version
        backlog: list[Seen]
        if start is None:
            backlog = [] if send_initial == "false" else _current(ledger, pod_filter)
        else:
            backlog = [e for e in (event_for(ev, pod_filter) for ev in ledger.store.since(start)) if e]
        await stream.send_all(backlog)
        del backlog
        if bookmarks and objects.parse_bool(send_initial):
            await stream.send("BOOKMARK", objects.bookmark(current, initial_events_end=True))
        await _live(stream, ledger, watcher, timeout_s, bookmark_s if bookmarks else None)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    finally:
        ledger.watchers.discard(watcher)
    return response


def _current(ledger: Ledger, pod_filter: PodFilter) -> list[Seen]:
    """The pods now, as ADDED events at the current resourceVersion (a watch from "now")."""
    rv = ledger.resource_version
    return [(ADDED, doc, rv) for doc in ledger.store.select(pod_filter)]


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
        events, ended = [event], False
        while not watcher.queue.empty():  # what is already there goes in the same write
            more = watcher.queue.get_nowait()
            if more is None:
                ended = True
                break
            events.append(more)
        await stream.send_all(seen for e in events if (seen := event_for(e, watcher.pod_filter)) is not None)
        if ended:
            return
