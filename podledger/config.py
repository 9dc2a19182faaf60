"""Settings: every knob has a default, an environment variable and (in the CLI) a flag."""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from podledger.errors import UserError

ENV_PREFIX = "PODLEDGER_"
MAX_RUN_AS_ID = 2_147_483_647  # the largest uid/gid a pod's securityContext may name


def _default_node() -> str:
    return socket.gethostname().lower()


@dataclass(frozen=True, slots=True)
class Settings:
    """Configuration shared by every podledger process.

    Each field reads the environment variable PODLEDGER_<FIELD> (upper case); the kubeconfig
    also honours the standard KUBECONFIG.
    """

    bootstrap: str = ""  # Kafka bootstrap servers; empty means "start or reuse the local broker"
    kubeconfig: str = ""  # empty means "start or reuse the local apiserver" (demo) or in-cluster
    node: str = field(default_factory=_default_node)
    topic_prefix: str = "podledger."
    manifest_dir: str = ""  # static pod manifests (the kubelet's staticPodPath); empty: no file source
    manifest_url: str = ""  # a URL serving a Pod or PodList (staticPodURL); empty: no http source
    file_check_s: float = 20.0  # rescan period of the file source (inotify also wakes it)
    http_check_s: float = 20.0  # poll period of the http source
    api_source: bool = True  # watch the apiserver for this node's pods
    # The node agent's /healthz fails once the apiserver pod watch has been down (or not yet listed)
    # this long; a half-open connection counts as down once the watch's read timeout notices it.
    api_watch_down_s: float = 60.0
    # How long a service (node agent, fold, sink) waits at start for an unreachable broker or
    # apiserver before it gives up; 0 tries once. Wrong credentials end it at once.
    start_wait_s: float = 300.0
    runtime: str = "process"  # the node agent's container runtime: process or sim
    runtime_state_dir: str = (
        ""  # where the process runtime keeps state.json and logs; default under the cache
    )
    sim_seed: int = 0  # jitter seed of the sim runtime
    # What the process runtime runs a container as when the node agent is root and the pod sets no
    # runAsUser/runAsGroup: an unprivileged id (65534 is nobody/nogroup), never root.
    runtime_default_uid: int = 65534
    runtime_default_gid: int = 65534
    relist_period_s: float = 1.0  # the PLEG's relist period
    pod_resync_s: float = 60.0  # a pod worker looks at its pod at least this often (syncFrequency)
    health_port: int = 0  # /healthz and /metrics on 127.0.0.1:<port> (node agent or worker); 0: off
    # `podledger serve`, the read-only Kubernetes API (docs/consuming.md): where it listens, the
    # bearer token file it requires (needed to listen beyond loopback), how often watches get BOOKMARKs.
    serve_listen: str = "127.0.0.1:8001"
    serve_token_file: str = ""
    serve_bookmark_s: float = 60.0
    # `podledger metrics`: pod metrics for Prometheus (docs/metrics.md)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9477
    metrics_removed_keep_s: float = 300.0  # a removed pod's counters stay this long after its gauges
    partitions: int = 6
    replication_factor: int = 1  # raise to 3 on a real cluster
    app_id: str = ""  # Faust application id; defaults to "<topic_prefix>fold"
    max_event_bytes: int = 1_048_576
    hold_max_events: int = 100  # events held per pod not yet announced by pod-updates
    hold_max_ms: int = 60_000  # longest an event waits for its pod's announcement (event time)
    # The native fold core (streams/foldcore/, built by `make install`), for `podledger fold` and
    # the live fold worker's batches: "auto" uses it when it is installed, "off" always folds in
    # Python, anything else is the core's path.
    fold_core: str = "auto"
    fold_batch_size: int = 500  # events folded per batch (outputs acknowledged once per batch)
    fold_batch_ms: int = 0  # longest wait to fill a batch (0: what is fetched; it grows under load)
    # Longest a read record waits for a sibling ingress topic of its partition that the broker
    # holds more of (so the merge by broker stamp spans fetches); 0: fold each fetch as merged.
    fold_sync_wait_ms: int = 5_000
    # The fold consumer's fetches: answered once this many bytes wait, or after this long. A steady
    # stream then comes in a few larger fetches, not one per record (streams/fold_consumer.py);
    # 25 ms rather than 10: a lower p99 under load in 7 of 9 alternating pairs (docs/capacity.md).
    fold_fetch_min_bytes: int = 131_072
    fold_fetch_wait_ms: int = 25
    watermark_ms: int = 1000  # how often the fold publishes its watermarks (docs/guarantees.md)
    # With several replicas, how far behind the broker's clock an idle partition's watermark stays:
    # a record the leader stamped sits above the end offsets until its followers copied it
    # (the broker's replica.lag.time.max.ms bounds an in-sync follower's lag). Unused with one replica.
    watermark_isr_lag_ms: int = 30_000
    fold_workers: int = 1  # processes `podledger run --roles fold` runs (podledger/workers.py)
    session_timeout_ms: int = 10_000  # a worker that stops heartbeating loses its partitions after this
    sink_qps: float = 50.0
    sink_burst: int = 100
    sink_workers: int = 8  # pods synced at once (each call still takes a QPS token)
    sink_reconcile_ms: int = 10_000  # how often API statuses are checked for drift
    sink_read: str = "get"  # how the sink reads a pod before writing: get (as the kubelet) or watch
    log_level: str = "warning"
    data_dir: str = ""  # Faust's working files; defaults to faust/<app id> under the cache
    # The audit index (`podledger index`, `history`, `why`, `export`): a SQLite file; empty: one per
    # topic prefix under the cache (PODLEDGER_INDEX).
    index: str = ""
    # Proof of origin (schemas/origin.py): a node agent with a secret signs what it writes; a fold
    # with a keyring folds only records whose writer it can prove.
    node_secret_file: str = ""  # this node's secret (podledger keys new); empty: records go unsigned
    keyring_file: str = ""  # the fold's node -> status key map; empty: the writer is not checked
    # Kafka client security, passed through to aiokafka and Faust (README.md, "Securing Kafka").
    kafka_security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    kafka_sasl_mechanism: str = ""  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    kafka_sasl_username: str = ""
    kafka_sasl_password: str = field(default="", repr=False)  # never in repr, logs or error lines
    kafka_ssl_cafile: str = ""
    kafka_ssl_certfile: str = ""
    kafka_ssl_keyfile: str = ""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then the environment, then explicit overrides (CLI flags that were given)."""
        env = dict(os.environ if env is None else env)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if f.name == "kubeconfig" and raw is None:
                raw = env.get("KUBECONFIG")
            if raw is not None and raw != "":
                values[f.name] = _coerce(f.name, f.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """Every setting within its range (RANGES, CHOICES); a UserError naming the variable and
        what it accepts otherwise, so a bad value stops the process at start (exit code 2)."""
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise UserError(f"{ENV_PREFIX}{name.upper()}={value} is out of range: from {low} to {high}")
        for name, allowed in CHOICES.items():
            if str(getattr(self, name)).lower() not in allowed:
                raise UserError(
                    f"{ENV_PREFIX}{name.upper()}={getattr(self, name)!r} is not one of {', '.join(allowed)}"
                )
        if not self.node:
            raise UserError("node name is empty: set PODLEDGER_NODE or --node")
        self._check_kafka_security()
        if self.index and os.path.isdir(self.index):
            raise UserError(f"PODLEDGER_INDEX={self.index!r} is a directory: name the index file")

    def _check_kafka_security(self) -> None:
        """The Kafka security settings fit together; no message names the password."""
        protocol = self.kafka_security_protocol
        if protocol not in KAFKA_SECURITY_PROTOCOLS:
            raise UserError(
                f"PODLEDGER_KAFKA_SECURITY_PROTOCOL must be one of {', '.join(KAFKA_SECURITY_PROTOCOLS)},"
                f" not {protocol!r}"
            )
        if protocol.startswith("SASL_"):
            if self.sasl_mechanism() not in KAFKA_SASL_MECHANISMS:
                raise UserError(
                    f"PODLEDGER_KAFKA_SASL_MECHANISM must be one of {', '.join(KAFKA_SASL_MECHANISMS)}"
                    f" with {protocol}, not {self.kafka_sasl_mechanism!r}"
                )
            if not self.kafka_sasl_username or not self.kafka_sasl_password:
                raise UserError(
                    f"{protocol} needs PODLEDGER_KAFKA_SASL_USERNAME and PODLEDGER_KAFKA_SASL_PASSWORD"
                )

    def index_path(self) -> str:
        """The audit index file: PODLEDGER_INDEX, else audit/<topic prefix>sqlite under the cache."""
        if self.index:
            return self.index
        from podledger.paths import cache_dir

        return str(cache_dir() / "audit" / f"{self.topic_prefix or 'unprefixed.'}sqlite")

    def faust_data_dir(self) -> str:
        """Faust's working files for the fold app: PODLEDGER_DATA_DIR, else faust/<app id> under the cache."""
        if self.data_dir:
            return self.data_dir
        from podledger.paths import cache_dir

        return str(cache_dir() / "faust" / self.fold_app_id)

    def runtime_dir(self) -> str:
        """The process runtime's state directory: one per node, so agents of several nodes never share it."""
        if self.runtime_state_dir:
            return self.runtime_state_dir
        from podledger.paths import cache_dir

        return str(cache_dir() / "runtime" / self.node)

    @property
    def fold_app_id(self) -> str:
        return self.app_id or f"{self.topic_prefix}fold"

    def topic(self, name: str) -> str:
        """The full (prefixed) Kafka topic name of a logical topic."""
        return self.topic_prefix + name

    def sasl_mechanism(self) -> str:
        """The SASL mechanism as Kafka spells it (scram_sha_512 -> SCRAM-SHA-512); empty: none."""
        return self.kafka_sasl_mechanism.strip().upper().replace("_", "-")

    def kafka_client_options(self) -> dict[str, Any]:
        """Security options for aiokafka clients."""
        opts: dict[str, Any] = {"security_protocol": self.kafka_security_protocol}
        if self.kafka_security_protocol.startswith("SASL_"):
            # aiokafka logs every request at debug level, SASL tokens included (PLAIN's holds the password).
            logging.getLogger("aiokafka.conn").addFilter(_HIDE_SASL_TOKENS)
            opts.update(
                sasl_mechanism=self.sasl_mechanism(),
                sasl_plain_username=self.kafka_sasl_username,
                sasl_plain_password=self.kafka_sasl_password,
            )
        if self.kafka_security_protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context

            opts["ssl_context"] = create_ssl_context(
                cafile=self.kafka_ssl_cafile or None,
                certfile=self.kafka_ssl_certfile or None,
                keyfile=self.kafka_ssl_keyfile or None,
            )
        return opts


