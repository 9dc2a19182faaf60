"""The process runtime contains what it runs (docs/architecture.md, "What the node agent trusts").

Pod UIDs, names and namespaces are checked where they enter (the ingress schemas) and again by the
runtime's path guard; containers get their spec's env and not the agent's, run as their securityContext's
uid or an unprivileged default when the agent is root, and cannot read the agent's /proc environ; exec
probe output reaches the logs at debug level only. Real processes throughout: the tests that start an
"agent" run it as a child process whose environment holds the credentials, as a deployed agent's does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from podledger.agents.prober import Prober
from podledger.agents.runtime.containment import UnsafePathError, contained_path
from podledger.agents.runtime.process import ProcessRuntime
from podledger.agents.runtime.process_spec import DEFAULT_RUN_AS_ID, requested_ids
from podledger.config import Settings
from podledger.errors import UserError
from podledger.schemas import DecodeError, codec, decode, encode, models, schema
from podledger.streams.fold import Coordinates, decode_input
from podledger.streams.status import rfc3339
from podledger.types import JSONDict, Topic
from tests import pods

T = TypeVar("T")
PY = sys.executable
SECRET = "s3cr3t-sasl-password-7f1c"
UNSAFE_UIDS = ["../x", "a/b", "\x00", "x\x00y", "..", ".", "", "/etc", "/", "a" * 129, "u.v", "ü"]
UNSAFE_NAMES = ["../x", "a/b", "x\x00", "..", ".", "", "/etc", "Web", "a_b", "a" * 254, "-a", "a..b"]
UNSAFE_NAMESPACES = ["../kube-system", "a/b", "..", "kube.system", "a" * 64, "x\x00"]
REAL_UIDS = [
    "3c1f2f9e-1111-4a2b-9c3d-000000000001",  # the apiserver's UUIDs
    "d41d8cd98f00b204e9800998ecf8427e",  # a static pod's md5 hash
    "static-3c1f2f9e-1111-4a2b-9c3d-000000000001",
    "pod_keep",
    "U" * 128,
]
requires_root = pytest.mark.skipif(os.geteuid() != 0, reason="only a root agent can switch a container's uid")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# --------------------------------------------------------------------------- the contract: ingress schemas

INGRESS_UID_FIELDS = {
    Topic.POD_UPDATES: ("pod", "metadata", "uid"),
    Topic.PLEG: ("uid",),
    Topic.PROBE_RESULTS: ("uid",),
    Topic.POD_LIFECYCLE: ("uid",),
}


def _field_schema(topic: str, path: tuple[str, ...]) -> dict[str, Any]:
    node = schema(topic)
    for name in path:
        node = node["properties"][name]
    return node


def test_ingress_schemas_and_models_agree_on_the_identifier_patterns() -> None:
    """The patterns and lengths live once in schemas/models.py; every ingress schema spells them the same."""
    for topic, path in INGRESS_UID_FIELDS.items():
        uid = _field_schema(topic, path)
        assert (uid["pattern"], uid["maxLength"]) == (models.UID_PATTERN, models.UID_MAX_LENGTH), topic
    meta = ("pod", "metadata")
    name = _field_schema(Topic.POD_UPDATES, (*meta, "name"))
    assert (name["pattern"], name["maxLength"]) == (models.NAME_PATTERN, models.NAME_MAX_LENGTH)
    namespace = _field_schema(Topic.POD_UPDATES, (*meta, "namespace"))
    assert (namespace["pattern"], namespace["maxLength"]) == (
        models.NAMESPACE_PATTERN,
        models.NAMESPACE_MAX_LENGTH,
    )


def _pod_update(**metadata: Any) -> dict[str, Any]:
    pod = pods.pod(("c",), name="web", uid="3c1f2f9e-1111-4a2b-9c3d-000000000001", image="app:1")
    pod["metadata"].update(metadata)
    return codec.to_dict(models.PodUpdate("ADD", "api", "node-a", pod, 1_700_000_000_000))


@pytest.mark.parametrize(
    ("field", "value"),
    [("uid", v) for v in UNSAFE_UIDS]
    + [("name", v) for v in UNSAFE_NAMES]
    + [("namespace", v) for v in UNSAFE_NAMESPACES],
    ids=repr,
)
def test_pod_updates_refuse_unsafe_identifiers(field: str, value: str) -> None:
    data = encode(_pod_update(**{field: value}))
    with pytest.raises(DecodeError) as err:
        decode(Topic.POD_UPDATES, data)
    assert (err.value.reason, err.value.field) == ("schema", f"pod.metadata.{field}")


@pytest.mark.parametrize("topic", [Topic.PLEG, Topic.PROBE_RESULTS, Topic.POD_LIFECYCLE])
@pytest.mark.parametrize("uid", UNSAFE_UIDS, ids=repr)
def test_the_other_ingress_topics_refuse_unsafe_uids(topic: str, uid: str) -> None:
    values: dict[str, Any] = {
        Topic.PLEG: models.PlegEvent("u", "node-a", "PodSync", None, {"containers": [], "ips": []}, 1),
        Topic.PROBE_RESULTS: models.ProbeResult(
            "u", "node-a", "c", "process://c-1", "readiness", "Success", 1
        ),
        Topic.POD_LIFECYCLE: models.PodLifecycle("u", "node-a", "terminating", 1, grace_s=30),
    }
    value = codec.to_dict(values[topic]) | {"uid": uid}
    with pytest.raises(DecodeError) as err:
        decode(topic, encode(value))
    assert (err.value.reason, err.value.field) == ("schema", "uid")


@pytest.mark.parametrize("uid", REAL_UIDS)
def test_real_uids_names_and_namespaces_are_accepted(uid: str) -> None:
    name = "static-web-node-a." + "a" * 63  # a DNS-1123 subdomain with a dot
    update = decode(Topic.POD_UPDATES, encode(_pod_update(uid=uid, name=name, namespace="kube-system")))
    assert (update.uid, update.pod["metadata"]["name"]) == (uid, name)
    assert decode(Topic.POD_UPDATES, encode(_pod_update(namespace=""))).pod["metadata"]["namespace"] == ""


def test_the_fold_dead_letters_an_unsafe_uid() -> None:
    at = Coordinates(Topic.POD_UPDATES, 2, 41, 1_700_000_000_000)
    value = encode(_pod_update(uid="../../etc"))
    out = decode_input(Topic.POD_UPDATES, at, b"../../etc", value, 1_000_000)
    assert out.topic == Topic.DEAD_LETTER
    assert (out.value.reason, out.value.offset) == ("schema", 41)
    assert "pod.metadata.uid" in out.value.detail


# --------------------------------------------------------------------------- the path guard


@pytest.mark.parametrize(
    "names",
    [(v,) for v in UNSAFE_UIDS if v not in ("u.v", "ü") and len(v) < 100]
    + [("a" * 256,), ("é" * 128,), ("ok", ".."), ("ok", "../x"), ("ok", "a/b"), ("ok", "")],
    ids=repr,
)
def test_contained_path_refuses_names_that_are_not_one_plain_component(
    tmp_path: Path, names: tuple[str, ...]
) -> None:
    with pytest.raises(UnsafePathError):
        contained_path(tmp_path, *names)


def test_contained_path_accepts_plain_names(tmp_path: Path) -> None:
    assert contained_path(tmp_path, "u-1") == tmp_path.resolve() / "u-1"
    assert contained_path(tmp_path, "u-1", "c.log") == tmp_path.resolve() / "u-1" / "c.log"
    assert contained_path(tmp_path, "..a", "a" * 255) == tmp_path.resolve() / "..a" / ("a" * 255)


def test_contained_path_resolves_a_symlinked_state_dir(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert contained_path(tmp_path / "link", "u-1", "c.log") == real.resolve() / "u-1" / "c.log"


def test_contained_path_refuses_a_symlink_that_leads_out(tmp_path: Path) -> None:
    state, outside = tmp_path / "state", tmp_path / "outside"
    state.mkdir()
    outside.mkdir()
    (state / "escape").symlink_to(outside)
    (state / "self").symlink_to(state)
    (state / "inside").symlink_to(state / "real")
    with pytest.raises(UnsafePathError):
        contained_path(state, "escape")
    with pytest.raises(UnsafePathError):
        contained_path(state, "escape", "c.log")
    with pytest.raises(UnsafePathError):
        contained_path(state, "self")  # the state directory itself is not inside it
    assert contained_path(state, "inside", "c.log") == state.resolve() / "real" / "c.log"


def test_a_runtime_on_a_symlinked_state_dir_keeps_everything_inside(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    rt = ProcessRuntime(tmp_path / "link")
    pod = pods.pod(name="p", uid="u-1", securityContext=_own_ids())
    run(rt.create_sandbox(pod))
    cid = run(rt.start_container(pod, {"name": "c", "command": ["/bin/sh", "-c", "echo hi"]}, attempt=0))
    log = rt.log_path("u-1", cid)
    assert log is not None and log.parent == real.resolve() / "u-1"
    run(rt.remove_sandbox("u-1"))
    assert sorted(p.name for p in real.iterdir()) == ["state.json"]


@pytest.mark.parametrize("uid", ["../victim", "/tmp", "a/b", "..", "x\x00"], ids=repr)
def test_no_sandbox_for_an_unsafe_uid(tmp_path: Path, uid: str) -> None:
    rt = ProcessRuntime(tmp_path / "rt")
    with pytest.raises(UnsafePathError):
        run(rt.create_sandbox(pods.pod(name="p", uid=uid)))
    assert rt.relist(time.time()) == {}
    assert sorted(p.name for p in (tmp_path / "rt").iterdir()) == []


def test_remove_sandbox_of_a_crafted_uid_deletes_nothing_outside(tmp_path: Path) -> None:
    """A state file naming crafted UIDs (`..`-paths, a symlink planted to lead out): removing those pods
    stops and forgets them but deletes nothing, and the runtime says why."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("precious")
    state = tmp_path / "rt"
    state.mkdir()
    (state / "planted").symlink_to(victim)
    crafted = ["../victim", "planted", str(victim), ".."]
    entry = {"sandbox_id": "s", "sandbox_ready": True, "containers": []}
    (state / "state.json").write_text(json.dumps(dict.fromkeys(crafted, entry)))
    rt = ProcessRuntime(state)
    assert set(rt.relist(time.time())) == set(crafted)
    for uid in crafted:
        with pytest.raises(UnsafePathError):
            run(rt.remove_sandbox(uid))
    assert rt.relist(time.time()) == {}
    assert (victim / "keep").read_text() == "precious"
    assert (state / "planted").is_symlink() and (tmp_path / "rt").is_dir()


