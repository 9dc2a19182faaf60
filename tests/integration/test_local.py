"""`podledger local`: the project's own local services (a Kafka broker, etcd and kube-apiserver), and
the test suite using the user's instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from podledger import local
from tests.support.processes import REPO_ROOT, path_with, run_podledger


def _cache_with_artifacts(tmp_path: Path) -> Path:
    """A cache of its own that links to the artifacts already built (no rebuild, no shared state)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    libs = local.fetch_kafka()
    (cache / libs.parent.name).symlink_to(libs.parent)
    (cache / "bin").symlink_to(local.fetch_etcd().parent)
    return cache


@pytest.mark.kafka
def test_local_up_reuses_and_down_stops(tmp_path: Path) -> None:
    env = {"PODLEDGER_CACHE": str(_cache_with_artifacts(tmp_path))}
    first = run_podledger("local", "up", "--no-kube", env=env)
    try:
        assert first.returncode == 0, first.stderr
        [export] = first.stdout.splitlines()
        assert export.startswith("export PODLEDGER_BOOTSTRAP=127.0.0.1:")
        again = run_podledger("local", "up", "--no-kube", env=env)
        assert again.stdout == first.stdout  # the running broker is reused, not a second one
        status = run_podledger("local", "status", env=env)
        assert export.split("=", 1)[1] in status.stdout
    finally:
        down = run_podledger("local", "down", env=env)
    assert down.returncode == 0 and "kafka" in down.stdout
    assert "kafka: not running" in run_podledger("local", "status", env=env).stdout


@pytest.mark.kafka
@pytest.mark.kube
def test_tests_use_the_broker_and_cluster_the_user_names(
    kafka_bootstrap: str, kubeconfig: str, tmp_path: Path
) -> None:
    """With PODLEDGER_BOOTSTRAP and KUBECONFIG set, the suite starts nothing of its own: here it
    could not, since neither Java nor Go is on its PATH and its cache is empty."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PODLEDGER_")}
    env.update(
        PODLEDGER_BOOTSTRAP=kafka_bootstrap,
        KUBECONFIG=kubeconfig,
        PODLEDGER_CACHE=str(tmp_path / "empty-cache"),
        PATH=path_with(tmp_path),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integration/test_one_pod_end_to_end.py",
            "tests/integration/test_topics.py::test_create_twice_then_read_configs_back",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2 passed" in result.stdout
    assert not (tmp_path / "empty-cache").exists()
