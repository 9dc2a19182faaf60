"""What every benchmark shares: a private topic prefix on a real broker, child processes with the
right environment, counting a topic, percentiles, and the machine line printed with every figure."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import urllib.request
import uuid
from dataclasses import replace
from typing import Any, NamedTuple

from aiokafka import AIOKafkaConsumer, TopicPartition

from podledger import local
from podledger.config import Settings
from podledger.streams.topics import start_admin


def say(message: str) -> None:
    """Progress on stderr; figures go to stdout."""
    print(f"bench: {message}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-th percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def machine() -> str:
    """The size of this machine, printed with every figure."""
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"machine: {os.cpu_count()} cores, {mem_gb:.0f} GB"


DELETE_WAIT_S = 30.0  # how long drop_bench_leftovers waits for the broker to finish deleting

# The topic prefixes benchmarks of this process made, and a broker to reach them: drop_bench_leftovers.
_made: dict[str, Settings] = {}


def bench_settings(base: Settings, **changes: Any) -> Settings:
    """`base` on topics of its own (a fresh prefix), on the broker PODLEDGER_BOOTSTRAP names or else
    the local one `make demo` uses (started if needed). drop_bench_leftovers deletes them."""
    settings = replace(base, topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.", log_level="warning", **changes)
    if not settings.bootstrap:
        kafka, _ = local.up(kafka=True, kube=False)
        assert kafka is not None
        say(f"using the local broker at {kafka.bootstrap} (stop it with 'podledger local down')")
        settings = replace(settings, bootstrap=kafka.bootstrap)
    _made[settings.topic_prefix] = settings
    return settings


def drop_bench_leftovers() -> int:
    """Delete the topics of every benchmark prefix this process made, and its workers' Faust
    working files; returns how many topics. A broker that keeps them all slows down run after run
    (their logs, the compaction of the compacted ones), and each run's files stay in the cache."""
    dropped = 0
    for prefix, settings in list(_made.items()):
        del _made[prefix]
        if not settings.data_dir:  # the default place, of this prefix alone (never a directory set by hand)
            shutil.rmtree(settings.faust_data_dir(), ignore_errors=True)
        try:
            dropped += asyncio.run(_drop(settings, prefix))
        except Exception as exc:  # a benchmark's own failure says more: this one is only reported
            say(f"could not delete the topics {prefix}*: {exc}")
    return dropped


async def _drop(settings: Settings, prefix: str) -> int:
    admin = await start_admin(settings, "podledger-bench")
    try:
        names = [name for name in await admin.list_topics() if name.startswith(prefix)]
        if names:
            await admin.delete_topics(names)
        # The broker deletes in the background: wait until they are gone from its listing.
        deadline = asyncio.get_running_loop().time() + DELETE_WAIT_S
        while asyncio.get_running_loop().time() < deadline:
            if not any(name.startswith(prefix) for name in await admin.list_topics()):
                break
            await asyncio.sleep(0.5)
        else:
            say(f"topics {prefix}* still listed {DELETE_WAIT_S:.0f} s after their deletion")
        return len(names)
    finally:
        await admin.close()


def local_kubeconfig(settings: Settings) -> str:
    """The kubeconfig KUBECONFIG names, else the local apiserver's (started if needed)."""
    if settings.kubeconfig:
        return settings.kubeconfig
    _, kube = local.up(kafka=False, kube=True)
    assert kube is not None
    say(f"using the local apiserver at {kube.server}")
    return kube.kubeconfig


def start_service(settings: Settings, roles: str, **env: str) -> subprocess.Popen[bytes]:
    """`podledger run --roles ROLES` as a child process on the benchmark's broker and topics."""
    child_env = dict(os.environ)
    child_env.update(
        PODLEDGER_BOOTSTRAP=settings.bootstrap,
        PODLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        PODLEDGER_PARTITIONS=str(settings.partitions),
        PODLEDGER_LOG_LEVEL="warning",
        **env,
    )
    return subprocess.Popen(
        [sys.executable, "-m", "podledger.cli", "run", "--roles", roles],
        env=child_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )


def worker_metrics(port: int) -> dict[str, float]:
    """A worker's /metrics, served on `port` (PODLEDGER_HEALTH_PORT): sample (name and labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name and not line.startswith("#"):
            samples[name] = float(value)
    return samples


class WorkerGc(NamedTuple):
    """A worker's collector so far, from its /metrics."""

    full_passes: int
    longest_ms: float  # its longest pause of any pass
    paused_s: float  # what all its passes stalled it


def worker_gc(port: int) -> WorkerGc:
    samples = worker_metrics(port)

    def of(metric: str) -> list[float]:
        return [v for name, v in samples.items() if name.startswith(metric + "{")]

    return WorkerGc(
        int(samples.get('podledger_gc_passes_total{generation="2"}', 0)),
        max(of("podledger_gc_longest_pause_seconds"), default=0.0) * 1000,
        sum(of("podledger_gc_pause_seconds_total")),
    )


def native_share(port: int) -> float:
    """The share of a fold worker's batches its native fold core folded; -1 without a core."""
    samples = worker_metrics(port)
    native = samples.get("podledger_fold_native_batches_total", 0.0)
    python = samples.get("podledger_fold_python_batches_total", 0.0)
    return native / (native + python) if native + python else -1.0


def stop_service(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident set (VmHWM) and its children's (a fold worker's native fold
    core), in MB: their sum, so at least what they ever held at once."""
    total = 0.0
    for one in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{one}/status") as f:
                total += next((int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:")), 0.0)
        except FileNotFoundError:
            continue
    return total or float("nan")


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    found: list[int] = []
    for task in tasks:
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(child) for child in f.read().split()]
    return found


async def topic_count(settings: Settings, name: str) -> int:
    """Messages in a topic: the sum of its partitions' end offsets."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, **settings.kafka_client_options())
    await consumer.start()
    try:
        tps = [TopicPartition(settings.topic(name), p) for p in range(settings.partitions)]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()
