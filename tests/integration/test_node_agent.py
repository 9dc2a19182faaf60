"""The node agent on the real broker: pod workers resume from the log after a restart
(docs/architecture.md, "State and recovery").

Agents run in this process on the process runtime with a file source (static pods), so the test can
stop one agent and start the next on the same runtime state directory, as a restarted node would.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from podledger.agents.node import NodeAgent
from podledger.agents.runtime.process import ProcessRuntime
from podledger.agents.runtime.sim import SimRuntime
from podledger.config import Settings
from podledger.local import alive, free_port
from podledger.schemas import decode
from podledger.streams.replay import replay
from podledger.streams.topics import ensure_topics
from tests.support import wait_for
from tests.support.kafka import read_topic
from tests.support.processes import podledger_env, wait_for_async

pytestmark = pytest.mark.kafka

SLEEPER = """\
apiVersion: v1
kind: Pod
metadata: {name: sleeper}
spec:
  containers:
    - {name: main, image: busybox, command: [sleep, "1000"]}
"""
ONCE = """\
apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  restartPolicy: Never
  containers:
    - {name: main, image: busybox, command: [sh, -c, "exit 3"]}
"""


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Node:
    """One node agent generation over a shared runtime state directory."""

    def __init__(self, settings: Settings, state_dir: Path) -> None:
        self.runtime = ProcessRuntime(state_dir)
        self.agent = NodeAgent(settings, self.runtime)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Node:
        self.task = asyncio.ensure_future(self.agent.run())
        await asyncio.wait_for(self.agent.ready.wait(), 30)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def test_a_restarted_agent_adopts_containers_and_resumes_from_the_log(
    settings: Settings, tmp_path: Path
) -> None:
    asyncio.run(ensure_topics(settings))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "sleeper.yaml").write_text(SLEEPER)
    (manifests / "once.yaml").write_text(ONCE)
    state_dir = tmp_path / "runtime"
    settings = replace(
        settings,
        manifest_dir=str(manifests),
        api_source=False,
        relist_period_s=0.3,
        health_port=free_port(),
    )

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Node(settings, state_dir) as first:
            uids = await wait_for_async(
                lambda: (
                    {w.pod["metadata"]["name"]: uid for uid, w in first.agent.workers.workers.items()}
                    if len(first.agent.workers.workers) == 2
                    else None
                ),
                what="both static pods known",
            )
            sleeper_uid, once_uid = uids[f"sleeper-{settings.node}"], uids[f"once-{settings.node}"]
            snap = await wait_for_async(
                lambda: (
                    (s := first.runtime.pod_snapshot(sleeper_uid, 0))
                    and [c for c in s["containers"] if c["state"] == "running"]
                ),
                what="the sleeper running",
            )
            seen["container"] = snap[0]["id"]
            await wait_for_async(
                lambda: first.agent.workers.workers[once_uid].terminated, what="once terminated"
            )
            # The relist health is served for probes of the node agent itself.
            base = f"http://127.0.0.1:{settings.health_port}"
            assert await asyncio.to_thread(_get, f"{base}/healthz") == (200, "ok\n")
            assert (await asyncio.to_thread(_get, f"{base}/nope"))[0] == 404
        pid = first.runtime.pids(sleeper_uid, seen["container"])[0]
        assert pid is not None and alive(pid)  # stopping the agent leaves containers running

        async with Node(settings, state_dir) as second:
            workers = second.agent.workers.workers
            # Restored from pod-updates and pod-lifecycle before any worker ran.
            assert set(workers) == {sleeper_uid, once_uid}
            assert workers[once_uid].terminated and not workers[sleeper_uid].terminating
            await asyncio.sleep(2.0)  # several relists and worker passes
            running = [
                c
                for c in second.runtime.pod_snapshot(sleeper_uid, 0)["containers"]
                if c["state"] == "running"
            ]
            assert [c["id"] for c in running] == [seen["container"]]  # adopted, not duplicated
            once = second.runtime.pod_snapshot(once_uid, 0)["containers"]
            assert len(once) == 1 and once[0]["exit_code"] == 3  # a finished pod is not run again

        # Removed while no agent ran: the next agent's file source emits REMOVE from the replayed state.
        (manifests / "sleeper.yaml").unlink()
        async with Node(settings, state_dir) as third:
            await wait_for_async(lambda: not alive(pid), timeout=20, what="the removed pod's process stopped")
            await wait_for_async(
                lambda: third.runtime.pod_snapshot(sleeper_uid, 0) is None, what="the runtime forgot the pod"
            )
        seen.update(sleeper=sleeper_uid, once=once_uid)
        return seen

    seen = asyncio.run(scenario())
    updates = [decode("pod-updates", v) for _, _, v in asyncio.run(read_topic(settings, "pod-updates", 3))]
    ops = [(u.op, u.uid) for u in updates]
    # Each pod was ADDed once: the restarted agents' sources merged against the replayed state.
    assert ops.count(("ADD", seen["sleeper"])) == 1 and ops.count(("ADD", seen["once"])) == 1
    assert ops[-1] == ("REMOVE", seen["sleeper"])
    lifecycle = [
        decode("pod-lifecycle", v) for _, _, v in asyncio.run(read_topic(settings, "pod-lifecycle", 1))
    ]
    kinds = [(e.kind, e.uid) for e in lifecycle]
    # The finished pod was terminated once, not again by the restarted agents.
    assert kinds.count(("terminated", seen["once"])) == 1
    assert ("terminated", seen["sleeper"]) in kinds


def test_podledger_node_runs_a_node_and_stops_cleanly_on_sigterm(
    settings: Settings, tmp_path: Path, podledger_process: Any
) -> None:
    asyncio.run(ensure_topics(settings))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "sleeper.yaml").write_text(SLEEPER)
    proc = podledger_process(
        ["node", "--runtime", "sim", "--manifest-dir", str(manifests)],
        env=podledger_env(settings, PODLEDGER_API_SOURCE="false"),
    )
    # The sim container starts (after its default 0.5 s start delay) and the PLEG publishes it.
    events = wait_for(
        lambda: [
            e
            for e in (decode("pleg", v) for _, _, v in asyncio.run(read_topic(settings, "pleg", 0, idle=0.5)))
            if e.type == "ContainerStarted"
        ],
        timeout=60,
        what="a ContainerStarted pleg event",
        alive=proc,
    )
    # The PLEG reports the sandbox as well as the container (as upstream's generic PLEG does).
    [started] = [e for e in events if e.container_id == e.runtime["containers"][0]["id"]]
    assert started.node == settings.node and started.runtime["runtime_type"] == "sim"
    assert started.runtime["containers"][0]["state"] == "running"
    assert proc.stop() == 0, proc.output()
    assert "Traceback" not in proc.output()


CRASHER = """\
apiVersion: v1
kind: Pod
metadata:
  name: crasher
  annotations: {sim.podledger.io/run-seconds: "0.3", sim.podledger.io/exit-code: "2"}
