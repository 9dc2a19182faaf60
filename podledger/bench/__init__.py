"""Benchmarks: figures, never assertions. One module per target (fold, sink, node) over a shared
harness; each prints its figures and a machine-readable last line."""

from podledger.bench.fold import FoldFigures, bench_fold
from podledger.bench.fold_report import print_fold
from podledger.bench.node import NodeFigures, bench_node, print_node
from podledger.bench.sink import SinkFigures, bench_sink, print_sink

__all__ = [
    "FoldFigures",
    "NodeFigures",
    "SinkFigures",
    "bench_fold",
    "bench_node",
    "bench_sink",
    "print_fold",
    "print_node",
    "print_sink",
]
