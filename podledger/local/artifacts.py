"""The broker's jars and the etcd / kube-apiserver / kubectl binaries: fetched or built once, then cached.

Kafka is resolved from Maven with the machine's Maven; etcd, kube-apiserver and kubectl are built
with the machine's Go from the module versions pinned in deploy/local/. A file lock per artifact keeps
parallel runs from building the same thing twice.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from podledger.errors import UserError
from podledger.local.processes import need_tool
from podledger.paths import cache_dir

REPO_DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "local"


def _deploy_file(*parts: str) -> Path:
    path = REPO_DEPLOY.joinpath(*parts)
    if not path.exists():
        raise UserError(
            f"{path} is missing: the local broker and apiserver run from a podledger source checkout"
        )
    return path


def progress(message: str) -> None:
    print(f"podledger: {message}", file=sys.stderr, flush=True)


def run_build(cmd: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    started = time.monotonic()
    progress(f"{what} (first run only; cached afterwards) ...")
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise UserError(f"{what} failed (exit {proc.returncode}); its output is above")
    progress(f"{what}: done in {time.monotonic() - started:.0f}s")


@contextlib.contextmanager
def _cache_lock(name: str) -> Iterator[None]:
    """Serialize one artifact's fetch or build across processes (parallel test runs)."""
    import fcntl

    lock_path = cache_dir() / f".{name}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def kafka_version() -> str:
    pom = _deploy_file("kafka", "pom.xml").read_text()
    match = re.search(r"<kafka.version>([^<]+)</kafka.version>", pom)
    if not match:
        raise UserError("deploy/local/kafka/pom.xml does not name a kafka.version")
    return match.group(1)


def fetch_kafka() -> Path:
    """The directory of the broker's jars, resolved with Maven on first use."""
    version = kafka_version()
    libs = cache_dir() / f"kafka-{version}" / "libs"
    if (libs / ".complete").exists():
        return libs
    with _cache_lock(f"kafka-{version}"):
        if not (libs / ".complete").exists():
            _resolve_kafka(version, libs)
    return libs


def _resolve_kafka(version: str, libs: Path) -> None:
    need_tool("java", "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)")
    mvn = need_tool("mvn", "install Apache Maven (e.g. apt-get install maven)")
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    pom = _deploy_file("kafka", "pom.xml")
    run_build(
        [
            mvn,
            "-B",
            "-q",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={libs}",
        ],
        pom.parent,
        f"resolving Apache Kafka {version} with Maven",
    )
    (libs / ".complete").write_text(version)


def _go_module_version(module_dir: Path, module: str) -> str:
    text = (module_dir / "go.mod").read_text()
    match = re.search(rf"^require {re.escape(module)} (\S+)", text, re.M)
    if not match:
        raise UserError(f"{module_dir}/go.mod does not require {module}")
    return match.group(1)


def _go_binary(name: str, module_dir: Path, module: str, package: str, ldflags: str = "") -> Path:
    version = _go_module_version(module_dir, module)
    binary = cache_dir() / "bin" / f"{name}-{version}"
    if binary.exists():
        return binary
    with _cache_lock(binary.name):
        if not binary.exists():
            _go_build(name, version, binary, module_dir, package, ldflags)
    return binary


def _go_build(name: str, version: str, binary: Path, module_dir: Path, package: str, ldflags: str) -> None:
    go = need_tool("go", "install Go 1.24 or newer (https://go.dev/doc/install) and put it on PATH")
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(binary.name + ".partial")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod")
    run_build(
        [
            go,
            "build",
            "-trimpath",
            f"-ldflags=-s -w {ldflags.format(version=version)}",
            "-o",
            str(partial),
            package,
        ],
        module_dir,
        f"building {name} {version} with Go",
        env,
    )
    partial.rename(binary)


def fetch_etcd() -> Path:
    return _go_binary("etcd", _deploy_file("etcd"), "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3")


def fetch_apiserver() -> Path:
    return _go_binary(
        "kube-apiserver",
        _deploy_file("apiserver"),
        "k8s.io/kubernetes",
        "k8s.io/kubernetes/cmd/kube-apiserver",
        # Stamp the version the way the upstream release build does, so /version tells the truth.
        "-X k8s.io/component-base/version.gitVersion={version}"
        " -X k8s.io/component-base/version.gitTreeState=clean",
    )


def fetch_kubectl() -> Path:
    """The real kubectl, built from the same k8s.io/kubernetes version as the apiserver: the client
    the read-only Kubernetes API of `podledger serve` is tested with."""
    return _go_binary(
        "kubectl",
        _deploy_file("kubectl"),
        "k8s.io/kubernetes",
        "k8s.io/kubernetes/cmd/kubectl",
        "-X k8s.io/component-base/version.gitVersion={version}"
        " -X k8s.io/component-base/version.gitTreeState=clean",
    )
