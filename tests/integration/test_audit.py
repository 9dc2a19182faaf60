"""The audit commands on the real broker: the live fold folds a crash-looping pod and a pod that
fails under restartPolicy Never; `podledger index` reads its history and journal into the index;
`history`, `why` and `export` answer from it; the index resumes after a restart without copies
and says how far behind it is; `index` and `history --follow` follow new versions."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from podledger.config import Settings
from podledger.schemas import decode, models
from podledger.streams.topics import ensure_topics
from podledger.workload import IngressEvent, produce
from tests import pods
from tests.support import wait_for
from tests.support.kafka import read_topic
from tests.support.processes import podledger_env, run_podledger

pytestmark = pytest.mark.kafka

BACKOFF = "back-off {s}s restarting failed container=worker pod={name}_default({uid})"


class Story:
    """Ingress events of one pod with one container `worker`, as a node agent would publish them."""

    def __init__(self, name: str, node: str, restart_policy: str = "Always") -> None:
        self.name, self.node, self.uid = name, node, f"uid-{name}"
        self.pod = pods.pod(("worker",), name=name, uid=self.uid, node=node, restart_policy=restart_policy)
        self.restarts = 0

    def _event(self, topic: str, value: Any) -> IngressEvent:
        return IngressEvent(topic, self.uid, self.node, value, value.ts_ms)

    def added(self, ts: int) -> IngressEvent:
        return self._event("pod-updates", models.PodUpdate("ADD", "api", self.node, self.pod, ts))

    def runtime(self, state: str, exit_code: int | None = None) -> dict[str, Any]:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        worker = pods.runtime_container(
            f"{self.uid}-worker-{self.restarts}",
            "worker",
            "busybox",
            state,
            exit_code=exit_code,
            restarts=self.restarts,
            stamp=stamp,
        )
        return {"containers": [worker], "ips": ["10.0.0.7"], "runtime_type": "process", "sandbox": None}

    def started(self, ts: int) -> IngressEvent:
        runtime = self.runtime("running")
        cid = runtime["containers"][0]["id"]
        return self._event(
            "pleg", models.PlegEvent(self.uid, self.node, "ContainerStarted", cid, runtime, ts)
        )

    def died(self, ts: int, code: int = 1) -> IngressEvent:
        runtime = self.runtime("exited", code)
        cid = runtime["containers"][0]["id"]
        return self._event("pleg", models.PlegEvent(self.uid, self.node, "ContainerDied", cid, runtime, ts))

    def backoff(self, ts: int, seconds: int) -> IngressEvent:
        self.restarts += 1
        message = BACKOFF.format(s=seconds, name=self.name, uid=self.uid)
        result = {"container": "worker", "reason": "CrashLoopBackOff", "message": message}
        return self._event(
            "pod-lifecycle", models.PodLifecycle(self.uid, self.node, "sync_result", ts, [result])
        )


def feed(settings: Settings, events: list[IngressEvent], fold: Any) -> None:
    """Send events one at a time, each after the fold journaled the one before: inputs on different
    topics are otherwise applied in whichever order the fold reads them."""

    def journaled() -> int:
        return len(asyncio.run(read_topic(settings, "journal", 0, idle=0.2)))

    for event in events:
        before = journaled()
        asyncio.run(produce(settings, [event]))
        wait_for(
            lambda before=before: journaled() > before,  # type: ignore[misc]
            timeout=60,
            what=f"the fold to journal {event.topic} event of {event.key}",
            alive=fold,
        )


def history_on_topic(settings: Settings, at_least: int) -> list[Any]:
    messages = asyncio.run(read_topic(settings, "pod-status-history", at_least, idle=0.5))
    return [decode("pod-status-history", v) for _, _, v in messages]


def podledger(settings: Settings, index: Path, *args: str) -> str:
    """`podledger ARGS` against the test's topics and index; its stdout, after it succeeded."""
    done = run_podledger(*args, env=podledger_env(settings, None, PODLEDGER_INDEX=str(index)), timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def index_status(settings: Settings, index: Path) -> str:
    return podledger(settings, index, "index", "--status").strip()


def test_history_why_export_and_a_resumed_index_on_a_live_fold(
    settings: Settings, podledger_process, tmp_path: Path
) -> None:
    asyncio.run(ensure_topics(settings))
    fold = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings, None))
    crash = Story("crashloop", "node-a")
    never = Story("once", "node-b", restart_policy="Never")
    t = int(time.time() * 1000) - 60_000
    events = [crash.added(t), never.added(t + 1)]
    events += [crash.started(t + 1000), never.started(t + 1001)]
    events += [crash.died(t + 4000), crash.backoff(t + 4100, 10), never.died(t + 4001)]
    events += [crash.started(t + 14_000), crash.died(t + 17_000), crash.backoff(t + 17_100, 20)]
    events += [crash.backoff(t + 17_200, 20)]  # the same reason again: nothing changes
    never.restarts += 1
    events += [never.started(t + 20_000)]  # under Never: an illegal transition, dropped
    feed(settings, events, fold)
    history = wait_for(
        lambda: (h := history_on_topic(settings, 10)) and len(h) >= 10 and h,
        timeout=120,
        what="10 versions",
        alive=fold,
    )
    index = tmp_path / "audit.sqlite"

    # The consumer role indexes both topics and is then 0 records behind them.
    podledger(settings, index, "index", "--once")
    status = index_status(settings, index)
    assert f"{len(history)} versions" in status and status.endswith("(0 records)"), status

    # history: every version with its cause, as a table, as JSON (the topic's values), with --diff.
    crash_versions = sorted((v for v in history if v.uid == crash.uid), key=lambda v: v.version)
    table = podledger(settings, index, "history", "default/crashloop", "--no-refresh").splitlines()
    assert table[0].startswith(f"pod default/crashloop  uid {crash.uid}  node node-a")
    assert table[1].split() == ["VERSION", "TIME", "PHASE", "READY", "CONTAINERS", "CAUSE"]
    assert [row.split()[0] for row in table[2:]] == [f"v{v.version}" for v in crash_versions]
    assert "worker=waiting:CrashLoopBackOff,restarts=1" in table[-1] and table[-1].endswith(
        "pod-lifecycle:sync_result"
    )
    as_json = json.loads(podledger(settings, index, "history", crash.uid, "-o", "json", "--no-refresh"))
    [life] = as_json["lives"]
    assert [(r["version"], r["status"]) for r in life["versions"]] == [
        (v.version, v.status) for v in crash_versions
    ]
    assert [r["cause"]["offset"] for r in life["versions"]] == [v.cause.offset for v in crash_versions]
    diffed = podledger(settings, index, "history", "default/crashloop", "--diff", "--no-refresh")
    assert "containerStatuses[worker].restartCount: 0 -> 1" in diffed
    wide = podledger(settings, index, "history", "default/crashloop", "-o", "wide", "--no-refresh")
    assert f"pod-lifecycle:sync_result pod-lifecycle/{crash_versions[-1].cause.partition}@" in wide

    # why --version: the chain since the version before, and what changed nothing after it.
    last = crash_versions[-1]
    why = json.loads(
        podledger(
            settings,
            index,
            "why",
            "default/crashloop",
            "--version",
            str(last.version),
            "-o",
            "json",
            "--no-refresh",
        )
    )
    assert why["replayed"] and why["version"]["status"] == last.status
    assert [i["summary"] for i in why["chain"]][
        -1
    ] == "pod-lifecycle sync_result CrashLoopBackOff back-off 20s"
    assert [i["summary"] for i in why["unchanged_after"]] == [
        "pod-lifecycle sync_result CrashLoopBackOff back-off 20s"
    ]
    assert why["unchanged_after"][0]["effect"].startswith("no change")
    died = next(v for v in crash_versions if v.cause.type == "pleg:ContainerDied")
    text = podledger(
        settings, index, "why", "default/crashloop", "--version", str(died.version), "--no-refresh"
    )
    assert "pleg ContainerDied worker exit 1" in text and f"version {died.version} at " in text

    # why --at: the Never pod failed by the phase rule; its restart was dropped as illegal.
    never_versions = sorted((v for v in history if v.uid == never.uid), key=lambda v: v.version)
    failed = next(v for v in never_versions if v.status["phase"] == "Failed")
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(failed.ts_ms / 1000)) + f".{failed.ts_ms % 1000:03d}Z"
    text = podledger(settings, index, "why", "default/once", "--at", at, "--no-refresh")
    assert f"version {failed.version} at" in text
    assert "phase rule (getPhase): Running -> Failed, restartPolicy Never" in text
    assert "illegal transition dropped (checkContainerStateTransition)" in text

    # export: the journal folds back into the history the live fold wrote, version for version.
    journal_file, history_file = tmp_path / "journal.jsonl", tmp_path / "history.jsonl"
    podledger(settings, index, "export", "journal", "--file", str(journal_file), "--no-refresh")
    podledger(settings, index, "export", "history", "--file", str(history_file), "--no-refresh")
    folded = run_podledger("fold", str(journal_file))
    assert folded.returncode == 0, folded.stderr
    refolded = [decode("pod-status-history", line) for line in folded.stdout.splitlines()]
    assert _versions(refolded) == _versions(history)
    exported = [decode("pod-status-history", line) for line in history_file.read_bytes().splitlines()]
    assert _versions(exported) == _versions(history)
    one_pod = podledger(settings, index, "export", "journal", "--pod", "default/once", "--no-refresh")
    events_of_pod = [json.loads(line)["event"] for line in one_pod.splitlines()]
    assert events_of_pod and {e.get("uid") or e["pod"]["metadata"]["uid"] for e in events_of_pod} == {
        never.uid
    }

    # More versions: the index says how far behind it is, and a query catches it up, without copies.
    events = [crash.started(t + 40_000), crash.died(t + 43_000), crash.backoff(t + 43_100, 40)]
    feed(settings, events, fold)
    grown = wait_for(
        lambda: (h := history_on_topic(settings, len(history) + 3)) and len(h) >= len(history) + 3 and h,
        timeout=60,
        what="3 more versions",
        alive=fold,
    )
    behind = index_status(settings, index)
    assert "(0 records)" not in behind and f"pod-status-history={len(grown) - len(history)}" in behind, behind
    table = podledger(settings, index, "history", "default/crashloop").splitlines()  # refreshes first
    assert table[-1].split()[0] == f"v{max(v.version for v in grown if v.uid == crash.uid)}"
    status = index_status(settings, index)
    assert f"{len(grown)} versions" in status and status.endswith("(0 records)"), status
    journal = asyncio.run(read_topic(settings, "journal", 1, idle=0.5))
    assert f"{len(journal)} journal entries" in status
    assert fold.stop() == 0


