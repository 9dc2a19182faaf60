"""ProcessRuntime with real processes: exit codes, logs, env/args/workingDir, stops, process groups, adoption.

Every test registers the process groups it starts, and teardown SIGKILLs them, so nothing leaks on failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from podledger import schemas
from podledger.agents.runtime.base import Runtime
from podledger.agents.runtime.process import ProcessRuntime
from podledger.local import alive
from podledger.types import JSONDict
from tests import pods

T = TypeVar("T")
PY = sys.executable
UID = "pod-1"
# These tests are about process lifecycles, not identities: the pod runs as the test's own user, so the
# interpreter and the test's temp dirs stay reachable (test_runtime_containment.py covers the identities).
POD = pods.pod(name="p", uid=UID, securityContext={"runAsUser": os.getuid(), "runAsGroup": os.getgid()})


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class Harness:
    """A runtime on a temp dir that remembers every process group it started, for teardown."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.pgids: list[int] = []
        self.rt = ProcessRuntime(state_dir)

    def start(self, container: JSONDict, attempt: int = 0) -> str:
        cid = run(self.rt.start_container(POD, container, attempt=attempt))
        _, pgid = self.rt.pids(UID, cid)
        assert pgid is not None
        self.pgids.append(pgid)
        return cid

    def status(self, cid: str) -> JSONDict:
        snap = self.rt.relist(time.time())[UID]
        return next(c for c in snap["containers"] if c["id"] == cid)

    def wait_exit(self, cid: str, timeout: float = 5.0) -> JSONDict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            c = self.status(cid)
            if c["state"] != "running":
                return c
            time.sleep(0.02)
        raise AssertionError(f"container {cid} still running after {timeout}s")


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path / "rt")
    run(harness.rt.create_sandbox(POD))
    yield harness
    for pgid in harness.pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def test_satisfies_runtime_protocol(h: Harness) -> None:
    assert isinstance(h.rt, Runtime)
    assert h.rt.runtime_type == "process"


def test_exit_code_reason_and_log(h: Harness) -> None:
    cid = h.start(
        {"name": "c", "image": "img:1", "command": [PY, "-c", "print('hello'); raise SystemExit(3)"]}
    )
    c = h.wait_exit(cid)
    assert (c["state"], c["exit_code"], c["reason"], c["image"]) == ("exited", 3, "Error", "img:1")
    assert c["started_at"] is not None and c["finished_at"] is not None
    log = h.rt.log_path(UID, cid)
    assert log == h.state_dir / UID / f"{cid}.log"
    assert log.read_text() == "hello\n"


def test_clean_exit_is_completed(h: Harness) -> None:
    c = h.wait_exit(h.start({"name": "c", "command": ["/bin/true"]}))
    assert (c["state"], c["exit_code"], c["reason"]) == ("exited", 0, "Completed")


def test_env_args_and_working_dir(h: Harness, tmp_path: Path) -> None:
    script = "import os, sys; print(os.environ['GREETING'], os.getcwd(), *sys.argv[1:])"
    cid = h.start(
        {
            "name": "c",
            "command": [PY, "-c", script],
            "args": ["a", "b"],
            "env": [{"name": "GREETING", "value": "hi"}],
            "workingDir": str(tmp_path),
        }
    )
    assert h.wait_exit(cid)["exit_code"] == 0
    assert h.rt.log_path(UID, cid).read_text().split() == ["hi", str(tmp_path), "a", "b"]  # type: ignore[union-attr]


def test_args_only_runs_args(h: Harness) -> None:
    cid = h.start({"name": "c", "args": ["/bin/sh", "-c", "exit 7"]})
    assert h.wait_exit(cid)["exit_code"] == 7


def test_start_error_is_recorded_and_raised(h: Harness) -> None:
    with pytest.raises(OSError):
        run(h.rt.start_container(POD, {"name": "c", "command": ["/nonexistent/bin"]}, attempt=0))
    (c,) = h.rt.relist(time.time())[UID]["containers"]
    assert (c["state"], c["exit_code"], c["reason"]) == ("exited", 128, "StartError")


def test_stop_honoured_sigterm_exits_zero(h: Harness) -> None:
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "print('ready', flush=True)\n"
        "time.sleep(100)\n"
    )
    cid = h.start({"name": "c", "command": [PY, "-c", script]})
    log = h.rt.log_path(UID, cid)
    assert log is not None
    deadline = time.monotonic() + 5
    while "ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert h.status(cid)["state"] == "running"
    t0 = time.monotonic()
    run(h.rt.stop_container(UID, cid, 5))
    assert time.monotonic() - t0 < 2
    c = h.status(cid)
    assert (c["state"], c["exit_code"], c["reason"]) == ("exited", 0, "Completed")


def test_stop_plain_sleep_reports_sigterm(h: Harness) -> None:
    cid = h.start({"name": "c", "command": ["sleep", "100"]})
    run(h.rt.stop_container(UID, cid, 5))
    c = h.status(cid)
    assert (c["state"], c["exit_code"], c["reason"]) == ("exited", 143, "Error")
    run(h.rt.stop_container(UID, cid, 5))  # idempotent


def test_stop_ignoring_sigterm_is_killed_after_grace(h: Harness) -> None:
    cid = h.start(
        {"name": "c", "command": ["/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"]}
    )
    log = h.rt.log_path(UID, cid)
    assert log is not None
    deadline = time.monotonic() + 5
    while "ready" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)
    t0 = time.monotonic()
    run(h.rt.stop_container(UID, cid, 0.5))  # raised to the 2 s minimum grace
    elapsed = time.monotonic() - t0
    assert 1.9 <= elapsed < 4
    c = h.status(cid)
    assert (c["state"], c["exit_code"]) == ("exited", 137)


