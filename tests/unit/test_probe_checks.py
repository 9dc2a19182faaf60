"""The probe handlers against real endpoints on loopback, and one Prober end to end
(docs/kubelet-rules.md, "Running a probe").

An HTTP(S) server in a thread, listening and closed TCP ports, local processes for exec, and an in-process
grpc.aio server implementing grpc.health.v1.Health with a generic handler: nothing is mocked.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from podledger.agents.prober import CheckResult, Prober
from podledger.agents.prober.checks import run_check
from podledger.agents.prober.exec_check import exec_check
from podledger.agents.prober.grpc_check import grpc_check
from podledger.agents.prober.grpc_health import decode_health_response, encode_health_request
from podledger.agents.prober.http_check import http_get_check
from podledger.agents.prober.specs import expand_command, resolve_port
from podledger.agents.prober.tcp_check import tcp_check
from podledger.local import free_port
from podledger.schemas import decode, encode, models
from podledger.streams.status import rfc3339
from podledger.types import ProbeResult, ProbeType
from tests import pods
from tests.support.processes import wait_for_async

# A self-signed certificate for the HTTPS case (probes never verify certificates).
TEST_CERT = """-----BEGIN CERTIFICATE-----
MIIBiTCCAS+gAwIBAgIUNuKaVfgGHtMF+n+2xzWcayb5RiQwCgYIKoZIzj0EAwIw
GTEXMBUGA1UEAwwOcG9kbGVkZ2VyLXRlc3QwIBcNMjYxMTIxMjA1NDAxWhgPMjEy
NjEwMjgyMDU0MDFaMBkxFzAVBgNVBAMMDnBvZGxlZGdlci10ZXN0MFkwEwYHKoZI
zj0CAQYIKoZIzj0DAQcDQgAE+ok22TB1wFX9fxqv1H3LJWzHctH+68RD6tKHlhUq
oG35Lvq+JEZWK8WJGURgy1eB9UD2p1vx0rggCJJpShwZzqNTMFEwHQYDVR0OBBYE
FLYAdsmp5JzIVqZmwds6dmxDOk4vMB8GA1UdIwQYMBaAFLYAdsmp5JzIVqZmwds6
dmxDOk4vMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAJ85/ySt
i71dtkPSlW8BUNTOEtc2DA7xb11mSjsDC/a9AiACHqQS7XAW4dj2yQXM5p2XtgyJ
0pmeRnJjrQTLcpny+Q==
-----END CERTIFICATE-----
"""
TEST_KEY = """-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgAdvGty0wPv5aDmQA
F8fqvSpl7Bh84QHrDLpCgWjRkQuhRANCAAT6iTbZMHXAVf1/Gq/UfcslbMdy0f7r
xEPq0oeWFSqgbfku+r4kRlYrxYkZRGDLV4H1QPanW/HSuCAIkmlKHBnO
-----END PRIVATE KEY-----
"""


class Handler(BaseHTTPRequestHandler):
    """Paths: /ok 200, /fail 500, /slow 200 after 1.5 s, /headers and /host check the request,
    /flip answers with the server's `flip_status`, /redirect-* redirect."""

    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.requests.append((self.path, dict(self.headers.items())))
        port = self.server.server_address[1]
        if self.path == "/ok":
            self._answer(200, b"fine")
        elif self.path == "/fail":
            self._answer(500, b"secret body")
        elif self.path == "/slow":
            time.sleep(1.5)
            self._answer(200)
        elif self.path == "/headers":
            ok = (
                self.headers.get("X-Custom") == "v1"
                and self.headers.get("User-Agent", "").startswith("kube-probe/")
                and self.headers.get("Accept") == "*/*"
                and "Accept-Encoding" not in self.headers
            )
            self._answer(200 if ok else 400)
        elif self.path == "/host":
            self._answer(200 if self.headers.get("Host") == "example.test" else 400)
        elif self.path == "/flip":
            self._answer(self.server.flip_status)
        elif self.path == "/redirect-same":
            self._answer(302, headers={"Location": "/ok"})
        elif self.path == "/redirect-other-host":
            self._answer(302, b"moved", headers={"Location": f"http://localhost:{port}/ok"})
        elif self.path == "/redirect-loop":
            self._answer(302, headers={"Location": "/redirect-loop"})
        else:
            self._answer(404)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.flip_status = 200

    @property
    def port(self) -> int:
        return int(self.server_address[1])


