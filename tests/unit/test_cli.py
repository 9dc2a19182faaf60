"""The console script: --help everywhere, and one clear line (never a traceback) for what the
user must fix: a malformed kubeconfig, an unreachable broker or apiserver, missing tools."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from podledger import local
from podledger.cli import build_parser
from tests.support.processes import path_with, run_podledger

SUBCOMMANDS = [
    "run",
    "node",
    "topics",
    "acls",
    "keys",
    "fold",
    "bench",
    "chaos",
    "schema",
    "local",
    "demo",
    "metrics",
    "history",
    "why",
    "index",
    "export",
    "serve",
    "pods",
    "ui",
    "verify",
]


def assert_one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("podledger: error:"), result.stderr
    errors = lines
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_parser_knows_every_subcommand() -> None:
    parser = build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert set(choices) == set(SUBCOMMANDS)


@pytest.mark.parametrize("sub", [None, *SUBCOMMANDS])
def test_help_on_every_subcommand(sub: str | None) -> None:
    result = run_podledger(*([sub] if sub else []), "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: podledger" + (f" {sub}" if sub else ""))


def test_schema_command_prints_a_topic_schema() -> None:
    result = run_podledger("schema", "pod-status")
    assert result.returncode == 0
    assert '"$id": "podledger/pod-status/v1"' in result.stdout


def test_malformed_kubeconfig(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nclusters: [ {unclosed\n")
    result = run_podledger("run", "--bootstrap", "127.0.0.1:1", env={"KUBECONFIG": str(bad)})
    assert_one_line_error(result, str(bad))


def test_kubeconfig_without_a_cluster(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    result = run_podledger("run", "--bootstrap", "127.0.0.1:1", env={"KUBECONFIG": str(bad)})
    assert_one_line_error(result, "kubeconfig", "KUBECONFIG")


def test_missing_kubeconfig_file(tmp_path: Path) -> None:
    result = run_podledger("run", "--bootstrap", "127.0.0.1:1", env={"KUBECONFIG": str(tmp_path / "nope")})
    assert_one_line_error(result, "does not exist")


def test_unreachable_apiserver(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    ca = tmp_path / "ca.crt"
    ca.write_text("")
    local.write_kubeconfig(kubeconfig, f"https://127.0.0.1:{local.free_port()}", ca, "token")
    env = {"KUBECONFIG": str(kubeconfig), "PODLEDGER_START_WAIT_S": "0"}
    result = run_podledger("run", "--bootstrap", "127.0.0.1:1", env=env)
    assert_one_line_error(result, "cannot reach the apiserver", "KUBECONFIG")


def test_a_service_waits_for_an_unreachable_apiserver_then_gives_up(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    ca = tmp_path / "ca.crt"
    ca.write_text("")
    local.write_kubeconfig(kubeconfig, f"https://127.0.0.1:{local.free_port()}", ca, "token")
    env = {"KUBECONFIG": str(kubeconfig), "PODLEDGER_START_WAIT_S": "4"}
    started = time.monotonic()
    result = run_podledger("run", "--bootstrap", "127.0.0.1:1", env=env, timeout=60)
    assert time.monotonic() - started >= 3
    assert "waiting for the apiserver" in result.stderr
    assert result.returncode == 2 and "cannot reach the apiserver" in result.stderr.strip().splitlines()[-1]


def test_unreachable_broker() -> None:
    port = local.free_port()
    result = run_podledger("topics", "create", "--bootstrap", f"127.0.0.1:{port}", timeout=60)
    assert_one_line_error(result, "cannot reach the Kafka broker", f"127.0.0.1:{port}", "PODLEDGER_BOOTSTRAP")


def test_no_broker_configured() -> None:
    assert_one_line_error(run_podledger("topics", "create"), "PODLEDGER_BOOTSTRAP")


def test_bad_number_in_environment() -> None:
    assert_one_line_error(
        run_podledger("topics", "create", env={"PODLEDGER_PARTITIONS": "many"}), "PODLEDGER_PARTITIONS"
    )


@pytest.mark.parametrize(
    ("present", "missing"),
    [((), "java"), (("java",), "mvn")],
)
def test_missing_java_or_maven(tmp_path: Path, present: tuple[str, ...], missing: str) -> None:
    env = {"PATH": path_with(tmp_path, *present), "PODLEDGER_CACHE": str(tmp_path / "cache")}
    assert_one_line_error(
        run_podledger("local", "fetch", "--no-kube", env=env), f"{missing} is not installed", "install"
    )


def test_missing_go(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # Kafka's jars are already there; etcd and kube-apiserver would need Go.
    shutil.copytree(local.fetch_kafka().parent, cache / local.fetch_kafka().parent.name)
    env = {"PATH": path_with(tmp_path, "java", "mvn"), "PODLEDGER_CACHE": str(cache)}
    assert_one_line_error(run_podledger("local", "fetch", env=env), "go is not installed", "install Go")


@pytest.mark.parametrize(("text", "rate"), [("half", None), ("0", 0), ("1200", 1200)])
def test_bench_rate_is_events_per_second_or_half_the_capacity(text: str, rate: int | None) -> None:
    args = build_parser().parse_args(["bench", "fold", "--rate", text])
    assert args.rate == rate


@pytest.mark.parametrize("text", ["fast", "-5", "2000000"])
def test_bench_rate_refuses_what_is_no_rate(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["bench", "fold", "--rate", text])
    assert exit_.value.code == 2
    assert "--rate" in capsys.readouterr().err


def test_bench_rate_defaults_to_half_the_capacity() -> None:
    assert build_parser().parse_args(["bench", "fold"]).rate is None
