"""`run_check`, one attempt of whichever probe handler a spec sets, and `execute_probe`, which retries an
attempt while it errors.

The handlers (modules `exec_check`, `http_check`, `tcp_check`, `grpc_check`) answer with a `CheckOutcome`.
Only an error makes the prober retry the attempt and, if it persists, throw the result away; everything
the target itself can get wrong (refused connections, timeouts, bad status codes, non-zero exits) is a
plain Failure, as in pkg/probe/{exec,http,tcp,grpc}.

Containers of the process runtime are local processes sharing the host network, so exec commands run
here with the container's env and working directory, and network probes dial the pod IP (loopback).

What a probe target answers (an exec command's output, a redirect's body) may hold anything, a dumped
configuration or a token included: `run_check` logs it at debug level only, and the outcome it returns,
which becomes the event message, says what happened without it. Messages name a command as the spec
wrote it, before $(VAR) expansion, so env values do not reach the logs either.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from podledger.agents.prober.exec_check import run_exec
from podledger.agents.prober.grpc_check import grpc_check
from podledger.agents.prober.http_check import REDIRECT_WARNING, http_get_check
from podledger.agents.prober.results import CheckOutcome, CheckResult
from podledger.agents.prober.specs import DEFAULT_TIMEOUT_S, join_host_port, probe_spec, resolve_port
from podledger.agents.prober.tcp_check import tcp_check
from podledger.agents.prober.worker import ProbeVerdict, verdict_for
from podledger.agents.runtime.process_spec import POD_IP
from podledger.types import ProbeResult, ProbeType

CheckFn = Callable[..., Awaitable[CheckOutcome]]

log = logging.getLogger(__name__)

MAX_PROBE_RETRIES = 3  # attempts per probe, repeated only while the attempt errors


def _without_output(outcome: CheckOutcome, container: Mapping[str, Any], summary: str) -> CheckOutcome:
    """The outcome with the target's own output replaced by `summary`; that output goes to the debug log,
    and only for a failure or a warning (a success's output is never shown)."""
    if outcome.output and outcome.result != CheckResult.SUCCESS:
        log.debug("probe of container %s: %s; its output: %s", container.get("name"), summary, outcome.output)
    return CheckOutcome(outcome.result, summary, outcome.error)


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
        outcome, status = await run_exec(
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
        if outcome.result == CheckResult.WARNING and outcome.output.startswith(REDIRECT_WARNING):
            return _without_output(outcome, container, REDIRECT_WARNING)
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
