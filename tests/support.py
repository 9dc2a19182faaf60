"""Plain helpers the tests share: run podledger as a child process, poll until something holds,
read and write topics on the real broker, and check the node agent's pods from outside.

Fixtures live in each folder's conftest.py; everything here is an ordinary function or class,
imported explicitly where it is used.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from podledger.agents.kube import Kube
from podledger.config import Settings
from podledger.partitioner import partition_for_node
from podledger.schemas import decode, encode, models
from podledger.streams.topics import ensure_topics, start_admin
from podledger.types import JSONDict, Topic
from tests import pods

REPO_ROOT = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------------------------------
# podledger as a child process
# --------------------------------------------------------------------------------------------------


def with_topics(settings: Settings, partitions: int) -> Settings:
    """The test's settings (its own topic prefix) with `partitions` per topic, the topics created:
    for tests whose workers share the partitions out."""
    import asyncio

    from podledger.streams.topics import ensure_topics

    sized = Settings.from_env(
        env={},
        bootstrap=settings.bootstrap,
        topic_prefix=settings.topic_prefix,
        partitions=partitions,
        node=settings.node,
    )
    asyncio.run(ensure_topics(sized))
    return sized


def podledger_env(settings: Settings, kubeconfig: str | None = None, **extra: str) -> dict[str, str]:
    """The environment that points a podledger process at the test's broker, topics, node (and cluster)."""
    env = {
        "PODLEDGER_BOOTSTRAP": settings.bootstrap,
        "PODLEDGER_NODE": settings.node,
        "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "PODLEDGER_PARTITIONS": str(settings.partitions),
    }
    if kubeconfig is not None:
        env["KUBECONFIG"] = kubeconfig
    return {**env, **extra}


def run_podledger(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`podledger ARGS` to completion, with none of the caller's PODLEDGER_* or KUBECONFIG."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_") and k != "KUBECONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "podledger.cli", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def path_with(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only `tools` (and the Python running the tests)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine for this test"
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


class PodledgerProcess:
    """`podledger ARGS` as a real child process, its output kept in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "podledger.cli", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def wait_for(
    check: Callable[[], Any],
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "",
    alive: PodledgerProcess | None = None,
) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` on timeout, or at once
    when the `alive` process has exited."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and alive.proc.poll() is not None:
            raise AssertionError(f"podledger exited ({alive.proc.returncode}) while waiting for {what}")
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # the condition may raise until the system catches up
            last_error = exc
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or check}"
        + (f" (last error: {last_error})" if last_error else "")
    )


async def wait_for_async(
    check: Callable[[], Any], timeout: float = 30.0, what: str = "", interval: float = 0.1
) -> Any:
    """`wait_for` inside an event loop, for tests that run components in-process."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        result = check()
        if result:
            return result
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out waiting for {what or check}")


# --------------------------------------------------------------------------------------------------
# Topics on the real broker
# --------------------------------------------------------------------------------------------------


async def read_topic(
    settings: Settings, name: str, at_least: int, timeout: float = 30.0, idle: float = 1.0
) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every message of a topic, read from the start until at least
    `at_least` arrived and nothing new came for `idle` seconds."""
    consumer = AIOKafkaConsumer(
        settings.topic(name),
        bootstrap_servers=settings.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    out: list[tuple[int, bytes, bytes]] = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                batch = await consumer.getmany(timeout_ms=int(idle * 1000))
                if not batch and len(out) >= at_least:
                    return out
                for records in batch.values():
                    out += [(r.partition, r.key, r.value) for r in records]
    finally:
        await consumer.stop()


def wait_for_topic(
    settings: Settings,
    name: str,
    at_least: int,
    *,
    timeout: float = 120.0,
    alive: PodledgerProcess | None = None,
    idle: float = 0.5,
) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of every message of a topic once it holds at least `at_least`,
    polled until `timeout` (failing at once if the `alive` process exits)."""
    return wait_for(
        lambda: (
            len(msgs := asyncio.run(read_topic(settings, name, at_least, idle=idle))) >= at_least and msgs
        ),
        timeout=timeout,
        what=f"{at_least} records on {name}",
        alive=alive,
    )


async def read_records(settings: Settings, name: str, timeout: float = 30.0) -> list[ConsumerRecord]:
    """Every record of a topic as it is now (offsets, headers and all), read from the start to its end."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    out: list[ConsumerRecord] = []
    try:
        partitions = [TopicPartition(settings.topic(name), p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        ends = await consumer.end_offsets(partitions)
        async with asyncio.timeout(timeout):
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += [r for r in records if r.offset < ends[TopicPartition(r.topic, r.partition)]]
    finally:
        await consumer.stop()
    return out


async def send_raw(settings: Settings, topic: str, node: str, key: bytes, value: bytes, ts_ms: int) -> None:
    """One message as given (valid or not), on the partition of `node`."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, max_request_size=4 << 20)
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.topic(topic),
            key=key,
            value=value,
            partition=partition_for_node(node, settings.partitions),
            timestamp_ms=ts_ms,
        )
    finally:
        await producer.stop()


