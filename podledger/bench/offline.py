"""`podledger bench fold`'s offline phase: the same messages folded with no Kafka, by the Python
fold (streams/replay.py) and by the native fold core (streams/foldcore/) side by side, with the
core's history checked byte for byte against Python's, and the offline floor (reading and writing
alone) under both."""

from __future__ import annotations

import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from podledger.bench.floor import offline_floor
from podledger.bench.harness import say
from podledger.heap import long_lived_heap
from podledger.schemas import encode
from podledger.streams.native_replay import GaveUp, find_core, fold_file
from podledger.streams.replay import replay
from podledger.types import Topic

CORE_RUNS = 3  # the core is timed this many times (median); the Python fold once, it is slow


@dataclass
class OfflineFigures:
    python_events_per_s: float = 0.0
    floor_events_per_s: float = 0.0  # reading every input and writing every output, no fold
    core_events_per_s: float = float("nan")  # nan: no core, or it did not cover the workload
    core_events_per_cpu_s: float = float("nan")  # the same per second of the core's CPU time (all threads)
    identical: int = -1  # 1: the core's history is byte for byte Python's; 0: it is not; -1: no core

    @property
    def events_per_s(self) -> float:
        """What `podledger fold` runs at: the core when it is there and covers the input."""
        return self.core_events_per_s if self.identical == 1 else self.python_events_per_s


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_offline(lines: list[bytes], core_setting: str) -> OfflineFigures:
    figures = OfflineFigures()
    with long_lived_heap():  # as `podledger fold` folds; the backlog is frozen with the rest
        t = time.monotonic()
        outputs = list(replay(lines))
        figures.python_events_per_s = len(lines) / (time.monotonic() - t)
        say(f"offline fold, Python: {figures.python_events_per_s:.0f} events/s ({len(outputs)} outputs)")
        figures.floor_events_per_s = offline_floor(lines, outputs)
        say(f"offline floor: {figures.floor_events_per_s:.0f} events/s")
        history = b"".join(
            encode(o.value) + b"\n" for o in outputs if o.topic == Topic.POD_STATUS_HISTORY and o.value
        )
        del outputs
    core = find_core(core_setting)
    if core is None:
        say("offline fold, native core: not installed (`make install` builds it with Go)")
        return figures
    with tempfile.TemporaryDirectory(prefix="podledger-bench-") as spool:
        source = Path(spool) / "input.jsonl"
        source.write_bytes(b"".join(line + b"\n" for line in lines))
        rates: list[float] = []
        cpu_rates: list[float] = []
        for _ in range(CORE_RUNS):
            with open(Path(spool) / "history.jsonl", "w+b") as out:
                t, cpu = time.monotonic(), _children_cpu_s()
                result = fold_file(core, source, out)
                elapsed, cpu = time.monotonic() - t, _children_cpu_s() - cpu
                if isinstance(result, GaveUp):
                    say(f"offline fold, native core: does not cover line {result.line} ({result.reason})")
                    return figures
                rates.append(len(lines) / elapsed)
                cpu_rates.append(len(lines) / cpu if cpu > 0 else float("nan"))
                out.seek(0)
                figures.identical = int(out.read() == history)
    figures.core_events_per_s = statistics.median(rates)
    figures.core_events_per_cpu_s = statistics.median(cpu_rates)
    verdict = "identical to" if figures.identical else "DIFFERS from"
    say(
        f"offline fold, native core: {figures.core_events_per_s:.0f} events/s (median of {CORE_RUNS},"
        f" process start included), {figures.core_events_per_cpu_s:.0f} per CPU second;"
        f" history {verdict} Python's"
    )
    return figures
