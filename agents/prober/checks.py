"""The four probe handlers (exec, httpGet, tcpSocket, grpc), each one attempt bounded by timeoutSeconds,
and `execute_probe`, which retries an attempt while it errors.

A handler answers with a `CheckOutcome`. Only an error makes the prober retry the attempt and, if it
persists, throw the result away; everything the target itself can get wrong (refused connections,
timeouts, bad status codes, non-zero exits) is a plain Failure, as in pkg/probe/{exec,http,tcp,grpc}.

Containers of the process runtime are local processes sharing the host network, so exec commands run
here with the container's env and working directory, and network probes dial the pod IP (loopback).

What a probe target answers (an exec command's output, a redirect's body) may hold anything, a dumped
configuration or a token included: `run_check` logs it at debug level only, and the outcome it returns,
which becomes the event message, says what happened without it. Messages name a command as the spec
wrote it, before $(VAR) expansion, so env values do not reach the logs either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
import grpc
import grpc.aio

from podledger.agents.prober.grpc_health import (
    HEALTH_CHECK_METHOD,
    SERVING,
    SERVING_STATUS_NAMES,
    decode_health_response,
    encode_health_request,
)
from podledger.agents.prober.results import CheckOutcome, CheckResult
from podledger.agents.prober.specs import (
    DEFAULT_TIMEOUT_S,
    expand_command,
    join_host_port,
    probe_spec,
    resolve_port,
)
from podledger.agents.prober.worker import ProbeVerdict, verdict_for
from podledger.agents.runtime.process_spec import DEFAULT_PATH, DEFAULT_RUN_AS_ID, POD_IP
from podledger.agents.worker.lifecycle import format_go_duration
from podledger.types import ProbeResult, ProbeType

CheckFn = Callable[..., Awaitable[CheckOutcome]]

log = logging.getLogger(__name__)

MAX_PROBE_RETRIES = 3  # attempts per probe, repeated only while the attempt errors
MAX_OUTPUT_BYTES = 10 * 1024  # exec output and HTTP bodies are cut at 10 KiB, as upstream
MAX_REDIRECTS = 10
USER_AGENT = "kube-probe/podledger"  # applications match the "kube-probe/" prefix
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_REDIRECT_WARNING = "Probe terminated redirects"


async def exec_check(
    command: Sequence[str],
    *,
    env: Sequence[Mapping[str, Any]] | None = None,
    cwd: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CheckOutcome:
    """Run the command as a local process with the container's env: exit 0 is Success, else Failure.

    Past the timeout the whole process group is killed and the probe fails with "command ... timed out"
    (upstream's behaviour with ExecProbeTimeout on). A command that cannot be started at all is an
    error, as containerd reports a failed exec, so the prober retries and then discards it.
    """
    outcome, _ = await _run_exec(command, env=env, cwd=cwd, timeout_s=timeout_s)
    return outcome


async def _run_exec(
    command: Sequence[str],
    *,
    env: Sequence[Mapping[str, Any]] | None,
    cwd: str | None,
    timeout_s: float,
    run_as: Mapping[str, Any] | None = None,
) -> tuple[CheckOutcome, int | None]:
    """`exec_check`'s outcome, plus the command's exit status when it ran to its end (None otherwise)."""
    argv = expand_command(command, env)
    if not argv:
        return CheckOutcome.errored("exec probe has no command"), None
    shown = json.dumps(" ".join(str(part) for part in command))  # as written: no expanded env values
    environ = {"PATH": os.environ.get("PATH") or DEFAULT_PATH}
    for item in env or []:
        environ[str(item["name"])] = str(item.get("value") or "")
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=environ,
            cwd=cwd or None,
            start_new_session=True,
            **_run_as_options(run_as),
        )
    except OSError as e:
        return CheckOutcome.errored(f"failed to exec {shown}: {e}"), None
    output = bytearray()

    async def collect() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            room = MAX_OUTPUT_BYTES - len(output)
            if room > 0:
                output.extend(chunk[:room])
        await proc.wait()

    try:
        async with asyncio.timeout(timeout_s):
            await collect()
    except TimeoutError:
        _kill_group(proc)
        await proc.wait()
        return CheckOutcome.failed(f"command {shown} timed out"), None
    except BaseException:  # cancelled: leave no process behind
        _kill_group(proc)
        raise
    text = output.decode(errors="replace")
    result = CheckResult.SUCCESS if proc.returncode == 0 else CheckResult.FAILURE
    return CheckOutcome(result, text), proc.returncode


def _without_output(outcome: CheckOutcome, container: Mapping[str, Any], summary: str) -> CheckOutcome:
    """The outcome with the target's own output replaced by `summary`; that output goes to the debug log,
    and only for a failure or a warning (a success's output is never shown)."""
    if outcome.output and outcome.result != CheckResult.SUCCESS:
        log.debug("probe of container %s: %s; its output: %s", container.get("name"), summary, outcome.output)
    return CheckOutcome(outcome.result, summary, outcome.error)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command and everything it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _request_headers(
    http_headers: Sequence[Mapping[str, Any]] | None,
) -> tuple[list[tuple[str, str]], set[str]]:
    """The probe's headers with upstream's defaults: User-Agent kube-probe/..., Accept */* unless given.

    An Accept header given with an empty value removes Accept altogether. Returns (headers, names aiohttp
    must not add by itself).
    """
    headers = [(str(h["name"]), str(h.get("value") or "")) for h in http_headers or []]
    names = {name.lower() for name, _ in headers}
    if "user-agent" not in names:
        headers.append(("User-Agent", USER_AGENT))
    skip = {"Accept-Encoding", "User-Agent"}  # no compression negotiation, like the kubelet's transport
    if "accept" not in names:
        headers.append(("Accept", "*/*"))
    elif not any(value for name, value in headers if name.lower() == "accept"):
        headers = [(name, value) for name, value in headers if name.lower() != "accept"]
        skip.add("Accept")
    return headers, skip


async def http_get_check(
    url: str,
    *,
    headers: Sequence[Mapping[str, Any]] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CheckOutcome:
    """GET the URL: 2xx is Success, 3xx Warning, anything else (or no answer in time) Failure.

    Certificates are not verified. Redirects to the same host name are followed (at most 10, counting
    as in Go's client); a redirect elsewhere is not followed, and the 3xx itself answers as a Warning.
    The timeout covers the whole exchange, redirects and the first 10 KiB of body included.
    """
    request_headers, skip = _request_headers(headers)
    host_header = next((v for n, v in request_headers if n.lower() == "host"), "")
    first_host = urlsplit(url).hostname
    connector = aiohttp.TCPConnector(ssl=False, force_close=True)
    try:
        async with (
            asyncio.timeout(timeout_s),
            aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=False) as session,
        ):
            current, followed = url, 0
            while True:
                async with session.get(
                    current,
                    headers=request_headers,
                    skip_auto_headers=skip,
                    allow_redirects=False,
                ) as response:
                    status = response.status
                    location = response.headers.get("Location")
                    if status in _REDIRECT_CODES and location:
                        target = urljoin(current, location)
                        if urlsplit(target).hostname == first_host:
                            followed += 1
                            if followed >= MAX_REDIRECTS:
                                return CheckOutcome.failed(
                                    f'Get "{target}": stopped after {MAX_REDIRECTS} redirects'
                                )
                            if host_header and urlsplit(location).scheme:
                                # like Go: a custom Host header survives relative redirects only
                                request_headers = [(n, v) for n, v in request_headers if n.lower() != "host"]
                                host_header = ""
                            current = target
                            continue
                    try:
                        body = (await _read_at_most(response.content, MAX_OUTPUT_BYTES)).decode(
                            errors="replace"
                        )
                    except (aiohttp.ClientError, OSError) as e:
                        error = f"reading the response body of {current}: {e}"
                        return CheckOutcome(CheckResult.FAILURE, "", error)
                    if 200 <= status < 300:
                        return CheckOutcome(CheckResult.SUCCESS, body)
                    if 300 <= status < 400:
                        warning = f"{_REDIRECT_WARNING}, Response body: {body}"
                        return CheckOutcome(CheckResult.WARNING, warning)
                    # never put the body in a failure message (upstream issue 99425)
                    return CheckOutcome.failed(f"HTTP probe failed with statuscode: {status}")
    except TimeoutError:
        return CheckOutcome.failed(
            f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
        )
    except (aiohttp.ClientError, OSError, ValueError) as e:
        return CheckOutcome.failed(f'Get "{url}": {e}')


async def _read_at_most(stream: aiohttp.StreamReader, limit: int) -> bytes:
    data = bytearray()
    while len(data) < limit:
        chunk = await stream.read(limit - len(data))
        if not chunk:
            break
        data.extend(chunk)
    return bytes(data)


async def tcp_check(host: str, port: int, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> CheckOutcome:
    """Open a TCP connection and close it at once: connected is Success, anything else Failure."""
    address = join_host_port(host, port)
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return CheckOutcome.failed(f"dial tcp {address}: i/o timeout")
    except OSError as e:
        if e.errno and not isinstance(e, socket.gaierror):  # Go's wording: "connect: connection refused"
            return CheckOutcome.failed(f"dial tcp {address}: connect: {os.strerror(e.errno).lower()}")
        return CheckOutcome.failed(f"dial tcp {address}: {e}")
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return CheckOutcome(CheckResult.SUCCESS)


async def grpc_check(
    host: str, port: int, *, service: str = "", timeout_s: float = DEFAULT_TIMEOUT_S
) -> CheckOutcome:
    """Call grpc.health.v1.Health/Check over plaintext: SERVING is Success, everything else Failure.

    One deadline covers connecting and the call, as upstream's blocking dial plus RPC under one context.
    The messages are encoded by hand, so no generated protobuf code is needed.
    """
    address = join_host_port(host, port)
    timeout_text = format_go_duration(timeout_s)
    deadline = time.monotonic() + timeout_s
    async with grpc.aio.insecure_channel(
        address, options=[("grpc.primary_user_agent", USER_AGENT), ("grpc.enable_http_proxy", 0)]
    ) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout_s)
        except TimeoutError:
            return CheckOutcome.failed(
                f"timeout: failed to connect service {json.dumps(address)} within {timeout_text}: "
                "context deadline exceeded"
            )
        check = channel.unary_unary(HEALTH_CHECK_METHOD)
        try:
            reply = await check(
                encode_health_request(service), timeout=max(deadline - time.monotonic(), 0.001)
            )
        except grpc.aio.AioRpcError as e:
            code = e.code()
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return CheckOutcome.failed(
                    "error: this server does not implement the grpc health protocol "
                    f"(grpc.health.v1.Health): {e.details()}"
                )
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return CheckOutcome.failed(f"timeout: health rpc did not complete within {timeout_text}")
            detail = f"rpc error: code = {_go_code_name(code)} desc = {e.details()}"
            return CheckOutcome.failed(f"error: health rpc probe failed: {detail}")
        try:
            status = decode_health_response(bytes(reply))
        except ValueError as e:
            return CheckOutcome.failed(f"error: health rpc probe failed: {e}")
    if status != SERVING:
        name = SERVING_STATUS_NAMES.get(status, str(status))
        return CheckOutcome.failed(f"service unhealthy (responded with {json.dumps(name)})")
    return CheckOutcome(CheckResult.SUCCESS, "service healthy")


def _run_as_options(security_context: Mapping[str, Any] | None) -> dict[str, Any]:
    """A root agent runs an exec probe as its container runs (runAsUser/runAsGroup, else the
    unprivileged default), with no supplementary groups, so the command cannot reach the agent's
    credentials; an agent that is not root runs it as itself."""
    if os.geteuid() != 0:
        return {}
    context = security_context or {}
    user, group = context.get("runAsUser"), context.get("runAsGroup")
    return {
        "user": DEFAULT_RUN_AS_ID if user is None else int(user),
        "group": DEFAULT_RUN_AS_ID if group is None else int(group),
        "extra_groups": [],
    }


def _go_code_name(code: grpc.StatusCode) -> str:
    """grpc-go's spelling of a status code (NotFound, DeadlineExceeded, ...)."""
    return "".join(part.capitalize() for part in code.name.split("_")).replace("Ok", "OK")


async def run_check(
    probe: Mapping[str, Any], container: Mapping[str, Any] | None = None, *, host: str = POD_IP
) -> CheckOutcome:
    """One attempt of whichever handler the probe spec sets, with its timeoutSeconds (default 1s).

    `host` is the pod IP; httpGet and tcpSocket may name another host. A port that cannot be resolved or
    a spec without a handler is an error, which the caller retries and eventually discards.
    """
    container = container or {}
    timeout_s = float(probe.get("timeoutSeconds") or DEFAULT_TIMEOUT_S)
    if probe.get("exec") is not None:
        outcome, status = await _run_exec(
            list(probe["exec"].get("command") or []),
            env=container.get("env"),
            cwd=container.get("workingDir"),
            timeout_s=timeout_s,
            run_as=container.get("securityContext"),
        )
        if status is None:  # not run, or timed out: the outcome holds no output of the command's
            return outcome
        if status < 0:
            return _without_output(outcome, container, f"command was killed by signal {-status}")
        return _without_output(outcome, container, f"command exited with code {status}" if status else "")
    if probe.get("httpGet") is not None:
        action = probe["httpGet"]
        try:
            port = resolve_port(action.get("port"), container)
        except ValueError as e:
            return CheckOutcome.errored(str(e))
        scheme = str(action.get("scheme") or "HTTP").lower()
        target = join_host_port(str(action.get("host") or host), port)
        path = str(action.get("path") or "")
        if path and not path.startswith("/"):
            path = "/" + path
        outcome = await http_get_check(
            f"{scheme}://{target}{path}", headers=action.get("httpHeaders"), timeout_s=timeout_s
        )
        if outcome.result == CheckResult.WARNING and outcome.output.startswith(_REDIRECT_WARNING):
            return _without_output(outcome, container, _REDIRECT_WARNING)
        return outcome
    if probe.get("tcpSocket") is not None:
        action = probe["tcpSocket"]
        try:
            port = resolve_port(action.get("port"), container)
        except ValueError as e:
            return CheckOutcome.errored(str(e))
        return await tcp_check(str(action.get("host") or host), port, timeout_s=timeout_s)
    if probe.get("grpc") is not None:
        action = probe["grpc"]
        try:
            port = resolve_port(int(action.get("port") or 0), None)
        except (TypeError, ValueError) as e:
            return CheckOutcome.errored(str(e))
        return await grpc_check(host, port, service=str(action.get("service") or ""), timeout_s=timeout_s)
    return CheckOutcome.errored(f"missing probe handler for container {container.get('name', '')}")


async def execute_probe(
    probe_type: ProbeType, container: Mapping[str, Any], *, host: str = POD_IP, check: CheckFn = run_check
) -> ProbeVerdict:
    """Run the container's probe of this type, repeating the attempt only while it errors (at most 3)."""
    spec = probe_spec(container, probe_type)
    if spec is None:
        return ProbeVerdict(ProbeResult.SUCCESS)
    outcome = CheckOutcome.errored("probe was not attempted")
    for _ in range(MAX_PROBE_RETRIES):
        outcome = await check(spec, container, host=host)
        if outcome.error is None:
            break
    return verdict_for(probe_type, outcome)
