"""deploy/docker-compose.yml (and its SASL overlay) is valid and the image installs our package."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import yaml

from podledger.config import ENV_PREFIX, Settings
from tests.support.processes import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"


def run_compose_config(tmp_path: Path, *overlays: str, env: dict[str, str] | None = None) -> Any:
    """`docker-compose config` of docker-compose.yml plus `overlays` (files in deploy/)."""
    compose = shutil.which("docker-compose")
    assert compose, "docker-compose is needed (make test installs Debian's package)"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    files = [arg for name in ("docker-compose.yml", *overlays) for arg in ("-f", str(DEPLOY / name))]
    return subprocess.run(
        [compose, "-p", "podledger", *files, "config"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "KUBECONFIG": str(kubeconfig),
            "PODLEDGER_NODE": "node-7",
            **(env or {}),
        },
    )


def compose_config(tmp_path: Path, *overlays: str, env: dict[str, str] | None = None) -> dict:
    result = run_compose_config(tmp_path, *overlays, env=env)
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


def published_ports(service: dict) -> list[tuple[str, str]]:
    """(host address, host port) of each published port, in short or long syntax."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            out.append((port.get("host_ip", ""), str(port.get("published", ""))))
        else:
            parts = str(port).split("/")[0].split(":")
            out.append((parts[0] if len(parts) == 3 else "", parts[-2] if len(parts) > 1 else ""))
    return out


def test_kafka_is_published_on_loopback_only_by_default(tmp_path: Path) -> None:
    assert published_ports(compose_config(tmp_path)["services"]["kafka"]) == [("127.0.0.1", "29092")]


SASL_PASSWORDS = {
    f"PODLEDGER_KAFKA_{role}_PASSWORD": f"{role.lower()}-pw"
    for role in ("ADMIN", "FOLD", "SINK", "NODE", "CONSUMER")
}


def test_the_sasl_overlay_needs_every_password(tmp_path: Path) -> None:
    missing = dict(SASL_PASSWORDS)
    del missing["PODLEDGER_KAFKA_SINK_PASSWORD"]
    result = run_compose_config(tmp_path, "docker-compose.sasl.yml", env=missing)
    assert result.returncode != 0
    assert "PODLEDGER_KAFKA_SINK_PASSWORD" in result.stderr


def test_the_sasl_overlay_gives_every_role_its_own_user(tmp_path: Path) -> None:
    from podledger.acls import Namespace

    config = compose_config(tmp_path, "docker-compose.sasl.yml", env=SASL_PASSWORDS)
    services = config["services"]
    assert set(services) == {"kafka", "topics", "acls", "podledger", "sink", "node"}

    kafka = services["kafka"]
    script = " ".join(kafka["command"]).replace("$$", "$")
    for line in (
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        "super.users=User:admin",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.security.protocol.map=CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,HOST:SASL_PLAINTEXT",
        "CONTROLLER://127.0.0.1:9093",  # the controller listens on the container's loopback only
    ):
        assert line in script
    assert "--add-scram" in script and "--command-config" in " ".join(kafka["healthcheck"]["test"])
    assert kafka["environment"]["KAFKA_ADMIN_PASSWORD"] == "admin-pw"
    assert kafka["environment"]["KAFKA_NODE_USER"] == "node-7"
    assert published_ports(kafka) == [("127.0.0.1", "29092")]

    users = {}
    for name in ("topics", "acls", "podledger", "sink", "node"):
        env = services[name]["environment"]
        settings = Settings.from_env({k: str(v) for k, v in env.items()})  # checks the SASL settings too
        assert (settings.kafka_security_protocol, settings.sasl_mechanism()) == (
            "SASL_PLAINTEXT",
            "SCRAM-SHA-512",
        )
        assert settings.bootstrap == "kafka:9092"
        users[name] = (settings.kafka_sasl_username, settings.kafka_sasl_password)
    assert users == {
        "topics": ("admin", "admin-pw"),
        "acls": ("admin", "admin-pw"),
        "podledger": ("fold", "fold-pw"),
        "sink": ("sink", "sink-pw"),
        "node": ("node-7", "node-pw"),
    }
    assert services["podledger"]["command"] == ["run", "--roles", "fold"]
    assert services["sink"]["command"] == ["run", "--roles", "sink"]
    # The sink's Faust worker has an app id of its own, the one `acls apply` grants it.
    assert services["sink"]["environment"]["PODLEDGER_APP_ID"] == Namespace("podledger.", "", "").sink_app_id
    assert services["acls"]["command"][:4] == ["acls", "apply", "--nodes", "node-7"]
    assert services["acls"]["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    for name in ("podledger", "sink", "node"):
        assert services[name]["depends_on"]["acls"]["condition"] == "service_completed_successfully"


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