# --------------------------------------------------------------------------- identities


def _own_ids() -> JSONDict:
    return {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}


@pytest.mark.parametrize(
    ("pod_context", "container_context", "expected"),
    [
        ({}, {}, (None, None)),
        ({"runAsUser": 1111, "runAsGroup": 2222}, {}, (1111, 2222)),
        ({"runAsUser": 1111, "runAsGroup": 2222}, {"runAsUser": 1234}, (1234, 2222)),
        ({}, {"runAsUser": 0, "runAsNonRoot": False}, (0, None)),
        ({"runAsNonRoot": True}, {"runAsUser": 1000}, (1000, None)),
        ({"runAsUser": 0}, {"runAsUser": None, "runAsGroup": 5}, (0, 5)),
    ],
)
def test_requested_ids_merge_pod_and_container_security_contexts(
    pod_context: JSONDict, container_context: JSONDict, expected: tuple[int | None, int | None]
) -> None:
    pod = pods.pod(securityContext=pod_context)
    assert requested_ids(pod, {"name": "c", "securityContext": container_context}) == expected


@pytest.mark.parametrize(
    ("pod_context", "container_context", "message"),
    [
        ({}, {"runAsUser": -1}, "runAsUser must be an integer"),
        ({}, {"runAsUser": "1000"}, "runAsUser must be an integer"),
        ({"runAsGroup": True}, {}, "runAsGroup must be an integer"),
        ({}, {"runAsGroup": 2**31}, "runAsGroup must be an integer"),
        ({"runAsNonRoot": True}, {"runAsUser": 0}, "breaks the runAsNonRoot policy"),
        ({"runAsUser": 0}, {"runAsNonRoot": True}, "breaks the runAsNonRoot policy"),
    ],
)
def test_invalid_security_contexts_are_refused_before_anything_starts(
    tmp_path: Path, pod_context: JSONDict, container_context: JSONDict, message: str
) -> None:
    rt = ProcessRuntime(tmp_path / "rt")
    pod = pods.pod(name="p", uid="u-1", securityContext=pod_context)
    run(rt.create_sandbox(pod))
    container = {"name": "c", "command": ["true"], "securityContext": container_context}
    with pytest.raises(ValueError, match=message):
        run(rt.start_container(pod, container, attempt=0))
    assert rt.relist(time.time())["u-1"]["containers"] == []


