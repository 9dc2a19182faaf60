"""The pod watch's policy as plain state: how long each watch runs, how long silence is tolerated,
how failures back off, and when the watch counts as down. No I/O; the loop is agents/pod_watch.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# The pod watch, as client-go's reflector runs it: each watch asks the server to end it after
# WATCH_TIMEOUT_S to 2 x WATCH_TIMEOUT_S seconds (jittered, so watches do not all restart at once), and
# the client gives up on a connection that stays silent a margin longer: a half-open connection is
# noticed by that read timeout, or sooner by TCP keepalive. Failures restart it with a back-off.
WATCH_TIMEOUT_S = 300  # client-go's minWatchTimeout
WATCH_READ_MARGIN_S = 30.0
WATCH_BACKOFF_FIRST_S, WATCH_BACKOFF_MAX_S = 1.0, 30.0
# A watch that ends sooner than this with no event is a failure (client-go's "very short watch").
WATCH_TOO_SHORT_S = 1.0


def watch_timeouts(base_s: int, jitter: float) -> tuple[int, float]:
    """(server timeoutSeconds, client read timeout) of one watch, `jitter` in [0, 1): the server's is
    base_s x (1 + jitter) as client-go's reflector picks it; the client waits for a byte at most that
    plus a margin (WATCH_READ_MARGIN_S, or base_s when it is shorter)."""
    server = max(1, int(base_s * (1.0 + jitter)))
    return server, server + min(WATCH_READ_MARGIN_S, float(max(base_s, 1)))


class WatchHealth:
    """Whether a list-and-watch loop hears from the apiserver: down from the start until its first
    list, and from any failure until a list or watch request succeeds again.

    Written by the watch thread, read by anyone (plain attribute stores). Times are `clock()` seconds.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.down_since: float | None = clock()
        self.listed = False  # a list ever succeeded
        self.last_heard: float | None = None  # a list, a watch opening, an event or a bookmark
        self.error = "not started"
        self.failures = 0  # failures since it was last up

    def up(self) -> None:
        self.down_since = None
        self.last_heard = self.clock()
        self.failures = 0

    def heard(self) -> None:
        self.last_heard = self.clock()

    def down(self, error: str) -> None:
        if self.down_since is None:
            self.down_since = self.clock()
        self.error = error
        self.failures += 1

    def healthy(self, now: float, down_after_s: float) -> tuple[bool, str]:
        """Unhealthy once down for more than `down_after_s` seconds, with the reason."""
        if self.down_since is None or now - self.down_since <= down_after_s:
            return True, "ok"
        if not self.listed:
            return False, f"apiserver watch has yet to list pods ({now - self.down_since:.0f}s): {self.error}"
        return False, f"apiserver watch down for {now - self.down_since:.0f}s: {self.error}"
