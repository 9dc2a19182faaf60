"""What probes answer: one attempt's outcome, and the results managers that hold the current results.

Two vocabularies, as upstream keeps them apart: a handler attempt answers with a `CheckResult`
(pkg/probe's Result: Success, Warning, Failure, Unknown); a worker records a `ProbeResult`
(pkg/kubelet/prober/results' Result: Success, Failure, Unknown) in a `ResultCache`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from podledger.types import ProbeResult, ProbeType


class CheckResult(StrEnum):
    """What one handler attempt answered."""

    SUCCESS = "Success"
    WARNING = "Warning"  # an HTTP redirect to another host: counts as Success, with an event
    FAILURE = "Failure"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One attempt: its result and output; `error` set means the attempt itself errored."""

    result: CheckResult
    output: str = ""
    error: str | None = None

    @classmethod
    def failed(cls, output: str) -> CheckOutcome:
        """The target answered badly (refused, timed out, bad status, non-zero exit)."""
        return cls(CheckResult.FAILURE, output)

    @classmethod
    def errored(cls, error: str) -> CheckOutcome:
        """The attempt could not be made; the prober retries it and then discards it."""
        return cls(CheckResult.UNKNOWN, "", error)


# What a worker reports for a container it has just found, before any probe ran (worker.go doProbe).
INITIAL_RESULTS: dict[ProbeType, ProbeResult] = {
    ProbeType.READINESS: ProbeResult.FAILURE,
    ProbeType.LIVENESS: ProbeResult.SUCCESS,
    ProbeType.STARTUP: ProbeResult.UNKNOWN,
}


class ResultCache:
    """One results manager (results_manager.go): container ID -> result for one probe type.

    `set` answers whether the value changed (a new ID or a different result), which is when an update is
    due; `remove` forgets an ID silently.
    """

    def __init__(self) -> None:
        self._results: dict[str, str] = {}

    def get(self, container_id: str) -> str | None:
        return self._results.get(container_id)

    def set(self, container_id: str, result: str) -> bool:
        if container_id in self._results and self._results[container_id] == result:
            return False
        self._results[container_id] = result
        return True

    def remove(self, container_id: str) -> None:
        self._results.pop(container_id, None)

    def __contains__(self, container_id: object) -> bool:
        return container_id in self._results

    def __len__(self) -> int:
        return len(self._results)