def test_process_group_leaves_nothing_behind(h: Harness) -> None:
    cid = h.start({"name": "c", "command": ["/bin/sh", "-c", "sleep 100 & echo $!; sleep 100"]})
    log = h.rt.log_path(UID, cid)
    assert log is not None
    deadline = time.monotonic() + 5
    while not log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(log.read_text().split()[0])
    assert alive(child)
    run(h.rt.stop_container(UID, cid, 5))
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


def test_exit_of_main_process_kills_leftover_group(h: Harness) -> None:
    cid = h.start({"name": "c", "command": ["/bin/sh", "-c", "sleep 100 & echo $!; exit 4"]})
    assert h.wait_exit(cid)["exit_code"] == 4
    child = int(h.rt.log_path(UID, cid).read_text().split()[0])  # type: ignore[union-attr]
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


def test_stop_sandbox_stops_containers_and_drops_ip(h: Harness) -> None:
    cid = h.start({"name": "c", "command": ["sleep", "100"]})
    assert h.rt.relist(time.time())[UID]["ips"] == ["127.0.0.1"]
    run(h.rt.stop_sandbox(UID))
    snap = h.rt.relist(time.time())[UID]
    assert snap["ips"] == [] and snap["sandbox"]["ready"] is False
    assert snap["containers"][0]["id"] == cid and snap["containers"][0]["state"] == "exited"
    with pytest.raises(RuntimeError):
        run(h.rt.start_container(POD, {"name": "c", "command": ["true"]}, attempt=1))


def test_remove_container(h: Harness) -> None:
    cid = h.start({"name": "c", "command": ["/bin/true"]})
    h.wait_exit(cid)
    log = h.rt.log_path(UID, cid)
    run(h.rt.remove_container(UID, cid))
    assert h.rt.relist(time.time())[UID]["containers"] == []
    assert log is not None and not log.exists()
    run(h.rt.remove_container(UID, cid))  # idempotent


def test_newest_first_and_snapshot_validates(h: Harness) -> None:
    first = h.start({"name": "c", "image": "i", "command": ["/bin/true"]}, attempt=0)
    h.wait_exit(first)
    second = h.start({"name": "c", "image": "i", "command": ["sleep", "100"]}, attempt=1)
    snap = h.rt.relist(time.time())[UID]
    assert [c["id"] for c in snap["containers"]] == [second, first]
    assert [c["restart_count"] for c in snap["containers"]] == [1, 0]
    assert snap["runtime_type"] == "process"
    event = {"uid": UID, "node": "n", "type": "ContainerStarted", "container_id": second, "runtime": snap}
    schemas.from_dict("pleg", {**event, "ts_ms": 0})


def test_adoption_keeps_running_process(h: Harness) -> None:
    cid = h.start({"name": "c", "command": ["sleep", "100"]})
    pid, _ = h.rt.pids(UID, cid)
    assert pid is not None
    del h.rt  # drop the runtime without stopping the process
    rt2 = ProcessRuntime(h.state_dir)
    h.rt = rt2
    c = h.status(cid)
    assert (c["state"], c["id"]) == ("running", cid)
    assert rt2.pids(UID, cid)[0] == pid
    assert len(h.rt.relist(time.time())[UID]["containers"]) == 1  # not started again
    run(rt2.stop_container(UID, cid, 2))
    assert not alive(pid)
    assert h.status(cid)["state"] in ("exited", "unknown")


def test_adoption_of_dead_process_reports_unknown(h: Harness) -> None:
    cid = h.start({"name": "c", "command": ["sleep", "100"]})
    pid, pgid = h.rt.pids(UID, cid)
    assert pid is not None and pgid is not None
    del h.rt
    os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    rt2 = ProcessRuntime(h.state_dir)
    h.rt = rt2
    c = h.status(cid)
    assert (c["state"], c["exit_code"]) == ("unknown", None)
    assert c["finished_at"] is not None


def test_adoption_across_processes_polls_proc(h: Harness) -> None:
    """The realistic case: the runtime that started the container ran in another (now gone) process."""
    code = (
        "import asyncio, sys; from pathlib import Path\n"
        "from podledger.agents.runtime.process import ProcessRuntime\n"
        "rt = ProcessRuntime(Path(sys.argv[1]))\n"
        f"pod = {POD!r}\n"
        "asyncio.run(rt.create_sandbox(pod))\n"
        "cid = asyncio.run(rt.start_container(pod, {'name': 'c', 'command': ['sleep', '100']}, attempt=0))\n"
        "print(cid, *rt.pids(pod['metadata']['uid'], cid))\n"
    )
    out = subprocess.run(
        [PY, "-c", code, str(h.state_dir)], cwd=Path(__file__).parents[1], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    cid, pid_s, pgid_s = out.stdout.split()
    pid = int(pid_s)
    h.pgids.append(int(pgid_s))
    rt2 = ProcessRuntime(h.state_dir)
    h.rt = rt2
    assert alive(pid)
    assert h.status(cid)["state"] == "running"
    t0 = time.monotonic()
    run(rt2.stop_container(UID, cid, 5))
    assert time.monotonic() - t0 < 2
    c = h.status(cid)
    assert (c["state"], c["exit_code"]) == ("unknown", None)  # not our child: the exit code is unknowable
