"""etcd and kube-apiserver on free loopback ports, with a private CA, an admin token and a kubeconfig."""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from podledger.errors import UserError
from podledger.local.artifacts import fetch_apiserver, fetch_etcd
from podledger.local.processes import free_port, need_tool, spawn, stop_process, wait_until


@dataclass
class KubeHandle:
    kubeconfig: str
    server: str
    token: str = field(repr=False)  # an admin's: never in a log line
    pids: list[int]
    workdir: str
    logs: list[str]
    api_args: list[str] = field(default_factory=list)  # how the apiserver was started

    def stop(self) -> None:
        for pid in self.pids:  # apiserver first, then etcd
            stop_process(pid)

    def stop_apiserver(self, timeout: float = 20.0) -> None:
        """Stop only kube-apiserver (etcd keeps the data): an apiserver outage. It gets `timeout`
        seconds to shut down gracefully (it drains its watches), then SIGKILL."""
        stop_process(self.pids[0], timeout)

    def start_apiserver(self, timeout: float = 120.0) -> None:
        """Start kube-apiserver again on the same port, over the same etcd."""
        log_path = Path(self.logs[0])
        self.pids[0] = spawn(self.api_args, log_path, detached=False)
        cafile = Path(self.workdir) / "pki" / "ca.crt"
        wait_until(
            lambda: _api_ready(self.server, self.token, cafile),
            self.pids[0],
            timeout,
            "kube-apiserver",
            log_path,
        )


def _openssl(*args: str, cwd: Path) -> None:
    openssl = need_tool("openssl", "install OpenSSL (e.g. apt-get install openssl)")
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
    etcd_pid = spawn(
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

    wait_until(etcd_ready, etcd_pid, 30, "etcd", etcd_log)

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
        api_pid = spawn(api_args, api_log, detached=detached)
    except BaseException:
        stop_process(etcd_pid)
        raise
    try:
        wait_until(
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