async def publish_statuses(settings: Settings, *statuses: models.VersionedPodStatus) -> None:
    """Versioned statuses onto pod-status, as the fold would write them."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for vs in statuses:
            await producer.send(
                settings.topic("pod-status"),
                key=vs.uid.encode(),
                value=encode(vs),
                partition=partition_for_node(vs.node, settings.partitions),
            )
        await producer.flush()
    finally:
        await producer.stop()


async def publish_versions(
    settings: Settings, *statuses: models.VersionedPodStatus, removed: tuple[tuple[str, str], ...] = ()
) -> None:
    """Versioned statuses as the fold writes them, onto pod-status and pod-status-history, then a
    pod-status tombstone for each (uid, node) of `removed`."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for vs in statuses:
            partition = partition_for_node(vs.node, settings.partitions)
            for topic in ("pod-status", "pod-status-history"):
                await producer.send(
                    settings.topic(topic), key=vs.uid.encode(), value=encode(vs), partition=partition
                )
        for uid, node in removed:
            partition = partition_for_node(node, settings.partitions)
            await producer.send(
                settings.topic("pod-status"), key=uid.encode(), value=None, partition=partition
            )
        await producer.flush()
    finally:
        await producer.stop()


async def publish_desired(
    settings: Settings, *api_pods: JSONDict, op: str = "ADD", source: str = "api"
) -> None:
    """Desired pods onto pod-updates (as a pod source announces them), on their node's partition."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for pod in api_pods:
            node = pod["spec"]["nodeName"]
            update = models.PodUpdate(op, source, node, pod, int(time.time() * 1000))
            await producer.send(
                settings.topic("pod-updates"),
                key=pod["metadata"]["uid"].encode(),
                value=encode(update),
                partition=partition_for_node(node, settings.partitions),
            )
        await producer.flush()
    finally:
        await producer.stop()


def start_serve(
    start: Callable[..., PodledgerProcess], settings: Settings, *args: str, **env: str
) -> tuple[PodledgerProcess, str]:
    """`podledger serve` on a free loopback port (started with the podledger_process fixture's
    `start`); returns the process and its URL once it answers."""
    from podledger.local import free_port

    url = f"http://127.0.0.1:{free_port()}"
    listen = url.removeprefix("http://")
    proc = start(["serve", "--listen", listen, *args], env=podledger_env(settings, **env))
    wait_for(lambda: "answering the Kubernetes API" in proc.output(), 60, what="podledger serve", alive=proc)
    return proc, url


def serve_kubeconfig(url: str, path: Path, token: str = "") -> str:
    """A kubeconfig for `podledger serve` at `url` (a path after the port, like /at/<time>, is kept)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "ledger", "cluster": {"server": url}}],
        "users": [{"name": "reader", "user": {"token": token} if token else {}}],
        "contexts": [{"name": "ledger", "context": {"cluster": "ledger", "user": "reader"}}],
        "current-context": "ledger",
    }
    path.write_text(json.dumps(config))  # JSON is valid YAML
    return str(path)


def http_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
    """(HTTP status, body) of GET 127.0.0.1:port/path; an error status is an answer, not an exception."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


PromSamples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def prometheus_samples(text: str) -> PromSamples:
    """A Prometheus text page as the Prometheus client's parser reads it: (sample name, labels) ->
    value; fails if a series appears twice."""
    from prometheus_client.parser import text_string_to_metric_families

    out: PromSamples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in out, f"{key} twice on the page"
            out[key] = sample.value
    return out


def sample_value(samples: PromSamples, name: str, **labels: str) -> float | None:
    """The value of the one series of `name` whose labels include `labels`; None if there is none."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} series"
    return found[0] if found else None


def history_by_version(messages: list[tuple[int, bytes, bytes]]) -> dict[tuple[str, int], bytes]:
    """(uid, version) -> status; fails if one (uid, version) carries two different statuses."""
    out: dict[tuple[str, int], bytes] = {}
    for _, _, value in messages:
        vs = decode("pod-status-history", value)
        key = (vs.uid, vs.version)
        body = encode(vs.status)
        assert out.setdefault(key, body) == body, f"two statuses for {key}"
    return out


