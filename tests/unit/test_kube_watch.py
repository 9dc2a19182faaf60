"""The apiserver pod watch: its timeouts and its health (agents/watch_policy.py), and a loop that no
failure ends (agents/pod_watch.py; docs/kubelet-rules.md, "The apiserver source"). The loop is driven
by a scripted client; the read timeout by a local HTTP server that goes silent mid-watch, as a
half-open connection does."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import orjson
import pytest
from kubernetes import client as k8s

from podledger.agents import pod_watch as pod_watch_module
from podledger.agents.kube import Kube
from podledger.agents.kube_client import KubeError
from podledger.agents.pod_watch import list_and_watch_pods
from podledger.agents.watch_policy import WatchHealth, watch_timeouts
from podledger.config import Settings
from podledger.errors import UserError
from podledger.types import JSONDict


def test_each_watch_asks_for_five_to_ten_minutes_and_reads_a_margin_longer() -> None:
    assert watch_timeouts(300, 0.0) == (300, 330.0)
    assert watch_timeouts(300, 0.999) == (599, 629.0)
    # Short timeouts (tests) keep a margin as long as the timeout itself.
    assert watch_timeouts(2, 0.0) == (2, 4.0) and watch_timeouts(2, 0.5) == (3, 5.0)


def test_watch_health_is_down_until_listed_and_after_a_failure_beyond_the_threshold() -> None:
    now = [100.0]
    health = WatchHealth(clock=lambda: now[0])
    assert health.healthy(105.0, 10.0) == (True, "ok")  # not listed yet, but not for long
    ok, why = health.healthy(111.0, 10.0)
    assert not ok and why.startswith("apiserver watch has yet to list pods (11s)")
    now[0] = 112.0
    health.listed = True
    health.up()
    assert health.healthy(500.0, 10.0) == (True, "ok") and health.last_heard == 112.0
    now[0] = 200.0
    health.down("0 watch interrupted: read timed out")
    now[0] = 205.0
    health.down("0 unreachable: connection refused")  # still down since 200
    assert health.healthy(209.0, 10.0) == (True, "ok")
    assert health.healthy(211.0, 10.0) == (
        False,
        "apiserver watch down for 11s: 0 unreachable: connection refused",
    )
    assert health.failures == 2


def test_the_threshold_setting_has_a_range() -> None:
    assert Settings.from_env(env={}, node="n").api_watch_down_s == 60.0
    assert Settings.from_env(env={"PODLEDGER_API_WATCH_DOWN_S": "2"}, node="n").api_watch_down_s == 2.0
    for bad in ("0", "3601"):
        with pytest.raises(
            UserError, match=r"PODLEDGER_API_WATCH_DOWN_S=\S+ is out of range: from 1 to 3600"
        ):
            Settings.from_env(env={"PODLEDGER_API_WATCH_DOWN_S": bad}, node="n")


# ---------------------------------------------------------------------------------------------------
# The loop, on a scripted client
# ---------------------------------------------------------------------------------------------------


def pod(uid: str, rv: str = "1") -> JSONDict:
    return {"metadata": {"uid": uid, "name": uid, "namespace": "default", "resourceVersion": rv}}


class ScriptedKube(Kube):
    """list_pods and watch_pods play a script; each step is a listing, a list of watch events, or an
    exception to raise (from a watch: after its events). The loop stops when the script ends."""

    def __init__(self, script: list[Any], stop: threading.Event) -> None:  # no apiserver at all
        self.script, self.stop = script, stop
        self.calls: list[str] = []
        self.resets = 0

    def _next(self, call: str) -> Any:
        self.calls.append(call)
        if not self.script:
            self.stop.set()
            return []
        return self.script.pop(0)

    def list_pods(self, **options: Any) -> JSONDict:
        step = self._next("list")
        if isinstance(step, BaseException):
            raise step
        return {"metadata": {"resourceVersion": step[0]}, "items": step[1]} if step else {}

    def watch_pods(self, **options: Any) -> Iterator[JSONDict]:  # type: ignore[override]
        step = self._next(f"watch@{options['resource_version']}")
        if isinstance(step, BaseException):
            raise step
        events, failure = (
            (step[:-1], step[-1]) if step and isinstance(step[-1], BaseException) else (step, None)
        )
        options["on_open"]()
        yield from events
        if failure is not None:
            raise failure

    def reset_watch_connections(self) -> None:
        self.resets += 1


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_watch_module, "WATCH_BACKOFF_FIRST_S", 0.001)
    monkeypatch.setattr(pod_watch_module, "WATCH_TOO_SHORT_S", 0.0)


def run_script(
    script: list[Any], on_event: Callable[[str, JSONDict], None] | None = None
) -> tuple[ScriptedKube, list[tuple[str, str]], WatchHealth]:
    stop = threading.Event()
    kube = ScriptedKube(script, stop)
    seen: list[tuple[str, str]] = []
    health = WatchHealth()

    def record(kind: str, obj: JSONDict) -> None:
        seen.append((kind, obj["metadata"]["uid"] if "metadata" in obj else ",".join(obj["uids"])))
        if on_event is not None:
            on_event(kind, obj)

    thread = threading.Thread(
        target=list_and_watch_pods,
        args=(kube, record, stop),
        kwargs={"health": health, "jitter": lambda: 0.0},
    )
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the loop did not stop with its script"
    return kube, seen, health


def test_no_failure_ends_the_watch_loop(fast_backoff: None) -> None:
    timed_out = KubeError(0, "watch interrupted", "Read timed out")
    script: list[Any] = [
        ("10", [pod("a")]),
        [timed_out],  # a half-open connection, noticed by the read timeout: resumed from rv 10
        [{"type": "ADDED", "object": pod("b", "11")}, ValueError("a handler bug")],  # relisted
        ("12", [pod("a"), pod("b")]),
        [
            {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
        ],  # relisted at once
        ("13", [pod("a"), pod("b")]),
        [{"object": {}}],  # no type: bad data, relisted
        RuntimeError("anything at all"),  # from the list itself
        ("14", [pod("b")]),
        [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}],  # ends normally
        [{"type": "ERROR", "object": {"code": 500, "reason": "InternalError", "message": "etcd"}}],  # resumed
        [{"type": "DELETED", "object": pod("b", "17")}],
    ]
    kube, seen, health = run_script(script)
    assert kube.calls == [
        "list",
        "watch@10",
        "watch@10",
        "list",
        "watch@12",
        "list",
        "watch@13",
        "list",
        "list",
        "watch@14",
        "watch@15",
        "watch@15",
        "watch@17",  # the script ends here
    ]
    assert seen == [
        ("LISTED", "a"),
        ("RELISTED", "a"),
        ("ADDED", "b"),
        ("LISTED", "a"),
        ("LISTED", "b"),
        ("RELISTED", "a,b"),
        ("LISTED", "a"),
        ("LISTED", "b"),
        ("RELISTED", "a,b"),
        ("LISTED", "b"),
        ("RELISTED", "b"),
        ("DELETED", "b"),
    ]
    # Every failure but the 410 restarted on fresh connections; the loop ends healthy.
    assert kube.resets == 5 and health.down_since is None and health.listed


def test_a_failing_handler_is_retried_from_a_new_list(fast_backoff: None) -> None:
    calls = {"n": 0}

    def flaky(kind: str, obj: JSONDict) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the event loop is busy")

    kube, seen, health = run_script([("1", [pod("a"), pod("b")]), ("2", [pod("a"), pod("b")])], flaky)
    # The listing was cut short by the handler: its resourceVersion is not used, the next list is.
    assert kube.calls == ["list", "list", "watch@2"]
    assert seen[-1] == ("RELISTED", "a,b") and health.failures == 0


def test_a_watch_that_ends_at_once_is_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_watch_module, "WATCH_BACKOFF_FIRST_S", 0.001)
    downs: list[str] = []
    original = WatchHealth.down
    monkeypatch.setattr(WatchHealth, "down", lambda self, error: (downs.append(error), original(self, error)))
    run_script([("1", []), [], []])
    assert downs and all("very short watch" in d for d in downs)


# ---------------------------------------------------------------------------------------------------
# The read timeout, on a real connection
# ---------------------------------------------------------------------------------------------------


class _Apiserver(http.server.BaseHTTPRequestHandler):
    """Lists one pod; each watch sends one event and then goes silent without closing, until
    `silent` is cleared (then it sends a second event and ends). Records each watch's client port."""

    protocol_version = "HTTP/1.1"
    silent = threading.Event()
    ports: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        if "watch=true" not in self.path:
            body = orjson.dumps({"metadata": {"resourceVersion": "5"}, "items": [pod("a", "5")]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        type(self).ports.append(self.client_address[1])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(orjson.dumps({"type": "ADDED", "object": pod(f"w{len(self.ports)}", "6")}) + b"\n")
        while self.silent.is_set():
            time.sleep(0.05)
        self._chunk(orjson.dumps({"type": "MODIFIED", "object": pod("a", "7")}) + b"\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def apiserver() -> Iterator[tuple[Kube, type[_Apiserver]]]:
    handler = type("Handler", (_Apiserver,), {"silent": threading.Event(), "ports": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{httpd.server_address[1]}"
    kube = Kube(k8s.ApiClient(configuration))
    try:
        yield kube, handler
    finally:
        handler.silent.clear()
        kube.close()
        httpd.shutdown()
        httpd.server_close()


def test_a_silent_watch_connection_fails_after_the_read_timeout(apiserver: tuple[Kube, Any]) -> None:
    kube, server = apiserver
    server.silent.set()
    events = kube.watch_pods(field_selector="", resource_version="5", timeout_seconds=1, read_timeout_s=0.5)
    assert next(events)["object"]["metadata"]["uid"] == "w1"
    started = time.monotonic()
    with pytest.raises(KubeError) as caught:
        next(events)
    assert caught.value.status == 0 and 0.4 < time.monotonic() - started < 3


def test_the_loop_notices_a_silent_connection_and_resumes_on_a_new_one(
    apiserver: tuple[Kube, Any], fast_backoff: None
) -> None:
    kube, server = apiserver
    server.silent.set()
    stop, health, seen = threading.Event(), WatchHealth(), []
    thread = threading.Thread(
        target=list_and_watch_pods,
        args=(
            kube,
            lambda kind, obj: seen.append((kind, obj["metadata"]["uid"]) if "metadata" in obj else kind),
            stop,
        ),
        kwargs={"watch_timeout_s": 1, "health": health, "jitter": lambda: 0.0},  # reads time out after 2 s
        daemon=True,
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while len(server.ports) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        # The silent connection was given up after the read timeout, and the watch opened again.
        assert len(server.ports) >= 2 and "watch interrupted" in health.error
        server.silent.clear()  # the server answers again
        while ("MODIFIED", "a") not in seen and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ("MODIFIED", "a") in seen and health.down_since is None
        assert seen[:3] == [("LISTED", "a"), "RELISTED", ("ADDED", "w1")]
        assert server.ports[1] != server.ports[0]  # restarted on a new connection, not the silent one
    finally:
        stop.set()