def _serve(server: Server) -> Iterator[Server]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def http_server() -> Iterator[Server]:
    yield from _serve(Server())


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[Server]:
    (tmp_path / "cert.pem").write_text(TEST_CERT)
    (tmp_path / "key.pem").write_text(TEST_KEY)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = Server()
    server.socket = context.wrap_socket(server.socket, server_side=True)
    yield from _serve(server)


# --------------------------------------------------------------------------- httpGet


def http(server: Server, path: str, **kwargs: Any) -> Any:
    return asyncio.run(http_get_check(f"http://127.0.0.1:{server.port}{path}", **kwargs))


def test_http_200_is_success(http_server: Server) -> None:
    outcome = http(http_server, "/ok")
    assert (outcome.result, outcome.output, outcome.error) == (CheckResult.SUCCESS, "fine", None)


def test_http_500_is_failure_without_the_body(http_server: Server) -> None:
    outcome = http(http_server, "/fail")
    assert (outcome.result, outcome.output) == (CheckResult.FAILURE, "HTTP probe failed with statuscode: 500")


def test_http_slow_answer_times_out_as_failure(http_server: Server) -> None:
    started = time.monotonic()
    outcome = http(http_server, "/slow", timeout_s=0.3)
    assert outcome.result == CheckResult.FAILURE and outcome.error is None
    assert "Client.Timeout exceeded" in outcome.output
    assert time.monotonic() - started < 1.2


def test_http_headers_reach_the_server(http_server: Server) -> None:
    outcome = http(http_server, "/headers", headers=[{"name": "X-Custom", "value": "v1"}])
    assert outcome.result == CheckResult.SUCCESS
    assert http(http_server, "/headers").result == CheckResult.FAILURE  # the server insists on X-Custom
    assert (
        http(http_server, "/host", headers=[{"name": "Host", "value": "example.test"}]).result
        == CheckResult.SUCCESS
    )


def test_http_empty_accept_header_removes_it(http_server: Server) -> None:
    http(http_server, "/ok", headers=[{"name": "Accept", "value": ""}, {"name": "User-Agent", "value": "me"}])
    _, headers = http_server.requests[-1]
    assert "Accept" not in headers and headers["User-Agent"] == "me"


def test_http_redirects(http_server: Server) -> None:
    same = http(http_server, "/redirect-same")
    assert (same.result, same.output) == (CheckResult.SUCCESS, "fine")  # followed to /ok
    other = http(http_server, "/redirect-other-host")
    assert (other.result, other.output) == (
        CheckResult.WARNING,
        "Probe terminated redirects, Response body: moved",
    )
    assert [path for path, _ in http_server.requests].count("/ok") == 1  # the other host was not visited
    loop = http(http_server, "/redirect-loop")
    assert loop.result == CheckResult.FAILURE and "stopped after 10 redirects" in loop.output
    assert [path for path, _ in http_server.requests].count("/redirect-loop") == 10


def test_http_connection_refused_is_failure() -> None:
    outcome = asyncio.run(http_get_check(f"http://127.0.0.1:{free_port()}/ok"))
    assert outcome.result == CheckResult.FAILURE and outcome.error is None and outcome.output


def test_https_does_not_verify_certificates(https_server: Server) -> None:
    spec = {"httpGet": {"scheme": "HTTPS", "port": https_server.port, "path": "/ok"}}
    outcome = asyncio.run(run_check(spec, {"name": "c"}))
    assert (outcome.result, outcome.output) == (CheckResult.SUCCESS, "fine")


def test_http_named_port_from_the_container(http_server: Server) -> None:
    container = {"name": "web", "ports": [{"name": "http", "containerPort": http_server.port}]}
    spec = {"httpGet": {"port": "http", "path": "ok"}, "timeoutSeconds": 1}
    assert asyncio.run(run_check(spec, container)).result == CheckResult.SUCCESS
    missing = asyncio.run(run_check({"httpGet": {"port": "metrics"}}, container))
    assert (missing.result, missing.error) == (
        CheckResult.UNKNOWN,
        "port metrics not found",
    )  # an error: retried