KAFKA_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class _HideSaslTokens(logging.Filter):
    """Replaces SASL authentication requests and responses in aiokafka's debug lines by a placeholder."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(_is_sasl_token(a) for a in record.args):
            record.args = tuple("<SASL token hidden>" if _is_sasl_token(a) else a for a in record.args)
        return True


def _is_sasl_token(value: Any) -> bool:
    return type(value).__name__.startswith("SaslAuthenticate")


_HIDE_SASL_TOKENS = _HideSaslTokens()


# The accepted range of every numeric setting, inclusive (README.md, "Configuration").
RANGES: dict[str, tuple[float, float]] = {
    "file_check_s": (0.1, 3600),
    "http_check_s": (0.1, 3600),
    "api_watch_down_s": (1, 3600),
    "start_wait_s": (0, 86_400),
    "sim_seed": (0, 2**32 - 1),
    "runtime_default_uid": (1, MAX_RUN_AS_ID),  # unprivileged: never root
    "runtime_default_gid": (1, MAX_RUN_AS_ID),
    "relist_period_s": (0.05, 60),
    "pod_resync_s": (1, 86_400),
    "health_port": (0, 65_535),
    "serve_bookmark_s": (0.1, 3600),
    "metrics_port": (1, 65_535),
    "metrics_removed_keep_s": (0, 86_400),
    "partitions": (1, 10_000),
    "replication_factor": (1, 32),
    "max_event_bytes": (1_024, 64 << 20),
    "hold_max_events": (0, 100_000),
    "hold_max_ms": (0, 86_400_000),
    "fold_batch_size": (1, 100_000),
    "fold_batch_ms": (0, 60_000),
    "fold_sync_wait_ms": (0, 600_000),
    "fold_fetch_min_bytes": (1, 8 << 20),  # at most a partition's fetch (podledger.kafka)
    "fold_fetch_wait_ms": (0, 1_500),  # Faust's own long-poll is the most
    "watermark_ms": (100, 3_600_000),
    "watermark_isr_lag_ms": (0, 600_000),
    "fold_workers": (1, 64),
    "session_timeout_ms": (6_000, 1_800_000),  # the broker's default group session limits
    "sink_qps": (0.1, 100_000),
    "sink_burst": (1, 100_000),
    "sink_workers": (1, 1_024),
    "sink_reconcile_ms": (100, 86_400_000),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "runtime": ("process", "sim"),
    "sink_read": ("get", "watch"),
    "log_level": ("debug", "info", "warning", "error", "critical"),
}

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def _coerce(name: str, type_name: Any, raw: str) -> Any:
    kind = str(type_name)
    if kind == "bool":
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise UserError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a boolean (true or false)")
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise UserError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a number") from None
    return raw