@pytest.mark.parametrize(
    ("name", "value"), [("UID", "0"), ("GID", "0"), ("UID", "2147483648"), ("GID", "-5")]
)
def test_the_default_ids_setting_stays_unprivileged(name: str, value: str) -> None:
    with pytest.raises(UserError, match=f"PODLEDGER_RUNTIME_DEFAULT_{name}=.* from 1 to 2147483647"):
        Settings.from_env(env={f"PODLEDGER_RUNTIME_DEFAULT_{name}": value})
    settings = Settings.from_env(env={"PODLEDGER_RUNTIME_DEFAULT_UID": "4321"})
    assert (settings.runtime_default_uid, settings.runtime_default_gid) == (4321, DEFAULT_RUN_AS_ID)
    with pytest.raises(ValueError):
        ProcessRuntime(Path(tempfile.gettempdir()) / "never-created", default_uid=0)


# An agent in its own process, its environment holding credentials as a deployed agent's does. It starts
# one container and prints the container's log once it has exited. With "drop" it first becomes a
# non-root agent (uid 65534, made dumpable again as a fresh process is) after checking that such an
# agent's own child could read its environ before the runtime forbids it.
AGENT = """
import asyncio, ctypes, json, os, subprocess, sys, time
from pathlib import Path
from podledger.agents.runtime.process import ProcessRuntime

state_dir, pod, container, defaults, drop = Path(sys.argv[1]), *map(json.loads, sys.argv[2:6])
report = {"pid": os.getpid()}
if drop:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1: the uid change cleared it
    child = subprocess.run(["cat", f"/proc/{os.getpid()}/environ"], capture_output=True)
    report["readable_before"] = child.returncode == 0 and b"PODLEDGER_KAFKA_SASL_PASSWORD" in child.stdout
rt = ProcessRuntime(state_dir, default_uid=defaults[0], default_gid=defaults[1])
uid = pod["metadata"]["uid"]

async def main():
    await rt.create_sandbox(pod)
    cid = await rt.start_container(pod, container, attempt=0)
    deadline = time.monotonic() + 10
    while rt.pod_snapshot(uid, time.time())["containers"][0]["state"] == "running":
        assert time.monotonic() < deadline, "the container did not exit"
        await asyncio.sleep(0.02)
    report["container"] = rt.pod_snapshot(uid, time.time())["containers"][0]
    report["log"] = rt.log_path(uid, cid).read_text()

asyncio.run(main())
print(json.dumps(report))
"""