def test_resolve_port() -> None:
    container = {"ports": [{"name": "web", "containerPort": 8080}]}
    assert resolve_port("web", container) == 8080
    assert resolve_port("9090", container) == 9090  # an int spelled as a string
    assert resolve_port(80, None) == 80
    for bad in (0, 70000, "nope"):
        with pytest.raises(ValueError):
            resolve_port(bad, container)


# --------------------------------------------------------------------------- tcpSocket


def test_tcp_listening_port_is_success_and_closed_port_failure() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert asyncio.run(tcp_check("127.0.0.1", port)).result == CheckResult.SUCCESS
        named = {"tcpSocket": {"port": "db"}}
        assert (
            asyncio.run(run_check(named, {"ports": [{"name": "db", "containerPort": port}]})).result
            == CheckResult.SUCCESS
        )
    closed = asyncio.run(tcp_check("127.0.0.1", free_port()))
    assert closed.result == CheckResult.FAILURE and closed.error is None
    assert "refused" in closed.output.lower()


# --------------------------------------------------------------------------- exec


def test_exec_exit_codes() -> None:
    assert asyncio.run(exec_check(["true"])).result == CheckResult.SUCCESS
    assert asyncio.run(exec_check(["false"])).result == CheckResult.FAILURE
    outcome = asyncio.run(exec_check(["sh", "-c", "echo hello; exit 3"]))
    assert (outcome.result, outcome.output) == (CheckResult.FAILURE, "hello\n")


def test_exec_timeout_is_failure() -> None:
    started = time.monotonic()
    outcome = asyncio.run(run_check({"exec": {"command": ["sleep", "5"]}, "timeoutSeconds": 1}))
    assert (outcome.result, outcome.output, outcome.error) == (
        CheckResult.FAILURE,
        'command "sleep 5" timed out',
        None,
    )
    assert time.monotonic() - started < 2.5


def test_exec_uses_the_container_env() -> None:
    container = {"name": "c", "env": [{"name": "GREETING", "value": "hi"}]}
    shell = {"exec": {"command": ["sh", "-c", 'test "$GREETING" = hi']}}
    assert asyncio.run(run_check(shell, container)).result == CheckResult.SUCCESS
    assert asyncio.run(run_check(shell, {"name": "c"})).result == CheckResult.FAILURE
    expanded = {"exec": {"command": ["test", "$(GREETING)", "=", "hi"]}}  # $(VAR) expansion, as upstream
    assert asyncio.run(run_check(expanded, container)).result == CheckResult.SUCCESS


def test_expand_command() -> None:
    env = [{"name": "A", "value": "x"}, {"name": "B", "valueFrom": {"fieldRef": {}}}]
    assert expand_command(["$(A)", "$(B)", "$$(A)", "$(C)", "a$", "$(A"], env) == [
        "x",
        "$(B)",
        "$(A)",
        "$(C)",
        "a$",
        "$(A",
    ]


def test_exec_missing_binary_is_an_error() -> None:
    outcome = asyncio.run(exec_check(["/nonexistent/probe-binary"]))
    assert outcome.result == CheckResult.UNKNOWN and outcome.error is not None


# --------------------------------------------------------------------------- grpc


HEALTH = {"": 1, "good": 1, "bad": 2}  # service -> ServingStatus (1 SERVING, 2 NOT_SERVING)


def _read_service(request: bytes) -> str:
    # HealthCheckRequest{string service = 1}: tag 0x0a, one-byte length for these short names
    return request[2:].decode() if request else ""


async def _check(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    service = _read_service(request)
    if service not in HEALTH:
        await context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
    return b"\x08" + bytes([HEALTH[service]])


async def _with_grpc_server(body: Any, *, health: bool = True) -> None:
    server = grpc.aio.server()
    if health:
        handler = grpc.unary_unary_rpc_method_handler(_check)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": handler}),)
        )
    else:
        echo = grpc.unary_unary_rpc_method_handler(_check)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("other.Service", {"Echo": echo}),)
        )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        await body(port)
    finally:
        await server.stop(None)


