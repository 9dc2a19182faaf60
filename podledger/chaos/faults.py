"""The faults of a chaos run performed: a SIGKILL, a broker restart or an apiserver outage.

`plan.plan_faults` decides which fault happens when; `inject` waits for its moment and does it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from podledger.chaos.config import ChaosResult, FaultRecord
from podledger.chaos.plan import Fault
from podledger.chaos.services import Service
from podledger.local.apiserver import KubeHandle
from podledger.local.broker import KafkaHandle, restart_kafka

APISERVER_STOP_GRACE_S = 5.0  # the outage begins with SIGTERM; SIGKILL if it drains longer


async def inject(
    fault: Fault,
    *,
    t0: float,
    services: Mapping[str, Service],
    kafka: KafkaHandle | None,
    kube_handle: KubeHandle | None,
    result: ChaosResult,
    note: Callable[[str], None],
) -> FaultRecord:
    """At `fault.at_s` after `t0` (monotonic), the fault; counted in `result`, recorded as done or
    skipped (its target was down already)."""
    await asyncio.sleep(max(0.0, t0 + fault.at_s - time.monotonic()))
    started = time.time()
    if fault.kind == "kill":
        svc = services[fault.target]
        if not svc.running or svc.held:
            note(f"skip: {fault.target} is down already")
            return FaultRecord(fault, started, started, done=False)
        svc.held = True
        svc.kill()
        result.kills += 1
        note(f"SIGKILL {fault.target} (kill {result.kills}); restart in {fault.duration_s:.1f}s")
        await asyncio.sleep(fault.duration_s)
        svc.start()
        svc.held = False
    elif fault.kind == "broker-restart":
        assert kafka is not None
        note("restarting the Kafka broker (same data directory and port) ...")
        await asyncio.to_thread(restart_kafka, kafka)
        result.broker_restarts += 1
        note(f"the Kafka broker is back after {time.time() - started:.1f}s")
    else:
        assert kube_handle is not None
        note(f"stopping kube-apiserver for {fault.duration_s:.0f}s (etcd keeps running)")
        await asyncio.to_thread(kube_handle.stop_apiserver, APISERVER_STOP_GRACE_S)
        await asyncio.sleep(max(0.0, started + fault.duration_s - time.time()))
        note("starting kube-apiserver again")
        await asyncio.to_thread(kube_handle.start_apiserver)
        result.apiserver_outage_s += time.time() - started
        note(f"kube-apiserver is back after {time.time() - started:.1f}s")
    return FaultRecord(fault, started, time.time())
