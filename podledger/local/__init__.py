"""The real Kafka broker and kube-apiserver (with etcd) that tests, benchmarks and the demo run on.

Nothing here is mocked. Artifacts are cached under the podledger cache directory
(see podledger.paths); each running instance lives in a directory of its own on free loopback
ports. Modules: artifacts (fetch and build), processes (spawn, wait, stop), broker (Kafka, PLAINTEXT
or SASL_SSL with ACLs), tls (the secure broker's certificates), apiserver (etcd + kube-apiserver),
instances (long-lived instances and per-run sessions).
Only the CLI, benchmarks and tests import this package; the pipeline itself never does.
"""

from podledger.local.apiserver import KubeHandle, start_kube, write_kubeconfig
from podledger.local.artifacts import fetch_apiserver, fetch_etcd, fetch_kafka, kafka_version
from podledger.local.broker import KafkaHandle, KafkaSecurity, start_kafka
from podledger.local.instances import down, running_kafka, running_kube, session, up
from podledger.local.processes import alive, free_port, log_tail, stop_process

__all__ = [
    "KafkaHandle",
    "KafkaSecurity",
    "KubeHandle",
    "alive",
    "down",
    "fetch_apiserver",
    "fetch_etcd",
    "fetch_kafka",
    "free_port",
    "kafka_version",
    "log_tail",
    "running_kafka",
    "running_kube",
    "session",
    "start_kafka",
    "start_kube",
    "stop_process",
    "up",
    "write_kubeconfig",
]