spec:
  containers:
    - {name: main, image: busybox}
"""


def test_a_crash_looping_container_backs_off_and_the_fold_shows_why(
    settings: Settings, tmp_path: Path
) -> None:
    """Pod workers on the sim runtime restart a failing container, then hold it in CrashLoopBackOff and
    say so on pod-lifecycle; the fold over what the agent published shows the waiting reason."""
    asyncio.run(ensure_topics(settings))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "crasher.yaml").write_text(CRASHER)
    settings = replace(
        settings, manifest_dir=str(manifests), api_source=False, relist_period_s=0.2, runtime="sim"
    )

    async def run() -> None:
        agent = NodeAgent(settings, SimRuntime(seed=1))
        task = asyncio.ensure_future(agent.run())
        try:
            await asyncio.wait_for(agent.ready.wait(), 30)
            # Started, failed and restarted at once (restartCount 1), failed again: backing off.
            await wait_for_async(
                lambda: any(w.reasons for w in agent.workers.workers.values()), timeout=20, what="a back-off"
            )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    lifecycle = [
        decode("pod-lifecycle", v) for _, _, v in asyncio.run(read_topic(settings, "pod-lifecycle", 1))
    ]
    [held] = [e for e in lifecycle if e.kind == "sync_result" and e.sync_results]
    [result] = held.sync_results
    assert result["reason"] == "CrashLoopBackOff" and result["container"] == "main"
    assert result["message"].startswith(
        f"back-off 10s restarting failed container=main pod=crasher-{settings.node}_"
    )
    assert held.backoff["main"]["delay"] == 10.0  # saved so a restarted agent keeps backing off

    # The offline fold over the agent's own topics, in time order, gives the kubelet's status.
    values = [
        v
        for topic in ("pod-updates", "pleg", "pod-lifecycle")
        for _, _, v in asyncio.run(read_topic(settings, topic, 1))
    ]
    values.sort(key=lambda v: orjson.loads(v)["ts_ms"])
    statuses = [o.value for o in replay(values) if o.topic == "pod-status-history"]
    main = statuses[-1].status["containerStatuses"][0]
    assert main["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert main["lastState"]["terminated"]["exitCode"] == 2 and main["restartCount"] >= 1