# What the container tells about itself: ids, whether the agent's environ and memory are readable, its env.
PROBE_SCRIPT = r"""
echo "ids $(id -u) $(id -g) groups $(id -G)"
if cat "/proc/$PPID/environ" >/dev/null 2>&1; then echo "environ readable"; else echo "environ denied"; fi
if head -c 1 "/proc/$PPID/mem" >/dev/null 2>&1; then echo "mem readable"; else echo "mem denied"; fi
cat "/proc/$PPID/environ" 2>/dev/null | tr '\0' '\n' | sed 's/^/agent-env /'
env | sed 's/^/env /'
"""

AGENT_ENV = {
    "PODLEDGER_KAFKA_SASL_PASSWORD": SECRET,
    "PODLEDGER_KAFKA_SASL_USERNAME": "node-agent",
    "KUBECONFIG": "/etc/podledger/kubeconfig",
    "AWS_SECRET_ACCESS_KEY": SECRET + "-aws",
}


def run_agent(
    state_dir: Path,
    pod: JSONDict,
    container: JSONDict,
    *,
    defaults: tuple[int, int] = (DEFAULT_RUN_AS_ID, DEFAULT_RUN_AS_ID),
    drop: bool = False,
) -> dict[str, Any]:
    env = {**os.environ, **AGENT_ENV}
    args = [json.dumps(v) for v in (pod, container, list(defaults), drop)]
    out = subprocess.run(
        [PY, "-c", AGENT, str(state_dir), *args], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def ids_line(log: str) -> str:
    return next(line for line in log.splitlines() if line.startswith("ids "))


def assert_nothing_of_the_agent(log: str) -> None:
    assert "environ denied" in log and "mem denied" in log
    assert SECRET not in log and "node-agent" not in log
    env_names = {line.split()[1].split("=")[0] for line in log.splitlines() if line.startswith("env ")}
    assert not any(name.startswith("PODLEDGER_") for name in env_names)
    assert not env_names & {"KUBECONFIG", "AWS_SECRET_ACCESS_KEY"}
    assert not any(line.startswith("agent-env ") for line in log.splitlines())


def probe_container(**fields: Any) -> JSONDict:
    return {"name": "probe", "command": ["/bin/sh", "-c", PROBE_SCRIPT], **fields}


@requires_root
def test_a_container_runs_as_the_default_uid_and_sees_nothing_of_the_agent(tmp_path: Path) -> None:
    pod = pods.pod(name="web", uid="u-default")
    container = probe_container(env=[{"name": "GREETING", "value": "hi"}])
    report = run_agent(tmp_path / "rt", pod, container)
    log = report["log"]
    assert report["container"]["exit_code"] == 0, log
    assert ids_line(log) == "ids 65534 65534 groups 65534"  # no supplementary groups either
    assert_nothing_of_the_agent(log)
    env_lines = {line.removeprefix("env ") for line in log.splitlines() if line.startswith("env ")}
    assert {
        "GREETING=hi",
        "HOSTNAME=web",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    } <= (env_lines)


@requires_root
def test_a_container_runs_as_its_run_as_user_and_group(tmp_path: Path) -> None:
    pod = pods.pod(name="web", uid="u-ids")
    container = probe_container(securityContext={"runAsUser": 1234, "runAsGroup": 2345})
    log = run_agent(tmp_path / "rt", pod, container)["log"]
    assert ids_line(log) == "ids 1234 2345 groups 2345"
    assert_nothing_of_the_agent(log)


@requires_root
def test_the_pod_security_context_is_the_default_and_the_container_overrides_it(tmp_path: Path) -> None:
    pod = pods.pod(name="web", uid="u-merge", securityContext={"runAsUser": 1111, "runAsGroup": 2222})
    log = run_agent(tmp_path / "rt", pod, probe_container(securityContext={"runAsUser": 1234}))["log"]
    assert ids_line(log) == "ids 1234 2222 groups 2222"


@requires_root
def test_the_default_ids_are_the_runtime_setting(tmp_path: Path) -> None:
    pod = pods.pod(name="web", uid="u-setting")
    log = run_agent(tmp_path / "rt", pod, probe_container(), defaults=(4321, 4322))["log"]
    assert ids_line(log) == "ids 4321 4322 groups 4322"
    assert_nothing_of_the_agent(log)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every uid may reach (under the sticky /tmp, not under pytest's 0700 temp root)."""
    path = Path(tempfile.mkdtemp(prefix="podledger-containment-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_non_root_agent_is_not_readable_by_a_container_of_its_own_uid(
    tmp_path: Path, open_dir: Path
) -> None:
    """Same uid, so /proc permissions alone would let the container read the agent's environ: the
    agent's own child could, until the runtime made the agent non-dumpable."""
    drop = os.geteuid() == 0
    state = open_dir / "rt"
    if drop:
        state.mkdir(mode=0o700)
        os.chown(state, 65534, 65534)
    report = run_agent(state, pods.pod(name="web", uid="u-same"), probe_container(), drop=drop)
    log = report["log"]
    if drop:
        assert report["readable_before"] is True
        assert ids_line(log) == "ids 65534 65534 groups 65534"
    assert_nothing_of_the_agent(log)


# --------------------------------------------------------------------------- files and working dirs


@requires_root
def test_the_default_working_dir_is_private_scratch_and_the_state_dir_stays_closed(tmp_path: Path) -> None:
    rt = ProcessRuntime(tmp_path / "rt")
    pod = pods.pod(name="p", uid="u-files")
    run(rt.create_sandbox(pod))
    script = (
        "pwd; echo scratch > file && echo wrote; "
        "if ls .. >/dev/null 2>&1; then echo 'parent readable'; else echo 'parent denied'; fi; "
        "echo again >> /dev/stdout"
    )
    cid = run(rt.start_container(pod, {"name": "c", "command": ["/bin/sh", "-c", script]}, attempt=0))
    _wait_exit(rt, "u-files")
    log = rt.log_path("u-files", cid)
    assert log is not None
    work = log.parent / f"{cid}.work"
    assert log.read_text().splitlines() == [str(work), "wrote", "parent denied", "again"]
    assert (work / "file").stat().st_uid == DEFAULT_RUN_AS_ID
    for path in (tmp_path / "rt", log.parent):
        st = path.stat()
        assert (st.st_uid, st.st_mode & 0o777) == (0, 0o700), path
    assert (tmp_path / "rt" / "state.json").stat().st_mode & 0o077 == 0
    run(rt.remove_container("u-files", cid))
    assert not log.exists() and not work.exists()


@requires_root
def test_a_working_dir_the_uid_cannot_reach_is_a_start_error(tmp_path: Path, open_dir: Path) -> None:
    rt = ProcessRuntime(tmp_path / "rt")
    pod = pods.pod(name="p", uid="u-wd")
    run(rt.create_sandbox(pod))
    private = open_dir / "private"
    private.mkdir(mode=0o700)
    (private / "inner").mkdir(mode=0o755)  # enterable itself, but only through a closed parent
    (open_dir / "link").symlink_to(private / "inner")
    for working_dir in (private, private / "inner", open_dir / "link"):
        container = {"name": "c", "command": ["/bin/pwd"], "workingDir": str(working_dir)}
        with pytest.raises(PermissionError):
            run(rt.start_container(pod, container, attempt=0))
    states = [(c["state"], c["reason"]) for c in rt.relist(time.time())["u-wd"]["containers"]]
    assert states == [("exited", "StartError")] * 3
    shared = open_dir / "shared"
    shared.mkdir(mode=0o755)
    (open_dir / "to-shared").symlink_to(shared)
    for working_dir in (shared, open_dir / "to-shared"):
        cid = run(
            rt.start_container(
                pod, {"name": "c", "command": ["/bin/pwd"], "workingDir": str(working_dir)}, attempt=1
            )
        )
        _wait_exit(rt, "u-wd")
        assert rt.log_path("u-wd", cid).read_text().strip() == str(shared.resolve())  # type: ignore[union-attr]


def _wait_exit(rt: ProcessRuntime, uid: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while rt.relist(time.time())[uid]["containers"][0]["state"] == "running":
        assert time.monotonic() < deadline, "the container did not exit"
        time.sleep(0.02)


# --------------------------------------------------------------------------- exec probe output


def test_exec_probe_output_is_logged_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    """The probe fails (so its message is recorded as an Unhealthy event), but what the command printed
    reaches neither the event nor any log line above debug."""
    token = "probe-output-token-93be"
    probe = {
        "exec": {"command": ["sh", "-c", f"echo {token}; exit 3"]},
        "periodSeconds": 0.05,
        "failureThreshold": 1,
    }
    pod = pods.pod([pods.container("web", readinessProbe=probe)], name="web", uid="u-probe")
    status = {
        "phase": "Running",
        "podIP": "127.0.0.1",
        "containerStatuses": [
            {
                "name": "web",
                "containerID": "process://probe",
                "state": {"running": {"startedAt": rfc3339(time.time() - 5)}},
                "started": True,
                "ready": False,
            }
        ],
    }
    events: list[tuple[str, str]] = []

    async def scenario() -> None:
        prober = Prober(
            "node-1", on_event=lambda uid, name, reason, message: events.append((reason, message))
        )
        prober.update_status("u-probe", status)
        prober.add_pod(pod)
        deadline = time.monotonic() + 5
        while len(events) < 2:
            assert time.monotonic() < deadline, "no probe events"
            await asyncio.sleep(0.01)
        await prober.close()

    caplog.set_level(logging.DEBUG)
    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert events[0] == ("Unhealthy", "Readiness probe failed: command exited with code 3")
    assert not any(token in message for _, message in events)
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG and token in r.getMessage()]
    assert [r for r in caplog.records if r.levelno == logging.DEBUG and token in r.getMessage()]
