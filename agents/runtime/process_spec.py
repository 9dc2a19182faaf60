"""What the process runtime makes of a pod's spec: a container's argv, environment, host name and the
uid and gid it asks for, and what every container sees (its pod's address on the host network, the
default PATH).

Pure: plain pod and container dicts in, plain values out. The runtime that starts the processes is
agents.runtime.process; docs/architecture.md, "What the node agent trusts", says why a container gets
only this.
"""

from __future__ import annotations

from typing import Any

from podledger.types import JSONDict

__all__ = [
    "DEFAULT_PATH",
    "DEFAULT_RUN_AS_ID",
    "MAX_RUN_AS_ID",
    "POD_IP",
    "container_argv",
    "container_env",
    "pod_hostname",
    "requested_ids",
    "run_as_ids",
]

POD_IP = "127.0.0.1"  # processes share the host network, so every pod is reachable on loopback
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # containerd's default
DEFAULT_RUN_AS_ID = 65534  # nobody/nogroup: what a root agent runs a container as when the pod says nothing
MAX_RUN_AS_ID = 2_147_483_647  # the apiserver's bound for runAsUser and runAsGroup
_HOSTNAME_MAX = 63


def requested_ids(pod: JSONDict, container: JSONDict) -> tuple[int | None, int | None]:
    """(runAsUser, runAsGroup) the container asks for: its own securityContext over the pod's, None where
    neither sets one (as the kubelet merges them).

    Raises ValueError for an id that is not an integer from 0 to 2147483647, and for runAsUser 0 together
    with runAsNonRoot true (the kubelet's "container's runAsUser breaks non-root policy").
    """
    pod_context = (pod.get("spec") or {}).get("securityContext") or {}
    own_context = container.get("securityContext") or {}
    name = container.get("name")

    def pick(key: str) -> Any:
        value = own_context.get(key)
        return pod_context.get(key) if value is None else value

    ids: list[int | None] = []
    for key in ("runAsUser", "runAsGroup"):
        value = pick(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RUN_AS_ID
        ):
            raise ValueError(
                f"container {name!r}: securityContext.{key} must be an integer from 0 to {MAX_RUN_AS_ID},"
                f" not {value!r}"
            )
        ids.append(value)
    if pick("runAsNonRoot") is True and ids[0] == 0:
        raise ValueError(f"container {name!r}: its runAsUser 0 breaks the runAsNonRoot policy")
    return ids[0], ids[1]


def run_as_ids(pod: JSONDict, container: JSONDict, default_ids: tuple[int, int]) -> tuple[int, int]:
    """(uid, gid) a root agent runs the container, and its exec probes, as: what it asks for
    (`requested_ids`), else `default_ids` (Settings.runtime_default_uid and _gid)."""
    uid, gid = requested_ids(pod, container)
    return (default_ids[0] if uid is None else uid, default_ids[1] if gid is None else gid)


def pod_hostname(pod: JSONDict) -> str:
    """The pod's host name as the kubelet derives it: spec.hostname or the pod name, cut to 63 chars."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    name = str(spec.get("hostname") or meta.get("name") or "")
    return name[:_HOSTNAME_MAX].rstrip("-.") if len(name) > _HOSTNAME_MAX else name


def container_argv(container: JSONDict) -> list[str]:
    """`command` + `args` (command replaces the entrypoint); empty when the spec sets neither."""
    return [str(a) for a in (container.get("command") or [])] + [
        str(a) for a in (container.get("args") or [])
    ]


def container_env(pod: JSONDict, container: JSONDict) -> dict[str, str]:
    """The container's environment: its spec's env on top of PATH and HOSTNAME defaults."""
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": pod_hostname(pod)}  # nothing of the agent's environment
    for item in container.get("env") or []:
        env[str(item["name"])] = str(item.get("value") or "")
    return env
