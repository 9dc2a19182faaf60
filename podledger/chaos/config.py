"""What `podledger chaos` is asked to do (ChaosConfig) and what it found (ChaosResult)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from podledger.chaos import checks
from podledger.chaos.plan import Fault
from podledger.errors import UserError
from podledger.types import JSONDict

CONVERGE_GOAL_S = 30.0  # the apiserver catches up this soon after the last fault


def say(message: str) -> None:
    """Progress on stderr; the summary goes to stdout."""
    print(f"chaos: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class ChaosConfig:
    seconds: float = 600.0
    kills: int = 50
    seed: int = 0
    nodes: int = 3
    pods: int = 60
    apiserver_outage_s: float = 30.0
    broker_restarts: int = 1
    partitions: int = 6
    bootstrap: str = ""  # the user's broker (then no broker restart); empty: one of our own
    kubeconfig: str = ""  # the user's apiserver (then no outage); empty: one of our own
    workdir: str = ""  # kept afterwards; empty: a temporary one, removed after a passing run
    settle_s: float = 180.0  # the longest wait for convergence, and for the drain, at the end
    kafka_env: dict[str, str] = field(default_factory=dict)  # PODLEDGER_KAFKA_* for the user's broker

    def check(self) -> None:
        if self.seconds <= 0 or self.kills < 0 or self.nodes < 1 or self.pods < 1:
            raise UserError("chaos needs --seconds > 0, --kills >= 0, --nodes >= 1 and --pods >= 1")
        if self.broker_restarts < 0 or self.apiserver_outage_s < 0:
            raise UserError("--broker-restarts and --apiserver-outage-s cannot be negative")
        if self.bootstrap and self.broker_restarts:
            raise UserError(
                "the broker restart needs a broker of chaos's own, not the one PODLEDGER_BOOTSTRAP names:"
                " unset it, or pass --broker-restarts 0"
            )
        if self.kubeconfig and self.apiserver_outage_s:
            raise UserError(
                "the apiserver outage needs an apiserver of chaos's own, not the one KUBECONFIG names:"
                " unset it, or pass --apiserver-outage-s 0"
            )


@dataclass
class FaultRecord:
    fault: Fault
    started: float  # wall clock
    ended: float
    done: bool = True  # False: skipped (the target was down already)


@dataclass
class ChaosResult:
    seed: int
    kills: int = 0
    broker_restarts: int = 0
    apiserver_outage_s: float = 0.0
    converge_s: float | None = None
    lost: list[checks.Coord] = field(default_factory=list)
    gaps: dict[str, list[int]] = field(default_factory=dict)
    conflicts: dict[checks.VersionKey, list[JSONDict]] = field(default_factory=dict)
    history: dict[checks.VersionKey, tuple[list[JSONDict], list[JSONDict]]] = field(default_factory=dict)
    api: list[checks.ApiMismatch] = field(default_factory=list)
    drained: bool = False
    figures: list[str] = field(default_factory=list)  # summary lines, printed before the last one
    problems: list[str] = field(default_factory=list)  # details of every failed check
    workdir: str = ""

    @property
    def missing_versions(self) -> int:
        return sum(len(v) for v in self.gaps.values())

    def ok(self) -> bool:
        return (
            not self.lost
            and not self.gaps
            and not self.conflicts
            and not self.history
            and not self.api
            and self.drained
            and self.converge_s is not None
            and self.converge_s <= CONVERGE_GOAL_S
        )

    def line(self) -> str:
        converge = "never" if self.converge_s is None else f"{self.converge_s:.1f}"
        return (
            f"chaos kills={self.kills} broker_restarts={self.broker_restarts}"
            f" apiserver_outage_s={self.apiserver_outage_s:.0f} lost={len(self.lost)}"
            f" gaps={self.missing_versions} conflicts={len(self.conflicts)} converge_s={converge}"
        )


def clock(ts_ms: float) -> str:
    """A wall-clock time of day with milliseconds, as the logs show it."""
    return time.strftime("%H:%M:%S", time.localtime(ts_ms / 1000)) + f".{int(ts_ms) % 1000:03d}"


def print_result(result: ChaosResult) -> None:
    for line in result.figures:
        print(line)
    for line in result.problems:
        print(f"FAILED {line}")
    if not result.ok() and result.workdir:
        print(f"logs and data kept in {result.workdir}")
    print(result.line(), flush=True)
