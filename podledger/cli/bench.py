"""`podledger bench TARGET`: benchmarks that print figures and a machine-readable last line."""

from __future__ import annotations

import argparse

from podledger.cli.common import add_connection_options, settings_from


def cmd_bench(args: argparse.Namespace) -> int:
    from podledger.bench.harness import drop_bench_leftovers, say

    try:
        return _run_bench(args)
    finally:  # even after a failure or ^C: a broker that keeps every run's topics slows down
        dropped = drop_bench_leftovers()
        if dropped:
            say(f"deleted the benchmark's {dropped} topics")


def _run_bench(args: argparse.Namespace) -> int:
    from podledger import bench

    if args.target == "audit":  # no broker: the history is folded and indexed in-process
        from podledger.bench.audit import bench_audit, print_audit

        print_audit(bench_audit(args.versions, args.pods))
        return 0
    settings = settings_from(args)
    if args.target == "node":
        node_figures = bench.bench_node(settings, pods=args.pods, seconds=args.seconds, runtime=args.runtime)
        bench.print_node(node_figures)
        return 0
    if args.target == "recovery":
        from podledger.bench.recovery import bench_recovery, print_recovery

        print_recovery(bench_recovery(settings, pods=args.pods, partitions=args.partitions or 6))
        return 0
    if args.target == "serve":
        from podledger.bench.serve import bench_serve, print_serve

        print_serve(bench_serve(settings, pods=args.pods))
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
    partitions = args.partitions or 6
    figures = bench.bench_fold(
        settings,
        pods=args.pods,
        events=args.events,
        rate=args.rate,
        latency_seconds=args.latency_seconds,
        partitions=partitions,
        workers=args.workers,
    )
    bench.print_fold(figures, pods=args.pods, events=args.events, partitions=partitions)
    return 0


def latency_rate(text: str) -> int | None:
    """--rate: events/s (0 skips the latency phase), or `half` (None: half the measured capacity)."""
    if text == "half":
        return None
    try:
        rate = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of events/s nor 'half': {text!r}") from None
    if not 0 <= rate <= 1_000_000:
        raise argparse.ArgumentTypeError(f"{rate} is outside 0..1000000 events/s")
    return rate


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmarks that print figures (events/s, latency percentiles, memory)",
        description="'fold' drives a synthetic workload through the fold on the broker PODLEDGER_BOOTSTRAP"
        " names (or the local one, started if needed) and compares it with the offline fold and a bare"
        " aiokafka loop over the same messages. The last line is machine-readable.",
    )
    p.add_argument("target", choices=["fold", "sink", "node", "audit", "serve", "recovery"])
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
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="fold: also drain the backlog with this many fold workers, to print the scaling (default 1)",
    )
    p.add_argument(
        "--versions", type=int, default=1_000_000, help="audit: versions in the history (default 1000000)"
    )
    p.add_argument(
        "--rate",
        type=latency_rate,
        default=None,
        help="events/s for the latency phase, 0 to skip it (default: half the rate the backlog drained at)",
    )
    p.add_argument(
        "--latency-seconds", type=float, default=10.0, help="length of the latency phase (default 10)"
    )
    add_connection_options(p)
    p.set_defaults(func=cmd_bench)
