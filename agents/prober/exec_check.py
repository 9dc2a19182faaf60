"""The exec probe handler (pkg/probe/exec): one attempt of a command, bounded by timeoutSeconds.

Containers of the process runtime are local processes, so the command runs here with the container's
env and working directory, in a process group of its own that is killed whole when it times out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from podledger.agents.prober.handler_constants import MAX_OUTPUT_BYTES
from podledger.agents.prober.results import CheckOutcome, CheckResult
from podledger.agents.prober.specs import DEFAULT_TIMEOUT_S, expand_command
from podledger.agents.runtime.process_spec import DEFAULT_PATH, DEFAULT_RUN_AS_ID


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
    outcome, _ = await run_exec(command, env=env, cwd=cwd, timeout_s=timeout_s)
    return outcome


async def run_exec(
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


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command and everything it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


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