def test_grpc_health_serving_and_not_serving() -> None:
    async def body(port: int) -> None:
        assert (await grpc_check("127.0.0.1", port, service="good")).result == CheckResult.SUCCESS
        assert (await grpc_check("127.0.0.1", port)).result == CheckResult.SUCCESS  # the server as a whole
        bad = await grpc_check("127.0.0.1", port, service="bad")
        assert (bad.result, bad.output) == (
            CheckResult.FAILURE,
            'service unhealthy (responded with "NOT_SERVING")',
        )
        unknown = await grpc_check("127.0.0.1", port, service="nope")
        assert unknown.result == CheckResult.FAILURE and "code = NotFound" in unknown.output
        via_spec = await run_check({"grpc": {"port": port, "service": "bad"}, "timeoutSeconds": 1})
        assert via_spec.result == CheckResult.FAILURE

    asyncio.run(_with_grpc_server(body))


def test_grpc_without_health_service_is_failure() -> None:
    async def body(port: int) -> None:
        outcome = await grpc_check("127.0.0.1", port)
        assert outcome.result == CheckResult.FAILURE
        assert outcome.output.startswith("error: this server does not implement the grpc health protocol")

    asyncio.run(_with_grpc_server(body, health=False))


def test_grpc_nothing_listening_times_out_as_failure() -> None:
    started = time.monotonic()
    outcome = asyncio.run(grpc_check("127.0.0.1", free_port(), timeout_s=0.3))
    assert outcome.result == CheckResult.FAILURE and outcome.output.startswith(
        "timeout: failed to connect service"
    )
    assert time.monotonic() - started < 2


def test_health_messages_round_trip() -> None:
    assert encode_health_request("") == b""
    assert encode_health_request("good") == b"\x0a\x04good"
    assert decode_health_response(b"\x08\x02") == 2
    assert decode_health_response(b"") == 0
    assert decode_health_response(b"\x12\x01x\x08\x01") == 1  # unknown fields are skipped
    with pytest.raises(ValueError):
        decode_health_response(b"\x08")


# --------------------------------------------------------------------------- a Prober end to end


def test_prober_end_to_end_against_a_flipping_http_server(http_server: Server) -> None:
    """Readiness against a real server: the initial Failure (a new container ID), then one change per
    flip, and nothing for the many unchanged probes in between."""
    web = pods.container(
        "web",
        ports=[{"name": "http", "containerPort": http_server.port}],
        readinessProbe={
            "httpGet": {"port": "http", "path": "/flip"},
            "periodSeconds": 0.05,
            "failureThreshold": 1,
        },
    )
    pod = pods.pod([web], name="web", uid="e2e-uid")
    status = {**running_for_5s("web", "process://e2e"), "podIP": "127.0.0.1"}
    published: list[models.ProbeResult] = []

    async def publish(change: models.ProbeResult) -> None:
        published.append(decode("probe-results", encode(change)))

    async def wait_for(count: int) -> None:
        await wait_for_async(
            lambda: len(published) >= count, timeout=3.0, what=f"{count} published", interval=0.01
        )

    async def probe_requests(extra: int) -> None:
        target = len(http_server.requests) + extra
        while len(http_server.requests) < target:
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        prober = Prober("node-e2e", publish)
        prober.update_status("e2e-uid", status)
        prober.add_pod(pod)
        await wait_for(2)
        await probe_requests(3)  # more probes, still 200: nothing new
        assert len(published) == 2
        http_server.flip_status = 503
        await wait_for(3)
        await probe_requests(3)
        http_server.flip_status = 200
        await wait_for(4)
        await prober.close()
        assert prober.result(ProbeType.READINESS, "process://e2e") is None  # removed on exit, silently

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert [(p.probe, p.result) for p in published] == [
        (ProbeType.READINESS, ProbeResult.FAILURE),
        (ProbeType.READINESS, CheckResult.SUCCESS),
        (ProbeType.READINESS, ProbeResult.FAILURE),
        (ProbeType.READINESS, CheckResult.SUCCESS),
    ]
    assert {(p.uid, p.node, p.container_name, p.container_id) for p in published} == {
        ("e2e-uid", "node-e2e", "web", "process://e2e")
    }


def running_for_5s(name: str, container_id: str) -> dict[str, Any]:
    """A pod API status with one container running and started for 5 s, not ready yet."""
    return {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": name,
                "containerID": container_id,
                "state": {"running": {"startedAt": rfc3339(time.time() - 5)}},
                "started": True,
                "ready": False,
            }
        ],
    }


