"""A process's health and counters over HTTP: /healthz, /healthz/<check> and /metrics.

Every long-running process (a node agent, a fold or sink worker) names its checks, each a
function returning (healthy, why), and may add counters; this module only serves them. It is
bound to loopback by default: it tells the machine's supervisor, not the world, how the process
is doing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

__all__ = ["Check", "HealthServer", "prometheus_text"]

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


Samples = Mapping[tuple[tuple[str, str], ...], float]  # label pairs -> value


def prometheus_text(counters: Mapping[str, Samples], gauges: Mapping[str, Samples] | None = None) -> str:
    """Counters and gauges in the Prometheus text format, each {metric name: {label pairs: value}}."""
    lines: list[str] = []
    families = [(name, "counter", s) for name, s in counters.items()]
    families += [(name, "gauge", s) for name, s in (gauges or {}).items()]
    for name, kind, samples in sorted(families):
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in sorted(samples.items()):
            rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            lines.append(f"{name}{{{rendered}}} {value:g}" if rendered else f"{name} {value:g}")
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class HealthServer:
    """Serves the health of named checks and, optionally, counters in the Prometheus format.

    GET /healthz answers 200 "ok" when every check passes, else 500 with the failing reasons;
    /healthz/<name> answers for one check; /metrics returns `metrics()`."""

    def __init__(self, what: str, checks: Mapping[str, Check], metrics: Callable[[], str] | None = None):
        self.what = what
        self.checks = dict(checks)
        self.metrics = metrics

    def health(self, check: str = "") -> tuple[bool, str]:
        """The named check's health, or (with "") every check's, failing reasons joined by "; "."""
        failing = []
        for name, probe in self.checks.items():
            if check in ("", name):
                ok, why = probe()
                if not ok:
                    failing.append(why)
        return (False, "; ".join(failing)) if failing else (True, "ok")

    def answer(self, path: str) -> tuple[str, str, str]:
        """(HTTP status, content type, body) for a request path."""
        path = path.split("?")[0]
        if path == "/metrics" and self.metrics is not None:
            return "200 OK", "text/plain; version=0.0.4", self.metrics()
        if path == "/healthz" or (path.startswith("/healthz/") and path[9:] in self.checks):
            ok, why = self.health(path[9:])
            return (
                ("200 OK", "text/plain", "ok\n")
                if ok
                else ("500 Internal Server Error", "text/plain", why + "\n")
            )
        return "404 Not Found", "text/plain", "not found\n"

    async def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve until cancelled."""

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                request = await asyncio.wait_for(reader.readline(), 5)
                parts = request.decode(errors="replace").split()
                status, content_type, body = self.answer(parts[1] if len(parts) >= 2 else "")
                data = body.encode()
                writer.write(
                    f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
                    "Connection: close\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
            except (TimeoutError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(handle, host, port)
        async with server:
            await server.serve_forever()

    async def watch(self, period_s: float = 5.0) -> None:
        """Log each change of health, so an operator sees a stuck runtime, watch or broker."""
        healthy: bool | None = None
        while True:
            await asyncio.sleep(period_s)
            ok, why = self.health()
            if ok != healthy:
                (log.info if ok else log.warning)(
                    "%s: %s", self.what, "healthy" if ok else f"unhealthy: {why}"
                )
                healthy = ok