def assert_versions_have_no_gaps(history: dict[tuple[str, int], bytes]) -> dict[str, int]:
    """Every pod's versions run 1..n; returns each pod's newest version."""
    last: dict[str, list[int]] = {}
    for uid, version in history:
        last.setdefault(uid, []).append(version)
    for uid, versions in last.items():
        assert sorted(versions) == list(range(1, len(versions) + 1)), uid
    return {uid: max(v) for uid, v in last.items()}


def offline_fold(journal: list[tuple[int, bytes, bytes]], tmp_path: Path) -> list[bytes]:
    """`podledger fold` over the journal messages: the history it prints, line by line."""
    journal_file = tmp_path / "journal.jsonl"
    journal_file.write_bytes(b"\n".join(v for _, _, v in journal) + b"\n")
    offline = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "fold", str(journal_file)], capture_output=True, timeout=300
    )
    assert offline.returncode == 0, offline.stderr
    return offline.stdout.splitlines()


# --------------------------------------------------------------------------------------------------
# A node agent's pods, seen from outside
# --------------------------------------------------------------------------------------------------


class RuntimeState:
    """Reads the process runtime's state file, as an operator would to find a container's pid."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "state.json"

    def containers(self, uid: str) -> list[JSONDict]:
        if not self.path.exists():
            return []
        return list((json.loads(self.path.read_text()).get(uid) or {}).get("containers") or [])

    def running(self, uid: str, name: str) -> JSONDict | None:
        return next(
            (c for c in self.containers(uid) if c["name"] == name and c["state"] == "running" and c["pid"]),
            None,
        )


def pod_status(kube: Kube, name: str) -> JSONDict:
    return kube.get_pod("default", name).get("status") or {}


def container_status(status: JSONDict, name: str) -> JSONDict:
    return next((c for c in status.get("containerStatuses") or [] if c["name"] == name), {})


def start_node(
    settings: Settings,
    kubeconfig: str,
    podledger_process: Callable[..., PodledgerProcess],
    state_dir: Path,
    **env: str,
) -> tuple[Kube, PodledgerProcess, RuntimeState]:
    """`podledger run --roles fold,node,sink` on the process runtime for the test's node; returns the
    apiserver client, the process and a reader of its runtime state."""
    asyncio.run(ensure_topics(settings))
    kube = Kube.from_kubeconfig(kubeconfig)
    kube.ensure_node(settings.node)
    proc = podledger_process(
        ["run", "--roles", "fold,node,sink"],
        env=podledger_env(
            settings,
            kubeconfig,
            PODLEDGER_RUNTIME="process",
            PODLEDGER_RUNTIME_STATE_DIR=str(state_dir),
            PODLEDGER_SINK_RECONCILE_MS="2000",
            PODLEDGER_LOG_LEVEL="info",
            **env,
        ),
    )
    return kube, proc, RuntimeState(state_dir)


def create_api_pod(kube: Kube, node: str, name: str | None = None, **fields: Any) -> JSONDict:
    """A one-container pod bound to `node`, created on the apiserver (which assigns its uid)."""
    kube.ensure_node(node)
    built = pods.pod(
        ("main",), name=name or f"pod-{uuid.uuid4().hex[:8]}", uid=None, node=node, image="app:1", **fields
    )
    return kube.create_pod(built)


# --------------------------------------------------------------------------------------------------
# Identities on the apiserver: manifests, service-account tokens, access reviews
# --------------------------------------------------------------------------------------------------

# kind -> (plural, namespaced) for the kinds podledger's manifests hold (deploy/kubernetes/).
_KINDS = {
    "Namespace": ("namespaces", False),
    "ServiceAccount": ("serviceaccounts", True),
    "ClusterRole": ("clusterroles", False),
    "ClusterRoleBinding": ("clusterrolebindings", False),
    "Role": ("roles", True),
    "RoleBinding": ("rolebindings", True),
}


def apply_object(kube: Kube, obj: JSONDict, *, dry_run: bool = False) -> JSONDict:
    """Server-side apply of one manifest object (as `kubectl apply --server-side [--dry-run=server]`);
    returns the object as the apiserver stores it (or would)."""
    plural, namespaced = _KINDS[obj["kind"]]
    api_version = obj["apiVersion"]
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    meta = obj["metadata"]
    scope = f"/namespaces/{meta.get('namespace') or 'default'}" if namespaced else ""
    query: list[tuple[str, Any]] = [("fieldManager", "podledger-tests"), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    return dict(
        kube.request(
            "PATCH",
            f"{base}{scope}/{plural}/{meta['name']}",
            body=obj,
            query=query,
            content_type="application/apply-patch+yaml",
        )
    )


def service_account_token(kube: Kube, namespace: str, name: str, seconds: int = 3600) -> str:
    """A token for the service account namespace/name from the TokenRequest API."""
    answer = kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        },
    )
    return str(answer["status"]["token"])


def kubeconfig_with_token(kubeconfig: str, token: str, path: Path, user: str = "podledger-test") -> str:
    """A kubeconfig at `path` for the cluster of `kubeconfig`'s current context, authenticated by
    `token` alone (none of the original user's credentials); returns its path."""
    import yaml

    original = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in original["contexts"] if c["name"] == original["current-context"])
    cluster = next(c for c in original["clusters"] if c["name"] == context["context"]["cluster"])
    ca_file = cluster["cluster"].get("certificate-authority")
    if ca_file and not Path(ca_file).is_absolute():  # relative to the kubeconfig it came from
        absolute = str((Path(kubeconfig).parent / ca_file).resolve())
        cluster = {**cluster, "cluster": {**cluster["cluster"], "certificate-authority": absolute}}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user}}],
        "current-context": user,
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
    path.chmod(0o600)
    return str(path)


