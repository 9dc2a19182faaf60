"""Which dead containers a pod keeps: the pure half of the container garbage collector
(kuberuntime_gc.go), whose loop is agents.runtime.container_gc.

The kubelet's default policy keeps one dead container per pod and container name
(MaxPerPodContainer 1, MinAge 0): the newest dead instance, which is the status's lastState and
the logs of `--previous`, stays, and older ones are removed. Only dead containers (exited or
unknown) are candidates, and the newest instance of a name is never one whatever its state, so the
pod worker, which acts on the newest instance of each name, sees the same pod before and after.
"""

from __future__ import annotations

from podledger.types import RuntimeSnapshot

__all__ = ["DEAD_STATES", "MAX_DEAD_PER_CONTAINER", "dead_containers_to_remove"]

MAX_DEAD_PER_CONTAINER = 1  # the kubelet's --maximum-dead-containers-per-container default

# States of a container whose process is gone. Created containers are left alone: they are about to
# start, or they are the newest of their name.
DEAD_STATES = frozenset({"exited", "unknown"})


def dead_containers_to_remove(
    snapshot: RuntimeSnapshot | None, keep: int = MAX_DEAD_PER_CONTAINER
) -> list[str]:
    """IDs of one pod's dead containers beyond the newest `keep` of each container name, oldest first
    (the order the kubelet removes them in). Snapshots list containers newest first."""
    if keep < 1:
        raise ValueError("keep at least the newest dead container of a name: it is the lastState")
    kept: dict[str, int] = {}
    doomed: list[str] = []
    for container in (snapshot or {}).get("containers") or []:
        if container["state"] not in DEAD_STATES:
            continue
        name = container["name"]
        if kept.get(name, 0) < keep:
            kept[name] = kept.get(name, 0) + 1
        else:
            doomed.append(container["id"])
    doomed.reverse()
    return doomed
