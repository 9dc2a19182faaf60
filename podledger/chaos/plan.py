"""The seeded schedule of a chaos run: which fault happens when, and the pods of the churn.

Pure: the same arguments give the same faults and the same pods, so a run that found a bug can be
run again with its seed. Times are seconds from the start of the chaos window.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from podledger.agents.runtime.sim import ANNOTATION_EXIT_CODE, ANNOTATION_RUN_SECONDS, ANNOTATION_START_DELAY
from podledger.types import JSONDict

FaultKind = Literal["kill", "broker-restart", "apiserver-outage"]

KILL_RESTART_S = (0.5, 3.0)  # a killed process is started again this long after its SIGKILL
SAME_TARGET_GAP_S = 3.0  # at least this long between a target's restart and its next SIGKILL
BROKER_CLEARANCE_S = 20.0  # a broker restart keeps this far from the outage and other restarts
MANAGED_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "podledger-chaos"
KIND_LABEL = "chaos.podledger.io/kind"


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault: at `at_s`, SIGKILL `target` and start it again `duration_s` later (kill), restart
    the broker (broker-restart), or stop the apiserver for `duration_s` (apiserver-outage)."""

    at_s: float
    kind: FaultKind
    target: str = ""
    duration_s: float = 0.0

    def describe(self) -> str:
        if self.kind == "kill":
            return f"SIGKILL {self.target}, restart after {self.duration_s:.1f}s"
        if self.kind == "apiserver-outage":
            return f"stop kube-apiserver for {self.duration_s:.0f}s"
        return "restart the Kafka broker (same data directory and port)"


def fault_window(seconds: float) -> tuple[float, float]:
    """The part of a `seconds`-long chaos window that faults may start in: a lead-in lets the
    churn get going, and a tail leaves the end of the window to the churn alone."""
    lead = min(max(0.05 * seconds, 2.0), 15.0)
    tail = min(max(0.1 * seconds, 5.0), 30.0)
    return lead, max(lead, seconds - tail)


def plan_faults(
    seed: int,
    *,
    seconds: float,
    kills: int,
    targets: Sequence[str],
    broker_restarts: int = 1,
    apiserver_outage_s: float = 30.0,
) -> list[Fault]:
    """`kills` SIGKILLs spread uniformly over the fault window, each on a target drawn from
    `targets` that is up again by then (when one is); `broker_restarts` broker restarts kept clear
    of the outage and of each other; one apiserver outage of `apiserver_outage_s` (none for 0)
    that ends inside the window when it fits. Sorted by time."""
    if kills and not targets:
        raise ValueError("kills need targets")
    rng = random.Random(f"{seed}:faults")
    start, end = fault_window(seconds)
    faults: list[Fault] = []

    outage: tuple[float, float] | None = None
    if apiserver_outage_s > 0:
        at = rng.uniform(start, max(start, end - apiserver_outage_s))
        outage = (at, at + apiserver_outage_s)
        faults.append(Fault(round(at, 3), "apiserver-outage", duration_s=apiserver_outage_s))

    restarts: list[float] = []
    for _ in range(broker_restarts):
        at = rng.uniform(start, end)
        for _ in range(200):  # keep clear of the outage and of the other restarts when it fits
            clear_of_outage = outage is None or not (
                outage[0] - BROKER_CLEARANCE_S < at < outage[1] + BROKER_CLEARANCE_S
            )
            if clear_of_outage and all(abs(at - other) >= BROKER_CLEARANCE_S for other in restarts):
                break
            at = rng.uniform(start, end)
        restarts.append(at)
        faults.append(Fault(round(at, 3), "broker-restart"))

    up_again: dict[str, float] = dict.fromkeys(targets, -SAME_TARGET_GAP_S)
    for at in sorted(rng.uniform(start, end) for _ in range(kills)):
        eligible = [t for t in targets if up_again[t] + SAME_TARGET_GAP_S <= at]
        target = rng.choice(eligible or list(targets))
        restart_after = rng.uniform(*KILL_RESTART_S)
        up_again[target] = at + restart_after
        faults.append(Fault(round(at, 3), "kill", target, round(restart_after, 3)))
    return sorted(faults, key=lambda f: (f.at_s, f.kind, f.target))


# --------------------------------------------------------------------------------------------------
# The pods of the churn
# --------------------------------------------------------------------------------------------------

# What the sim runtime makes of each kind (annotations in agents/runtime/sim.py):
POD_KINDS: tuple[tuple[str, float], ...] = (
    ("steady", 0.30),  # two containers that run until deleted, one with a readiness probe
    ("crashloop", 0.25),  # exits 1 after 5-20 s and is restarted: CrashLoopBackOff
    ("completes", 0.15),  # restartPolicy Never, exits 0 after 5-30 s: Succeeded
    ("fails", 0.10),  # restartPolicy Never, exits 3 after 5-15 s: Failed
    ("init", 0.20),  # an init container that runs 1-3 s, then a steady container
)


def chaos_pod(rng: random.Random, name: str, node: str) -> JSONDict:
    """An API pod bound to `node`, of a kind drawn from POD_KINDS; the apiserver assigns its uid."""
    kind = rng.choices([k for k, _ in POD_KINDS], weights=[w for _, w in POD_KINDS])[0]
    annotations: dict[str, str] = {ANNOTATION_START_DELAY: f"{rng.uniform(0.2, 2.0):.2f}"}
    app: JSONDict = {"name": "app", "image": "example/app:1"}
    containers = [app]
    init: list[JSONDict] = []
    restart_policy = "Always"
    if kind == "steady":
        app["readinessProbe"] = {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5}
        containers.append({"name": "sidecar", "image": "example/log:1"})
    elif kind == "crashloop":
        annotations[ANNOTATION_RUN_SECONDS] = f"{rng.uniform(5, 20):.1f}"
        annotations[ANNOTATION_EXIT_CODE] = "1"
    elif kind in ("completes", "fails"):
        restart_policy = "Never"
        annotations[ANNOTATION_RUN_SECONDS] = f"{rng.uniform(5, 30 if kind == 'completes' else 15):.1f}"
        annotations[ANNOTATION_EXIT_CODE] = "0" if kind == "completes" else "3"
    else:
        init.append({"name": "setup", "image": "example/setup:1"})
        annotations[f"{ANNOTATION_RUN_SECONDS}.setup"] = f"{rng.uniform(1, 3):.1f}"
        annotations[f"{ANNOTATION_EXIT_CODE}.setup"] = "0"
    spec: JSONDict = {
        "nodeName": node,
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": 5,
        "containers": containers,
    }
    if init:
        spec["initContainers"] = init
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {MANAGED_LABEL: MANAGED_BY, KIND_LABEL: kind},
            "annotations": annotations,
        },
        "spec": spec,
    }


def delete_grace_s(rng: random.Random) -> int | None:
    """How the churn deletes a pod: mostly with the pod's own grace period (None), so the node
    agent terminates it and the sink removes it; sometimes at once (0), so it simply vanishes."""
    return 0 if rng.random() < 0.2 else None
