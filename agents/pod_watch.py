"""The pod list-and-watch loop, as client-go's reflector runs it, on a Kube: it lists, watches, resumes
or relists, and restarts after any failure with a back-off. Its timings and health are in
agents/watch_policy.py."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.agents.watch_policy import (
    WATCH_BACKOFF_FIRST_S,
    WATCH_BACKOFF_MAX_S,
    WATCH_TIMEOUT_S,
    WATCH_TOO_SHORT_S,
    WatchHealth,
    watch_timeouts,
)
from podledger.types import JSONDict

log = logging.getLogger(__name__)


def list_and_watch_pods(
    kube: Kube,
    on_event: Callable[[str, JSONDict], None],
    stop: threading.Event,
    *,
    field_selector: str = "",
    watch_timeout_s: int = WATCH_TIMEOUT_S,
    health: WatchHealth | None = None,
    jitter: Callable[[], float] = random.random,
) -> None:
    """List, then watch, until `stop` is set; blocking (run it in a thread). It never gives up.

    `on_event(kind, pod)` gets LISTED for every listed pod, then RELISTED with {"uids": [...]}
    once the listing is complete (pods not among them were deleted while nobody watched), then
    ADDED, MODIFIED and DELETED from the watch. Each watch asks the server to end it after
    `watch_timeout_s` to twice that (jittered) and reads with a timeout a margin longer, so a
    half-open connection is noticed. A watch the server ends is resumed from the last
    resourceVersion; 410 Gone relists at once; any other failure, of whatever kind, restarts on a
    fresh connection after a back-off from 1 s doubling to 30 s (jittered): resuming after a
    transport failure, relisting after anything else. `health` follows the outcome.
    """
    health = health if health is not None else WatchHealth()
    resource_version = ""
    backoff = WATCH_BACKOFF_FIRST_S

    def opened() -> None:
        nonlocal backoff
        health.up()
        backoff = WATCH_BACKOFF_FIRST_S

    while not stop.is_set():
        try:
            if not resource_version:
                listing = kube.list_pods(field_selector=field_selector, watch_pool=True)
                items = listing.get("items") or []
                for pod in items:
                    on_event("LISTED", pod)
                on_event("RELISTED", {"uids": [p["metadata"]["uid"] for p in items]})
                resource_version = listing["metadata"]["resourceVersion"]
                health.listed = True
                opened()
            server_s, read_s = watch_timeouts(watch_timeout_s, jitter())
            started, quiet = time.monotonic(), True
            for event in kube.watch_pods(
                field_selector=field_selector,
                resource_version=resource_version,
                timeout_seconds=server_s,
                read_timeout_s=read_s,
                on_open=opened,
            ):
                if stop.is_set():
                    return
                health.heard()
                quiet = False
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    code = int(obj.get("code") or 0)
                    if code == 410:  # our resourceVersion is too old to resume from: relist
                        log.info("pod watch expired (410 Gone); relisting")
                        resource_version = ""
                        break
                    reason = str(obj.get("reason") or "watch error")
                    raise KubeError(code, reason, str(obj.get("message") or ""))
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    on_event(kind, obj)
                resource_version = obj["metadata"].get("resourceVersion") or resource_version
            else:
                if quiet and time.monotonic() - started < WATCH_TOO_SHORT_S and not stop.is_set():
                    raise KubeError(0, "very short watch", "the watch ended at once with no event")
        except Exception as exc:
            if stop.is_set():
                return  # shutting down: the server closing our watch is expected
            transport = isinstance(exc, KubeError) and exc.status != 410
            if not transport:
                resource_version = ""  # 410, bad data or a failing handler: start from a new list
            reason = str(exc) if isinstance(exc, KubeError) else f"{type(exc).__name__}: {exc}"
            health.down(reason)
            delay = backoff * (0.5 + jitter() / 2)
            log.warning(
                "pod watch failed (%s in a row; %s in %.1fs): %s",
                health.failures,
                "resuming" if resource_version else "relisting",
                delay,
                reason,
            )
            kube.reset_watch_connections()
            stop.wait(delay)
            backoff = min(backoff * 2, WATCH_BACKOFF_MAX_S)
