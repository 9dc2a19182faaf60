"""The container-runtime interface shared by the process, sim and (later) CRI runtimes
(docs/architecture.md#runtimes).

Pod workers drive a runtime through the async calls; the PLEG polls `relist`, whose output is exactly the
runtime snapshot documented in streams/status.py, so the fold never needs to know which runtime ran a pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from podledger.streams.status import rfc3339
from podledger.types import JSONDict, RuntimeContainer, RuntimeSnapshot

__all__ = ["CONTAINER_STATES", "ContainerRecord", "Runtime", "exit_reason", "rfc3339"]


# The runtime container states the snapshot format allows (pleg.v1 schema).
CONTAINER_STATES = frozenset({"created", "running", "exited", "unknown"})


def exit_reason(exit_code: int) -> str:
    """The runtime's terminated reason: Completed on a clean exit, else Error (as containerd reports)."""
    return "Completed" if exit_code == 0 else "Error"


@dataclass(slots=True)
class ContainerRecord:
    """One container instance as a runtime knows it; times are epoch seconds, None when not reached yet.

    Shared so every runtime renders snapshots the same way instead of hand-building dicts.
    """

    id: str
    name: str
    image: str | None
    state: str
    restart_count: int = 0
    created_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    image_id: str = ""

    def snapshot(self) -> RuntimeContainer:
        """This container in the streams/status.py snapshot format (ids without the type:// prefix)."""
        return {
            "id": self.id,
            "name": self.name,
            "image": self.image,
            "image_id": self.image_id,
            "state": self.state,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "message": self.message,
            "created_at": None if self.created_at is None else rfc3339(self.created_at),
            "started_at": None if self.started_at is None else rfc3339(self.started_at),
            "finished_at": None if self.finished_at is None else rfc3339(self.finished_at),
            "restart_count": self.restart_count,
        }


@runtime_checkable
class Runtime(Protocol):
    """What pod workers and the PLEG need from a container runtime; shaped after the CRI calls they map to.

    Stop and remove calls are idempotent, as the CRI requires, so a retried sync cannot fail on them.
    """

    runtime_type: str
    """"process", "sim" or "cri"; the fold prefixes container ids with it ("sim://<id>")."""

    async def create_sandbox(self, pod: JSONDict) -> str:
        """Create the pod's sandbox (network/cgroup) and return its id; ready until stopped."""
        ...

    async def stop_sandbox(self, pod_uid: str) -> None:
        """Make the pod's sandbox not ready (PodReadyToStartContainers turns False)."""
        ...

    async def start_container(self, pod: JSONDict, container: JSONDict, *, attempt: int) -> str:
        """Create and start `container` of `pod`; `attempt` is its restart count. Returns the new id."""
        ...

    async def stop_container(self, pod_uid: str, container_id: str, grace_s: float) -> None:
        """SIGTERM, then SIGKILL after `grace_s`; returns once the container has exited."""
        ...

    async def remove_container(self, pod_uid: str, container_id: str) -> None:
        """Forget an exited container so relists no longer report it."""
        ...

    async def remove_sandbox(self, pod_uid: str) -> None:
        """Forget the pod and everything of it (containers are killed first if still running)."""
        ...

    def pod_snapshot(self, pod_uid: str, now: float) -> RuntimeSnapshot | None:
        """One pod's snapshot (as in `relist`), or None if the runtime does not know the pod."""
        ...

    def relist(self, now: float) -> dict[str, RuntimeSnapshot]:
        """{pod uid: snapshot} for every known pod; synchronous and cheap (called every second).

        The mapping is the caller's. A snapshot is never changed once returned, so a runtime may hand
        out the same object again while the pod is unchanged, and the PLEG skips such a pod without
        reading it (agents.pleg.relist.relist_changes); a changed pod needs a new object."""
        ...