def access_review(
    kube: Kube, verb: str, resource: str, *, subresource: str = "", namespace: str = "", group: str = ""
) -> JSONDict:
    """The apiserver's answer to "may I?" for `kube`'s own identity (a SelfSubjectAccessReview):
    its status, with `allowed` and, when denied, `reason`."""
    attributes = {"verb": verb, "resource": resource, "group": group}
    if subresource:
        attributes["subresource"] = subresource
    if namespace:
        attributes["namespace"] = namespace
    review = kube.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        },
    )
    return dict(review["status"])


# --------------------------------------------------------------------------------------------------
# An audit index filled without Kafka
# --------------------------------------------------------------------------------------------------


def audit_records(
    ingress: list[Any], partition: int = 0, rewrite: Callable[[bytes], bytes] | None = None
) -> list[Any]:
    """Fold ingress events (podledger.workload.IngressEvent) offline: the journal and history
    records (podledger.read.index.RawRecord) the fold makes of them, at the offsets a topic would
    give them, as `podledger index` reads them. `rewrite` changes each value on its way, as a
    hostile or broken producer on those topics could."""
    from podledger.read.index import RawRecord
    from podledger.streams.replay import replay
    from podledger.types import Topic

    records, offsets = [], {Topic.JOURNAL: 0, Topic.POD_STATUS_HISTORY: 0}
    for out in replay([encode(e.value) for e in ingress]):
        if out.topic in offsets:
            value = rewrite(out.wire_value()) if rewrite else out.wire_value()
            records.append(RawRecord(out.topic, partition, offsets[out.topic], out.key.encode(), value))
            offsets[out.topic] += 1
    return records


def fill_audit_index(
    index: Any,
    ingress: list[Any],
    partition: int = 0,
    batch: int = 50,
    rewrite: Callable[[bytes], bytes] | None = None,
) -> int:
    """Store audit_records(ingress, ...) through the index's own insert path, `batch` records at
    a time; returns the versions stored."""
    records = audit_records(ingress, partition, rewrite)
    stored = 0
    for start in range(0, len(records), batch):
        stored += index.add(records[start : start + batch])
    return stored


def pod_stories(start_ms: int, stories: list[tuple[str, str, int]], step_ms: int = 1000) -> list[Any]:
    """Ingress events of pods living podledger.workload's story (start, ready, not ready, crash,
    back-off and restart, again): one (namespace, name, events) each, its events `step_ms` apart
    from `start_ms`, the pods' events interleaved in time order."""
    import random

    from podledger.workload import PodLife

    rng = random.Random(7)
    events = []
    for i, (namespace, name, count) in enumerate(stories):
        life = PodLife(i, f"node-{i % 2}", rng, start_ms)
        life.name = name
        life.pod["metadata"].update(name=name, namespace=namespace, labels={"app": "timeline"})
        events += [life.next_event(start_ms + i * 7 + n * step_ms) for n in range(count)]
    return sorted(events, key=lambda e: e.ts_ms)


async def refuse_writes(settings: Settings, topic: Topic, limit: int = 64) -> None:
    """Make the broker answer MESSAGE_TOO_LARGE to any record over `limit` bytes on `topic`."""
    admin = await start_admin(settings)
    try:
        await admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC, settings.topic(topic), {"max.message.bytes": str(limit)}
                )
            ]
        )
    finally:
        await admin.close()
