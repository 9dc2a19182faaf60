"""The real Kafka broker and kube-apiserver (with etcd) that tests and the demo run on.

Nothing here is mocked: the broker is Apache Kafka resolved from Maven with the machine's Maven
and run with the machine's Java; etcd and kube-apiserver are built with the machine's Go from
their published modules (deploy/local/). Artifacts are cached under ~/.cache/podledger (or
$PODLEDGER_CACHE); each running instance lives in a directory of its own on free loopback ports.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from podledger.errors import UserError

log = logging.getLogger("podledger.local")

REPO_DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "local"
KAFKA_JAVA_OPTS = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


def cache_dir() -> Path:
    root = os.environ.get("PODLEDGER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "podledger"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def free_port() -> int:
    """A loopback port nobody listens on now (the OS picks it, so parallel runs never collide)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _need(tool: str, how: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise UserError(f"{tool} is not installed or not on PATH: {how}")
    return path


def _deploy_file(*parts: str) -> Path:
    path = REPO_DEPLOY.joinpath(*parts)
    if not path.exists():
        raise UserError(
            f"{path} is missing: the local broker and apiserver run from a podledger source checkout"
        )
    return path


def _progress(message: str) -> None:
    print(f"podledger: {message}", file=sys.stderr, flush=True)


def _run_build(cmd: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    started = time.monotonic()
    _progress(f"{what} (first run only; cached afterwards) ...")
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise UserError(f"{what} failed (exit {proc.returncode}); its output is above")
    _progress(f"{what}: done in {time.monotonic() - started:.0f}s")


# --------------------------------------------------------------------------- artifacts


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
    _need("java", "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)")
    mvn = _need("mvn", "install Apache Maven (e.g. apt-get install maven)")
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    pom = _deploy_file("kafka", "pom.xml")
    _run_build(
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
    go = _need("go", "install Go 1.24 or newer (https://go.dev/doc/install) and put it on PATH")
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(binary.name + ".partial")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod")
    _run_build(
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


# --------------------------------------------------------------------------- processes


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the process that started us dies (tests killed hard)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


def _spawn(cmd: list[str], log_path: Path, *, detached: bool, env: dict[str, str] | None = None) -> int:
    logf = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=os.setsid if detached else _die_with_parent,
        )
    finally:
        logf.close()
    return proc.pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child is dead for our purposes.
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as f:
        if f.read().split(")")[-1].split()[0] == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            return False
    return True


def stop_process(pid: int, timeout: float = 20.0) -> None:
    """SIGTERM the process group, wait, then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not _alive(pid):
                return
            time.sleep(0.1)


def _log_tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_until(ready: Callable[[], bool], pid: int, timeout: float, what: str, log_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            raise UserError(f"{what} exited during start-up; log {log_path}:\n{_log_tail(log_path)}")
        if ready():
            return
        time.sleep(0.25)
    stop_process(pid)
    raise UserError(f"{what} did not become ready in {timeout:.0f}s; log {log_path}:\n{_log_tail(log_path)}")


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


# --------------------------------------------------------------------------- Kafka


@dataclass
class KafkaHandle:
    bootstrap: str
    pid: int
    workdir: str
    log: str

    def stop(self) -> None:
        stop_process(self.pid)


_KAFKA_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.coordinator=WARN
log4j.logger.org.apache.kafka.coordinator=WARN
log4j.logger.state.change.logger=WARN
"""


def _kafka_properties(workdir: Path, port: int, controller_port: int) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            f"log.dirs={workdir / 'data'}",
            # One node: every internal topic has one replica, and groups start without delay.
            "default.replication.factor=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=10",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=10",
            "share.coordinator.state.topic.replication.factor=1",
            "group.initial.rebalance.delay.ms=0",
            "num.partitions=1",
            "auto.create.topics.enable=true",
            "log.flush.interval.messages=9223372036854775807",
            "",
        ]
    )


def start_kafka(workdir: Path, *, detached: bool = False, timeout: float = 120.0) -> KafkaHandle:
    """Format a KRaft single-node data dir in `workdir` and run the broker on free ports."""
    libs = fetch_kafka()
    java = _need("java", "install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)")
    workdir.mkdir(parents=True, exist_ok=True)
    port, controller_port = free_port(), free_port()
    props = workdir / "server.properties"
    props.write_text(_kafka_properties(workdir, port, controller_port))
    (workdir / "log4j.properties").write_text(_KAFKA_LOG4J)
    classpath = f"{libs}/*"
    log_opts = [f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}", f"-Dkafka.logs.dir={workdir}"]
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    fmt = subprocess.run(
        [
            java,
            *log_opts,
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(props),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    if fmt.returncode != 0:
        raise UserError(f"formatting the Kafka data dir failed:\n{fmt.stdout}{fmt.stderr}")
    log_path = workdir / "kafka.log"
    pid = _spawn(
        [java, *KAFKA_JAVA_OPTS, *log_opts, "-cp", classpath, "kafka.Kafka", str(props)],
        log_path,
        detached=detached,
    )

    def ready() -> bool:
        return (
            _port_open(port)
            and "Kafka Server started" in log_path.read_text(errors="replace")
            and _group_coordinator_ready(f"127.0.0.1:{port}")
        )

    _wait_until(ready, pid, timeout, "the Kafka broker", log_path)
    return KafkaHandle(f"127.0.0.1:{port}", pid, str(workdir), str(log_path))


def _group_coordinator_ready(bootstrap: str) -> bool:
    """Ask for a group coordinator: on a new broker this creates __consumer_offsets, so the
    first consumer group does not start with 'coordinator not available' errors."""
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient

    async def check() -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        try:
            await admin.start()
            await admin.find_coordinator("podledger-startup-probe")
            return True
        except Exception:
            return False
        finally:
            await admin.close()

    client_log = logging.getLogger("aiokafka")
    quiet, client_log.disabled = client_log.disabled, True
    try:
        return asyncio.run(check())
    finally:
        client_log.disabled = quiet


# --------------------------------------------------------------------------- kube-apiserver


@dataclass
class KubeHandle:
    kubeconfig: str
    server: str
    token: str
    pids: list[int]
    workdir: str
    logs: list[str]
    api_args: list[str] = field(default_factory=list)  # how the apiserver was started

    def stop(self) -> None:
        for pid in self.pids:  # apiserver first, then etcd
            stop_process(pid)

    def stop_apiserver(self) -> None:
        """Stop only kube-apiserver (etcd keeps the data): an apiserver outage."""
        stop_process(self.pids[0])

    def start_apiserver(self, timeout: float = 120.0) -> None:
        """Start kube-apiserver again on the same port, over the same etcd."""
        log_path = Path(self.logs[0])
        self.pids[0] = _spawn(self.api_args, log_path, detached=False)
        cafile = Path(self.workdir) / "pki" / "ca.crt"
        _wait_until(
            lambda: _api_ready(self.server, self.token, cafile),
            self.pids[0],
            timeout,
            "kube-apiserver",
            log_path,
        )


def _openssl(*args: str, cwd: Path) -> None:
    openssl = _need("openssl", "install OpenSSL (e.g. apt-get install openssl)")
    proc = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise UserError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def _make_pki(pki: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1, and the service-account key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "30",
        "-subj",
        "/CN=podledger-local-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        cwd=pki,
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=kube-apiserver",
        "-keyout",
        "serving.key",
        "-out",
        "serving.csr",
        cwd=pki,
    )
    (pki / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "serving.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "30",
        "-extfile",
        "san.ext",
        "-out",
        "serving.crt",
        cwd=pki,
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def write_kubeconfig(path: Path, server: str, ca_file: Path, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "podledger-local",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_file.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": "podledger-admin", "user": {"token": token}}],
        "contexts": [
            {"name": "podledger-local", "context": {"cluster": "podledger-local", "user": "podledger-admin"}}
        ],
        "current-context": "podledger-local",
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
    path.chmod(0o600)


def start_kube(workdir: Path, *, detached: bool = False, timeout: float = 120.0) -> KubeHandle:
    """Start etcd and kube-apiserver on free loopback ports, with an admin token and kubeconfig."""
    etcd, apiserver = fetch_etcd(), fetch_apiserver()
    workdir.mkdir(parents=True, exist_ok=True)
    pki = workdir / "pki"
    _make_pki(pki)
    token = secrets.token_hex(24)
    (workdir / "tokens.csv").write_text(f'{token},podledger-admin,podledger-admin,"system:masters"\n')
    (workdir / "tokens.csv").chmod(0o600)

    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_log = workdir / "etcd.log"
    etcd_pid = _spawn(
        [
            str(etcd),
            "--name",
            "local",
            "--data-dir",
            str(workdir / "etcd"),
            "--listen-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer_port}",
            "--initial-cluster",
            f"local=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync",
            "--log-level",
            "warn",
        ],
        etcd_log,
        detached=detached,
    )

    def etcd_ready() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{etcd_port}/health", timeout=1) as r:
                return b'"true"' in r.read()
        except (OSError, urllib.error.URLError):
            return False

    _wait_until(etcd_ready, etcd_pid, 30, "etcd", etcd_log)

    api_log = workdir / "kube-apiserver.log"
    server = f"https://127.0.0.1:{api_port}"
    api_args = [
        str(apiserver),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={api_port}",
        f"--tls-cert-file={pki / 'serving.crt'}",
        f"--tls-private-key-file={pki / 'serving.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--token-auth-file={workdir / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.96.0.0/16",
        # No controller-manager runs here to create the default ServiceAccount.
        "--disable-admission-plugins=ServiceAccount",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
        "--endpoint-reconciler-type=none",
        f"--cert-dir={workdir / 'certs'}",
        "-v=0",
    ]
    try:
        api_pid = _spawn(api_args, api_log, detached=detached)
    except BaseException:
        stop_process(etcd_pid)
        raise
    try:
        _wait_until(
            lambda: _api_ready(server, token, pki / "ca.crt"), api_pid, timeout, "kube-apiserver", api_log
        )
    except BaseException:
        stop_process(api_pid)
        stop_process(etcd_pid)
        raise
    kubeconfig = workdir / "kubeconfig"
    write_kubeconfig(kubeconfig, server, pki / "ca.crt", token)
    return KubeHandle(
        str(kubeconfig),
        server,
        token,
        [api_pid, etcd_pid],
        str(workdir),
        [str(api_log), str(etcd_log)],
        api_args,
    )


def _api_ready(server: str, token: str, cafile: Path) -> bool:
    ctx = ssl.create_default_context(cafile=str(cafile))
    req = urllib.request.Request(f"{server}/readyz", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as r:
            return bool(r.status == 200)
    except (OSError, urllib.error.URLError):
        return False


# --------------------------------------------------------------------------- shared instances


def _state_file(name: str) -> Path:
    return cache_dir() / "local" / f"{name}.json"


def running_kafka() -> KafkaHandle | None:
    """The broker a previous `podledger local up` left running, if it still answers."""
    try:
        handle = KafkaHandle(**json.loads(_state_file("kafka").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    port = int(handle.bootstrap.rsplit(":", 1)[1])
    return handle if _alive(handle.pid) and _port_open(port) else None


def running_kube() -> KubeHandle | None:
    try:
        handle = KubeHandle(**json.loads(_state_file("kube").read_text()))
    except (OSError, ValueError, TypeError):
        return None
    port = int(handle.server.rsplit(":", 1)[1])
    return handle if all(_alive(p) for p in handle.pids) and _port_open(port) else None


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
