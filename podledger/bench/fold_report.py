"""What `podledger bench fold` prints: its figures for people, then its machine-readable line."""

from __future__ import annotations

from podledger.bench.fold import FoldFigures
from podledger.bench.harness import machine


def print_fold(figures: FoldFigures, *, pods: int, events: int, partitions: int) -> None:
    print(f"{machine()}; pods={pods} events={events} partitions={partitions}")
    print(
        f"pipeline (Faust fold, real broker): {figures.events_per_s:,.0f} events/s"
        f"  ({figures.events_per_cpu_s:,.0f} per second of the worker's CPU time)"
    )
    print(
        f"latency ingress->pod-status:       p50 {figures.p50_ms:.1f} ms  p99 {figures.p99_ms:.1f} ms"
        f"  ({figures.latency_samples} versions at {figures.latency_rate:,} events/s offered)"
    )
    if figures.native_share >= 0:
        print(
            f"  native core folded {figures.native_share:.1%} of the batches; the same worker folding"
            f" in Python: {figures.python_events_per_s:,.0f} events/s"
            f" ({figures.events_per_s / figures.python_events_per_s:.1f}x)"
        )
    print(
        f"  with proofs of origin (a keyring, every record signed): {figures.proven_events_per_s:,.0f}"
        f" events/s ({figures.proven_events_per_s / figures.events_per_s:.0%} of the worker without)"
    )
    print(f"offline fold (same messages):       {figures.offline_events_per_s:,.0f} events/s")
    print(
        f"  Python fold {figures.offline_python_events_per_s:,.0f}, native core"
        f" {figures.offline_core_events_per_s:,.0f} events/s, {figures.offline_core_events_per_cpu_s:,.0f}"
        f" per CPU second ({figures.offline_core_events_per_s / figures.offline_python_events_per_s:.1f}x"
        f" the Python fold; history byte for byte Python's: {_IDENTICAL[figures.offline_identical]})"
    )
    print(
        f"offline floor (read, write, no fold): {figures.offline_floor_events_per_s:,.0f} events/s"
        f"  (the fold {_ratio(figures.offline_floor_events_per_s, figures.offline_events_per_s)})"
    )
    print(f"raw aiokafka loop (floor):          {figures.raw_events_per_s:,.0f} events/s")
    print(
        f"raw loop, the fold's volume (floor): {figures.floor_events_per_s:,.0f} events/s"
        f"  ({figures.records_per_event:.2f} records, {figures.bytes_per_event:,.0f} bytes per event)"
    )
    floors = (("floor", figures.raw_events_per_s), ("same-volume floor", figures.floor_events_per_s))
    for name, floor in floors:
        print(f"{'pipeline vs ' + name + ':':36s}{_ratio(floor, figures.events_per_s)}")
    if figures.workers > 1:
        speedup = figures.events_per_s_n / figures.events_per_s if figures.events_per_s else float("nan")
        print(
            f"{f'pipeline, {figures.workers} fold workers:':36s}{figures.events_per_s_n:,.0f} events/s"
            f"  ({speedup:.2f}x one worker)"
        )
    print(f"fold worker peak RSS:               {figures.rss_mb:.0f} MB")
    print(
        f"fold worker collector:              {figures.gc_full_passes} full passes,"
        f" longest pause {figures.gc_longest_ms:.1f} ms"
    )
    print(
        f"proof of origin per record:         sign {figures.sign_us:.1f} us,"
        f" verify {figures.verify_us:.1f} us"
    )
    print(figures.line())


_IDENTICAL = {1: "yes", 0: "NO", -1: "no core installed"}


def _ratio(floor: float, measured: float) -> str:
    return f"{floor / measured:.1f}x slower" if measured else "nothing measured"
