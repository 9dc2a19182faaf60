"""Local instances beyond one call: long-lived ones (`podledger local up`) and per-run sessions."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

from podledger.local.apiserver import KubeHandle, start_kube
from podledger.local.broker import KafkaHandle, start_kafka
from podledger.local.processes import alive, port_open
from podledger.paths import cache_dir

H = TypeVar("H", KafkaHandle, KubeHandle)


def _state_file(name: str) -> Path:
    return cache_dir() / "local" / f"{name}.json"


def _saved(name: str, handle_type: type[H]) -> H | None:
    """The handle `podledger local up` saved under `name`; None when absent or unreadable."""
    try:
        return handle_type(**json.loads(_state_file(name).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running_kafka() -> KafkaHandle | None:
    """The broker a previous `podledger local up` left running, if it still answers."""
    handle = _saved("kafka", KafkaHandle)
    if handle is None:
        return None
    port = int(handle.bootstrap.rsplit(":", 1)[1])
    return handle if alive(handle.pid) and port_open(port) else None


def running_kube() -> KubeHandle | None:
    """The apiserver (and etcd) a previous `podledger local up` left running, if it still answers."""
    handle = _saved("kube", KubeHandle)
    if handle is None:
        return None
    port = int(handle.server.rsplit(":", 1)[1])
    return handle if all(alive(p) for p in handle.pids) and port_open(port) else None


def up(kafka: bool = True, kube: bool = True) -> tuple[KafkaHandle | None, KubeHandle | None]:
    """Start (or reuse) long-lived local instances that outlive this process."""
    k = running_kafka() if kafka else None
    if kafka and k is None:
        workdir = cache_dir() / "local" / "kafka"
        shutil.rmtree(workdir, ignore_errors=True)
        k = start_kafka(workdir, detached=True)
        _state_file("kafka").write_text(json.dumps(asdict(k)))
    a = running_kube() if kube else None
    if kube and a is None:
        workdir = cache_dir() / "local" / "kube"
        shutil.rmtree(workdir, ignore_errors=True)
        a = start_kube(workdir, detached=True)
        _state_file("kube").write_text(json.dumps(asdict(a)))
    return k, a


def down() -> list[str]:
    stopped = []
    for name, finder in (("kafka", running_kafka), ("kube", running_kube)):
        handle = finder()
        if handle is not None:
            handle.stop()
            stopped.append(name)
        _state_file(name).unlink(missing_ok=True)
    return stopped


@contextlib.contextmanager
def session(workdir: Path, *, kafka: bool = True, kube: bool = True) -> Iterator[tuple[str, str]]:
    """(bootstrap, kubeconfig) for one run: the user's when PODLEDGER_BOOTSTRAP / KUBECONFIG are
    set, otherwise private instances started in `workdir` and stopped on exit (also on errors)."""
    handles: list[KafkaHandle | KubeHandle] = []
    try:
        bootstrap = os.environ.get("PODLEDGER_BOOTSTRAP", "")
        if kafka and not bootstrap:
            handle = start_kafka(workdir / "kafka")
            handles.append(handle)
            bootstrap = handle.bootstrap
        kubeconfig = os.environ.get("KUBECONFIG", "")
        if kube and not kubeconfig:
            kh = start_kube(workdir / "kube")
            handles.append(kh)
            kubeconfig = kh.kubeconfig
        yield bootstrap, kubeconfig
    finally:
        for h in reversed(handles):
            h.stop()
