"""Liveness, readiness and startup probing for one node's pods (pkg/kubelet/prober).

- `specs`: which workers a pod needs, probe timing, ports and exec commands (pure)
- `results`: handler outcomes and the results managers (pure)
- `worker`: one worker's doProbe rules, split around the probe call (pure)
- `grpc_health`: the gRPC health-check messages (pure)
- `handler_constants`: the User-Agent and output limit the handlers share (pure)
- `exec_check`, `http_check`, `tcp_check`, `grpc_check`: the exec / httpGet / tcpSocket / grpc handlers (I/O)
- `checks`: one attempt of a probe's handler and the retrying runner (I/O)
- `manager`: `Prober`, one asyncio task per worker, publishing result changes (I/O)
"""

from podledger.agents.prober.checks import execute_probe, run_check
from podledger.agents.prober.manager import Prober, ProbeWorker
from podledger.agents.prober.results import INITIAL_RESULTS, CheckOutcome, CheckResult, ResultCache
from podledger.agents.prober.worker import ProbeWorkerState

__all__ = [
    "INITIAL_RESULTS",
    "CheckOutcome",
    "CheckResult",
    "ProbeWorker",
    "ProbeWorkerState",
    "Prober",
    "ResultCache",
    "execute_probe",
    "run_check",
]
