"""deploy/docker-compose.yml is valid and the image installs our package."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import yaml

from podledger.config import ENV_PREFIX, Settings
from tests.support import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"


def compose_config(tmp_path: Path) -> dict:
    compose = shutil.which("docker-compose")
    assert compose, "docker-compose is needed (make test installs Debian's package)"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    result = subprocess.run(
        [compose, "-p", "podledger", "-f", str(DEPLOY / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "PODLEDGER_NODE": "node-7"},
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_file_validates_and_wires_kafka_to_podledger(tmp_path: Path) -> None:
    config = compose_config(tmp_path)
    services = config["services"]
    assert set(services) == {"kafka", "topics", "podledger", "node"}

    kafka = services["kafka"]
    image, tag = kafka["image"].split(":")
    assert image == "apache/kafka" and re.fullmatch(r"3\.9\.\d+", tag)
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, single node
    assert str(env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"]) == "1"
    assert str(env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"]) == "0"
    assert "kafka-broker-api-versions" in " ".join(kafka["healthcheck"]["test"])

    for name in ("topics", "podledger", "node"):
        svc = services[name]
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert Path(svc["build"]["context"]).resolve() == REPO_ROOT
        assert svc["environment"]["PODLEDGER_BOOTSTRAP"] == "kafka:9092"
        assert svc["environment"]["PODLEDGER_NODE"] == "node-7"
    assert services["topics"]["command"] == ["topics", "create"]
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["podledger"]["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    assert services["podledger"]["command"] == ["run", "--roles", "fold,sink"]
    # The node agents: their manifests (the examples by default), runtime state and health check.
    node = services["node"]
    assert node["command"] == ["node"]
    assert node["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    env = node["environment"]
    assert env["PODLEDGER_RUNTIME"] == "process"
    mounts = {target: (source, mode) for source, target, mode in (v.split(":") for v in node["volumes"])}
    source, mode = mounts[env["PODLEDGER_MANIFEST_DIR"]]
    assert Path(source).resolve() == DEPLOY / "examples" and mode == "ro"
    assert mounts[env["PODLEDGER_RUNTIME_STATE_DIR"]][0] in config["volumes"]
    assert f":{env['PODLEDGER_HEALTH_PORT']}/healthz" in " ".join(node["healthcheck"]["test"])


def test_compose_environment_names_real_settings(tmp_path: Path) -> None:
    """Every PODLEDGER_* variable the compose file sets is one Settings reads."""
    known = {ENV_PREFIX + name.upper() for name in Settings.__dataclass_fields__}
    for svc in ("topics", "podledger", "node"):
        env = compose_config(tmp_path)["services"][svc]["environment"]
        podledger_vars = {k for k in env if k.startswith(ENV_PREFIX)}
        assert podledger_vars and podledger_vars <= known, podledger_vars - known
        assert Settings.from_env({k: str(v) for k, v in env.items()}).bootstrap == "kafka:9092"


def test_dockerfile_installs_the_package_the_tests_install() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    package_dirs = set(project["tool"]["setuptools"]["package-dir"].values())
    copied = set(re.findall(r"^COPY (\S+) \./\1$", dockerfile, re.M))
    assert package_dirs <= copied, package_dirs - copied
    assert re.search(r"^COPY pyproject.toml README.md \./$", dockerfile, re.M)
    assert re.search(r"pip install -c deploy/constraints.txt \.(\s|$)", dockerfile)
    assert "-c deploy/constraints.txt -e '.[test]'" in (REPO_ROOT / "Makefile").read_text()
    assert re.search(r'^ENTRYPOINT \["podledger"\]', dockerfile, re.M)
    assert "podledger" in project["project"]["scripts"]


def test_the_built_wheel_carries_every_module_and_schema(tmp_path: Path) -> None:
    """What the Dockerfile's `pip install .` gets: a wheel from the same pyproject."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO_ROOT)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("podledger-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in (
        ("schemas", "podledger/schemas"),
        ("streams", "podledger/streams"),
        ("agents", "podledger/agents"),
        ("podledger", "podledger"),
    ):
        for source in (REPO_ROOT / folder).glob("*.py"):
            assert f"{package}/{source.name}" in names
    for schema in (REPO_ROOT / "schemas").glob("*.json"):
        assert f"podledger/schemas/{schema.name}" in names