def test_stop_interrupts_the_wait_between_probes() -> None:
    """stop() is honoured at once even with a long period."""

    async def scenario() -> float:
        prober = Prober("node-1")
        pod = pods.pod([pods.container("c", livenessProbe={"exec": {"command": ["true"]}})], uid="u")
        prober.add_pod(pod)
        await asyncio.sleep(0.05)
        started = time.monotonic()
        prober.stop()
        await prober.close()
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 0.5


@pytest.mark.skipif(os.geteuid() != 0, reason="switching uid needs a root agent (CI runs as root)")
def test_an_exec_probe_runs_as_its_container_and_cannot_read_the_agents_environment() -> None:
    """An exec probe runs commands from the pod spec: a root agent runs it as the container runs
    (runAsUser/runAsGroup, else 65534), never as root, so it cannot read the agent's environ."""
    mine = f"/proc/{os.getpid()}/environ"

    def check(script: str, context: dict[str, Any] | None = None) -> CheckResult:
        probe = {"exec": {"command": ["sh", "-c", script]}, "timeoutSeconds": 5}
        container = {"name": "main", **({"securityContext": context} if context else {})}
        return asyncio.run(run_check(probe, container)).result

    assert check('test "$(id -u):$(id -g)" = 65534:65534 && test -z "$(id -G | tr -d 65534)"') == (
        CheckResult.SUCCESS
    )
    assert check('test "$(id -u):$(id -g)" = 1234:2345', {"runAsUser": 1234, "runAsGroup": 2345}) == (
        CheckResult.SUCCESS
    )
    assert check(f"cat {mine} >/dev/null 2>&1") == CheckResult.FAILURE
    assert check(f"cat {mine} >/dev/null 2>&1", {"runAsUser": 0}) == CheckResult.SUCCESS  # asked for root


@pytest.mark.parametrize(
    ("pod_context", "own_context", "ids"),
    [
        ({}, {}, (1234, 2345)),  # the pod sets nothing: the runtime's configured defaults
        ({"runAsUser": 1111}, {}, (1111, 2345)),
        ({"runAsUser": 1111, "runAsGroup": 2222}, {"runAsGroup": 3333}, (1111, 3333)),
        ({}, {"runAsUser": 0}, (0, 2345)),  # asked for root, as the runtime starts it
    ],
)
def test_exec_probes_run_as_the_runtime_starts_the_container(
    pod_context: dict[str, Any], own_context: dict[str, Any], ids: tuple[int, int]
) -> None:
    """The ids an exec probe gets are the container's, merged as the process runtime merges them,
    with the operator's runtime defaults (not a fixed 65534) where the pod sets none."""
    from podledger.agents.prober.manager import with_run_as
    from podledger.agents.runtime.process_spec import requested_ids

    container = pods.container("c", securityContext=own_context)
    pod = pods.pod([container], securityContext=pod_context) if pod_context else pods.pod([container])
    context = with_run_as(pod, container, (1234, 2345))["securityContext"]
    assert (context["runAsUser"], context["runAsGroup"]) == ids
    uid, gid = requested_ids(pod, container)
    assert (uid if uid is not None else 1234, gid if gid is not None else 2345) == ids


@pytest.mark.skipif(os.geteuid() != 0, reason="switching uid needs a root agent (CI runs as root)")
def test_a_prober_runs_exec_probes_as_the_runtimes_configured_default_user() -> None:
    """An operator who sets PODLEDGER_RUNTIME_DEFAULT_UID/_GID has containers run as those ids; their
    exec probes, run by the same root agent, must run as the same ids, not as another user."""
    script = 'test "$(id -u):$(id -g)" = 1234:2345'
    probe = {"exec": {"command": ["sh", "-c", script]}, "periodSeconds": 0.05, "failureThreshold": 1}
    pod = pods.pod([pods.container("c", readinessProbe=probe)], uid="run-as-uid")
    status = running_for_5s("c", "process://run-as")
    published: list[models.ProbeResult] = []

    async def publish(change: models.ProbeResult) -> None:
        published.append(change)

    async def scenario() -> None:
        prober = Prober("node-1", publish, default_run_as=(1234, 2345))
        prober.update_status("run-as-uid", status)
        prober.add_pod(pod)
        await wait_for_async(
            lambda: any(p.result == CheckResult.SUCCESS for p in published), timeout=5.0, what="ready"
        )
        await prober.close()

    asyncio.run(scenario())