def _versions(history: list[Any]) -> dict[tuple[str, int], tuple[Any, Any]]:
    """(uid, version) -> (status, cause): what a history says, whatever else its values carry."""
    out = {(vs.uid, vs.version): (vs.status, vs.cause) for vs in history}
    assert len(out) == len(history)
    return out


def test_index_and_history_follow_new_versions_until_sigterm(
    settings: Settings, podledger_process, tmp_path: Path
) -> None:
    asyncio.run(ensure_topics(settings))
    fold = podledger_process(["run", "--roles", "fold"], env=podledger_env(settings, None))
    crash = Story("crashloop", "node-a")
    t = int(time.time() * 1000) - 60_000
    feed(settings, [crash.added(t), crash.started(t + 1000)], fold)
    wait_for(lambda: len(history_on_topic(settings, 2)) >= 2, timeout=120, what="2 versions", alive=fold)
    index = tmp_path / "audit.sqlite"
    env = podledger_env(settings, None, PODLEDGER_INDEX=str(index))
    indexer = podledger_process(["index"], env=env)
    wait_for(
        lambda: index.exists() and "(0 records)" in index_status(settings, index),
        what="the index caught up",
        alive=indexer,
    )
    follower = podledger_process(["history", "default/crashloop", "--follow", "--no-refresh"], env=env)
    wait_for(lambda: "v2 " in follower.output(), what="the history so far", alive=follower)

    feed(settings, [crash.died(t + 4000), crash.backoff(t + 4100, 10)], fold)
    line = wait_for(
        lambda: next((ln for ln in follower.output().splitlines() if ln.startswith("v4 ")), None),
        timeout=60,
        what="version 4 followed",
        alive=follower,
    )
    assert "CrashLoopBackOff" in line
    assert follower.stop(signal.SIGTERM) == 0
    assert indexer.stop(signal.SIGTERM) == 0, indexer.output()
    assert "records indexed; behind:" in indexer.output()
    assert fold.stop() == 0
