"""What every command family shares: the connection options and the Settings they produce."""

from __future__ import annotations

import argparse

from podledger.config import Settings


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("connection (flags override PODLEDGER_* environment variables)")
    g.add_argument("--bootstrap", help="Kafka bootstrap servers (PODLEDGER_BOOTSTRAP)")
    g.add_argument("--kubeconfig", help="kubeconfig file (KUBECONFIG / PODLEDGER_KUBECONFIG)")
    g.add_argument("--node", help="the node this process serves (PODLEDGER_NODE; default: hostname)")
    g.add_argument("--topic-prefix", help="topic name prefix (PODLEDGER_TOPIC_PREFIX; default podledger.)")
    g.add_argument(
        "--partitions", type=int, help="partitions of every topic (PODLEDGER_PARTITIONS; default 6)"
    )
    g.add_argument("--log-level", help="debug, info, warning, error (PODLEDGER_LOG_LEVEL; default warning)")


def add_node_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("node agents")
    g.add_argument("--runtime", help="container runtime: process or sim (PODLEDGER_RUNTIME; default process)")
    g.add_argument("--manifest-dir", help="static pod manifest directory (PODLEDGER_MANIFEST_DIR)")
    g.add_argument("--manifest-url", help="static pod manifest URL (PODLEDGER_MANIFEST_URL)")


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by whichever of the options above were given."""
    return Settings.from_env(
        runtime=getattr(args, "runtime", None),
        manifest_dir=getattr(args, "manifest_dir", None),
        manifest_url=getattr(args, "manifest_url", None),
        bootstrap=getattr(args, "bootstrap", None),
        kubeconfig=getattr(args, "kubeconfig", None),
        node=getattr(args, "node", None),
        topic_prefix=getattr(args, "topic_prefix", None),
        partitions=getattr(args, "partitions", None),
        log_level=getattr(args, "log_level", None),
    )
