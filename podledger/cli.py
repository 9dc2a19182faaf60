"""The `podledger` command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podledger.config import Settings
from podledger.errors import UserError

log = logging.getLogger("podledger")


# --------------------------------------------------------------------------- logging


class KeyValueFormatter(logging.Formatter):
    """One line per record: time, level, logger, message — easy to grep and to parse."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = (
            f"ts={ts}.{int(record.msecs):03d}Z level={record.levelname.lower()} logger={record.name}"
            f" msg={json.dumps(record.getMessage())}"
        )
        if record.exc_info:
            line += " exc=" + json.dumps(self.formatException(record.exc_info))
        return line


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if root.level > logging.DEBUG:
        # urllib3 warns on every retry; podledger logs the failure that matters once.
        logging.getLogger("urllib3").setLevel(logging.ERROR)


# --------------------------------------------------------------------------- settings


def _add_common(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("connection (flags override PODLEDGER_* environment variables)")
    g.add_argument("--bootstrap", help="Kafka bootstrap servers (PODLEDGER_BOOTSTRAP)")
    g.add_argument("--kubeconfig", help="kubeconfig file (KUBECONFIG / PODLEDGER_KUBECONFIG)")
    g.add_argument("--node", help="the node this process serves (PODLEDGER_NODE; default: hostname)")
    g.add_argument("--topic-prefix", help="topic name prefix (PODLEDGER_TOPIC_PREFIX; default podledger.)")
    g.add_argument(
        "--partitions", type=int, help="partitions of every topic (PODLEDGER_PARTITIONS; default 6)"
    )
    g.add_argument("--log-level", help="debug, info, warning, error (PODLEDGER_LOG_LEVEL; default warning)")


def _add_node_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("node agents")
    g.add_argument("--runtime", help="container runtime: process or sim (PODLEDGER_RUNTIME; default process)")
    g.add_argument("--manifest-dir", help="static pod manifest directory (PODLEDGER_MANIFEST_DIR)")
    g.add_argument("--manifest-url", help="static pod manifest URL (PODLEDGER_MANIFEST_URL)")


def settings_from(args: argparse.Namespace) -> Settings:
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


def _require_bootstrap(settings: Settings) -> None:
    if not settings.bootstrap:
        raise UserError(
            "no Kafka broker configured: set PODLEDGER_BOOTSTRAP or --bootstrap"
            " (or run 'podledger local up' for a local one)"
        )


# --------------------------------------------------------------------------- commands


def cmd_topics(args: argparse.Namespace) -> int:
    from podledger.streams.topics import describe, ensure_topics

    settings = settings_from(args)
    _require_bootstrap(settings)
    if args.action == "create":
        changes = asyncio.run(ensure_topics(settings))
        for change in changes:
            print(f"{change.action:9} {change.topic}" + (f"  ({change.detail})" if change.detail else ""))
    else:
        for name, info in asyncio.run(describe(settings)).items():
            print(name, " ".join(f"{k}={v}" for k, v in info.items()))
    return 0


def cmd_fold(args: argparse.Namespace) -> int:
    """Fold a JSON-lines file of journal or ingress events offline; print versioned statuses."""
    from podledger.schemas import encode
    from podledger.streams.fold import HoldLimits
    from podledger.streams.replay import ReplayStats, replay

    settings = settings_from(args)
    if args.file == "-":
        source = sys.stdin.buffer
    else:
        try:
            source = open(args.file, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise UserError(f"cannot read {args.file}: {exc.strerror}") from None
    stats = ReplayStats()
    started = time.monotonic()
    out = sys.stdout.buffer
    wanted = set(args.outputs.split(","))
    try:
        for output in replay(source, HoldLimits(settings.hold_max_events, settings.hold_max_ms), stats):
            if output.topic == "dead-letter":
                print(f"podledger fold: rejected: {output.value.detail}", file=sys.stderr)
            if output.topic in wanted and output.value is not None:
                out.write(encode(output.value) + b"\n")
            if args.progress and stats.lines % 100_000 == 0:
                print(f"podledger fold: {stats.lines} lines ...", file=sys.stderr, flush=True)
    finally:
        if source is not sys.stdin.buffer:
            source.close()
        out.flush()
    elapsed = time.monotonic() - started
    print(
        f"podledger fold: {stats.events} events of {len(stats.pods)} pods -> {stats.versions} versions,"
        f" {stats.rejected} rejected, in {elapsed:.2f}s",
        file=sys.stderr,
    )
    return 1 if stats.rejected and args.strict else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from podledger import bench

    settings = settings_from(args)
    if args.target == "node":
        node_figures = bench.bench_node(settings, pods=args.pods, seconds=args.seconds, runtime=args.runtime)
        bench.print_node(node_figures)
        return 0
    if args.target == "sink":
        sink_figures = bench.bench_sink(
            settings,
            pods=args.pods,
            interval=args.interval,
            seconds=args.seconds,
            qps=settings.sink_qps,
            burst=settings.sink_burst,
        )
        bench.print_sink(
            sink_figures, qps=settings.sink_qps, burst=settings.sink_burst, interval=args.interval
        )
        return 0
    figures = bench.bench_fold(
        settings,
        pods=args.pods,
        events=args.events,
        rate=args.rate,
        latency_seconds=args.latency_seconds,
        partitions=args.partitions or 6,
    )
    bench.print_fold(figures, pods=args.pods, events=args.events, partitions=args.partitions or 6)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from podledger.schemas import codec

    if args.topic:
        print(json.dumps(codec.schema(args.topic), indent=2))
    else:
        for name in codec.MODELS:
            print(name)
    return 0


def cmd_local(args: argparse.Namespace) -> int:
    from podledger import localstack

    if args.action == "fetch":
        # Resolve and build what the local instances need, with progress, before any test runs.
        if not os.environ.get("PODLEDGER_BOOTSTRAP"):
            print(f"kafka jars: {localstack.fetch_kafka()}")
        if not args.no_kube and not os.environ.get("KUBECONFIG"):
            print(f"etcd: {localstack.fetch_etcd()}")
            print(f"kube-apiserver: {localstack.fetch_apiserver()}")
    elif args.action == "up":
        kafka, kube = localstack.up(kafka=True, kube=not args.no_kube)
        if kafka:
            print(f"export PODLEDGER_BOOTSTRAP={kafka.bootstrap}")
        if kube:
            print(f"export KUBECONFIG={kube.kubeconfig}")
        print("# stop them with: podledger local down", file=sys.stderr)
    elif args.action == "down":
        stopped = localstack.down()
        print("stopped: " + (", ".join(stopped) or "nothing was running"))
    else:
        kafka, kube = localstack.running_kafka(), localstack.running_kube()
        print(f"kafka: {kafka.bootstrap if kafka else 'not running'}")
        print(
            "kube-apiserver: " + (f"{kube.server} (kubeconfig {kube.kubeconfig})" if kube else "not running")
        )
    return 0


def run_pipeline(
    settings: Settings,
    *,
    roles: set[str],
    on_status: Callable[[Any], None] | None = None,
    stop_pods_on_exit: bool = False,
) -> int:
    """Run the Faust worker with the chosen roles until SIGINT/SIGTERM."""
    import faust

    from podledger.agents.kube import Kube
    from podledger.agents.node import NodeAgent, build_sources, make_runtime
    from podledger.agents.sink.writer import Sink
    from podledger.agents.sources.pod_config import PodStorage
    from podledger.streams.app import Pipeline

    _require_bootstrap(settings)
    pipeline = Pipeline(settings, fold="fold" in roles)
    kube: Kube | None = None
    api_source = bool(roles & {"source", "node"}) and settings.api_source_enabled
    if "sink" in roles or api_source:
        kube = Kube.from_kubeconfig(settings.kubeconfig, qps=settings.sink_qps, burst=settings.sink_burst)
        version = kube.check()
        kube.ensure_node(settings.node)
        log.info("apiserver %s (%s), node %s", kube.server, version, settings.node)

    if "node" in roles:
        agent = NodeAgent(
            settings,
            make_runtime(settings),
            kube=kube if api_source else None,
            stop_pods_on_exit=stop_pods_on_exit,
        )

        async def node_agent(_: Pipeline) -> None:
            await agent.run()

        pipeline.add_task(node_agent)
    elif "source" in roles:
        storage = PodStorage()  # one podStorage for every source, as in the kubelet

        def publish_update(update: Any) -> Any:
            return pipeline.publish("pod-updates", update.uid, update, update.node)

        for source in build_sources(settings, storage, publish_update, kube if api_source else None):

            async def run_source(_: Pipeline, source: Any = source) -> None:
                await source.run()

            run_source.__name__ = f"{type(source).__name__.lower()}"
            pipeline.add_task(run_source)

    if "sink" in roles:
        assert kube is not None
        sink = Sink(
            kube,
            settings,
            publish=pipeline.publish,
            workers=settings.sink_workers,
            reconcile_s=settings.sink_reconcile_ms / 1000,
            read_from_cache=settings.sink_read == "watch",
        )

        async def apiserver_sink(_: Pipeline) -> None:
            await sink.run()

        pipeline.add_task(apiserver_sink)

    if on_status is not None:

        async def show_status(_: Pipeline, vs: Any) -> None:
            on_status(vs)

        pipeline.add_agent("pod-status-history", show_status)

    worker = faust.Worker(
        pipeline.app,
        loglevel=settings.log_level.upper(),
        quiet=True,
        redirect_stdouts=False,
        override_logging=False,
    )
    worker.spinner = None  # a terminal spinner only garbles logs and the demo's output
    worker.execute_from_commandline()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    roles = set(args.roles.split(","))
    unknown = roles - {"fold", "source", "node", "sink"}
    if unknown:
        raise UserError(f"unknown role(s) {', '.join(sorted(unknown))}: choose from fold, source, node, sink")
    return run_pipeline(settings, roles=roles)


def cmd_node(args: argparse.Namespace) -> int:
    """Every node agent of one node, without Faust: sources, pod workers, PLEG, prober."""
    from podledger.agents.kube import Kube
    from podledger.agents.node import NodeAgent, make_runtime

    settings = settings_from(args)
    _require_bootstrap(settings)
    kube = None
    if settings.api_source_enabled:
        kube = Kube.from_kubeconfig(settings.kubeconfig, qps=settings.sink_qps, burst=settings.sink_burst)
        kube.check()
        kube.ensure_node(settings.node)
    agent = NodeAgent(settings, make_runtime(settings), kube=kube)
    return run_until_signalled(agent.run())


def run_until_signalled(main: Any) -> int:
    """Run a coroutine until it ends or SIGINT/SIGTERM arrives; a signal cancels it cleanly (exit 0)."""

    async def runner() -> None:
        task = asyncio.ensure_future(main)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(runner())
    return 0


def format_status_line(vs: Any) -> str:
    """One status version for a terminal: phase, conditions, each container's state and restarts."""
    conditions = " ".join(f"{c['type']}={c['status']}" for c in vs.status.get("conditions") or [])
    containers = []
    for cs in (vs.status.get("initContainerStatuses") or []) + (vs.status.get("containerStatuses") or []):
        [(state, detail)] = list((cs.get("state") or {"unknown": {}}).items())[:1] or [("unknown", {})]
        reason = detail.get("reason")
        if state == "terminated":
            reason = f"{reason or 'exit'}({detail.get('exitCode')})"
        ready = "ready" if cs.get("ready") else "not-ready"
        state = f"{state}:{reason}" if reason else state
        containers.append(f"{cs['name']}={state},{ready},restarts={cs.get('restartCount', 0)}")
    return (
        f"{time.strftime('%H:%M:%S')}  {vs.namespace}/{vs.name}  v{vs.version}  "
        f"{vs.status.get('phase', '?'):9}  {conditions}  [{' '.join(containers)}]  <- {vs.cause.type}"
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from podledger import localstack
    from podledger.agents.kube import Kube
    from podledger.streams.topics import ensure_topics

    settings = settings_from(args)
    started: list[Any] = []
    bootstrap, kubeconfig = settings.bootstrap, settings.kubeconfig
    if not bootstrap:
        handle = localstack.running_kafka()
        if handle is None:
            print("podledger demo: starting a local Kafka broker ...", file=sys.stderr)
            handle = localstack.start_kafka(Path(tempfile.mkdtemp(prefix="podledger-demo-kafka-")))
            started.append(handle)
        bootstrap = handle.bootstrap
    if not kubeconfig:
        kh = localstack.running_kube()
        if kh is None:
            print("podledger demo: starting a local etcd and kube-apiserver ...", file=sys.stderr)
            kh = localstack.start_kube(Path(tempfile.mkdtemp(prefix="podledger-demo-kube-")))
            started.append(kh)
        kubeconfig = kh.kubeconfig
    runtime_dir = tempfile.mkdtemp(prefix="podledger-demo-runtime-")
    settings = Settings.from_env(
        bootstrap=bootstrap,
        kubeconfig=kubeconfig,
        node=settings.node,
        topic_prefix=settings.topic_prefix,
        partitions=settings.partitions,
        log_level=settings.log_level,
        manifest_dir=str(EXAMPLES_DIR),
        runtime="process",
        runtime_state_dir=runtime_dir,
    )
    try:
        asyncio.run(ensure_topics(settings))
        kube = Kube.from_kubeconfig(kubeconfig)
        kube.check()
        kube.ensure_node(settings.node)
        print(
            "\npodledger demo\n"
            f"  Kafka:       {bootstrap}   topics: {settings.topic_prefix}*"
            f" ({settings.partitions} partitions)\n"
            f"  apiserver:   {kube.server}   KUBECONFIG={kubeconfig}\n"
            f"  node:        {settings.node}   running: pod sources, pod workers, PLEG, fold, sink\n"
            f"  pods:        {', '.join(_example_pods(settings.node))} (static pods from deploy/examples)\n"
            f"  containers:  local processes (process runtime), logs under {runtime_dir}\n"
            "  mirror pods: the static pods appear in the apiserver too (kubectl get pods -o wide)\n"
            "  try:         curl http://127.0.0.1:18081/toggle   flips the flip pod's readiness\n"
            "  stop:        Ctrl-C (or SIGTERM); the demo's containers stop with it\n\n"
            "Each line is a new status version, as published to pod-status-history:",
            flush=True,
        )
        run_pipeline(
            settings,
            roles={"fold", "node", "sink"},
            on_status=lambda vs: print(format_status_line(vs), flush=True),
            stop_pods_on_exit=True,
        )
    finally:
        for handle in reversed(started):
            handle.stop()
        print("podledger demo: stopped", file=sys.stderr)
    return 0


EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "deploy" / "examples"


def _example_pods(node: str) -> list[str]:
    """The static pods the demo runs, named as the kubelet names static pods (<name>-<node>)."""
    import yaml

    names = []
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        meta = (yaml.safe_load(path.read_text()) or {}).get("metadata") or {}
        names.append(f"{meta.get('namespace') or 'default'}/{meta.get('name')}-{node}")
    return names


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="podledger",
        description="The kubelet's pod-status path as an event-sourced pipeline on Kafka.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="run the pipeline (apiserver source, fold, sink) until stopped",
        description="Run podledger's Faust worker. Stops cleanly on SIGINT or SIGTERM.",
    )
    p.add_argument(
        "--roles",
        default="fold,source,sink",
        help="comma-separated roles to run in this process: fold, source (pod sources only), node (every"
        " node agent: sources, pod workers, PLEG, prober), sink (default: fold,source,sink)",
    )
    _add_common(p)
    _add_node_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "node",
        help="run every node agent of one node: pod sources, pod workers, PLEG, prober",
        description="Publishes the node's pod-updates, runs its pods on the chosen runtime (pod workers read"
        " pod-updates back from Kafka), relists the runtime into pleg and probes containers into"
        " probe-results. Resumes from the log after a restart and adopts running containers. Stops"
        " cleanly on SIGINT or SIGTERM, leaving containers running for the next agent to adopt.",
    )
    _add_common(p)
    _add_node_options(p)
    p.set_defaults(func=cmd_node)

    p = sub.add_parser(
        "topics",
        help="create or describe podledger's topics",
        description="'create' makes every topic with its partitions, cleanup policy and"
        " retention, and repairs drifted configs; running it twice changes nothing.",
    )
    p.add_argument("action", choices=["create", "describe"])
    _add_common(p)
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser(
        "fold",
        help="fold journal or ingress events from a file offline, print versioned statuses",
        description="Runs the same fold as the live pipeline over JSON lines (journal entries, or"
        " pod-updates/pleg/probe-results/pod-lifecycle values) with no Kafka, and prints each status"
        " version as a pod-status-history value, one JSON object per line. Rejected lines are"
        " reported on stderr and skipped.",
    )
    p.add_argument("file", nargs="?", default="-", help="JSON-lines file, or - for standard input (default)")
    p.add_argument(
        "--outputs",
        default="pod-status-history",
        help="comma-separated outputs to print: pod-status-history (default), journal, dead-letter",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 if any line was rejected")
    p.add_argument("--progress", action="store_true", help="report progress on stderr every 100,000 lines")
    _add_common(p)
    p.set_defaults(func=cmd_fold)

    p = sub.add_parser(
        "bench",
        help="benchmarks that print figures (events/s, latency percentiles, memory)",
        description="'fold' drives a synthetic workload through the fold on the broker PODLEDGER_BOOTSTRAP"
        " names (or the local one, started if needed) and compares it with the offline fold and a bare"
        " aiokafka loop over the same messages. The last line is machine-readable.",
    )
    p.add_argument("target", choices=["fold", "sink", "node"])
    p.add_argument("--runtime", default="sim", help="node: the runtime to relist (default sim)")
    p.add_argument(
        "--pods", type=int, default=10_000, help="pods in the workload (default 10000; sink: use 1000)"
    )
    p.add_argument(
        "--interval", type=float, default=60.0, help="sink: seconds between versions of a pod (default 60)"
    )
    p.add_argument(
        "--seconds", type=float, default=120.0, help="sink, node: how long the benchmark runs (default 120)"
    )
    p.add_argument("--events", type=int, default=200_000, help="events in the backlog (default 200000)")
    p.add_argument("--rate", type=int, default=5000, help="events/s for the latency phase (default 5000)")
    p.add_argument(
        "--latency-seconds", type=float, default=10.0, help="length of the latency phase (default 10)"
    )
    _add_common(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of a topic's values",
        description="Without TOPIC, list the topics that have a schema.",
    )
    p.add_argument("topic", nargs="?")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser(
        "local",
        help="start, stop or show the local Kafka broker and kube-apiserver",
        description="'up' starts (or reuses) a local broker and apiserver that keep running"
        " and prints the environment to use them; 'down' stops them.",
    )
    p.add_argument("action", choices=["fetch", "up", "down", "status"])
    p.add_argument("--no-kube", action="store_true", help="only the Kafka broker, no etcd or apiserver")
    p.set_defaults(func=cmd_local)

    p = sub.add_parser(
        "demo",
        help="run podledger on local Kafka and apiserver with example pods",
        description="Starts (or reuses) a local broker and apiserver, creates the topics and"
        " the example pods, and shows each status version until Ctrl-C.",
    )
    _add_common(p)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(getattr(args, "log_level", None) or os.environ.get("PODLEDGER_LOG_LEVEL", "warning"))
    # A second SIGTERM during shutdown should not print a traceback either.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"podledger: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
