"""Recorded workloads keep their history: the offline fold of two seeded workloads must publish,
byte for byte, what the fold published when the digests below were recorded (before the fold was
made fast). One is the benchmark's workload (`podledger.workload`), the other a varied one built
here: pods of many shapes (init containers, sidecars, each restart policy, probes, readiness gates,
static pods, API statuses with others' conditions) through starts, crashes, vanished and unknown
containers, long and multi-byte messages, fractional times, sync errors, termination, deletion,
removal and events that arrive before their pod or from another node.

What is compared: every journal entry and every version (all its fields but `rules`, which names
the rules' release rather than their result), in order; dead letters as a sorted set, as the order
of held events expiring together is not part of the contract. A change to the fold's rules moves a
digest on purpose: re-record it with `python -m tests.unit.test_fold_golden` and say why in the
commit.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any

import orjson

from podledger.schemas import encode
from podledger.streams.replay import replay
from podledger.workload import workload

T0 = 1_767_261_600_000  # 2026-01-01T10:00:00Z
VERSION_FIELDS = (
    "uid",
    "namespace",
    "name",
    "node",
    "version",
    "status",
    "could_have_running_containers",
    "finished",
    "static",
    "mirror_uid",
    "deleting",
    "cause",
    "ts_ms",
)
# name: (journal entries, versions, dead letters, digest), recorded from the fold before its speed-up.
EXPECTED = {
    "workload": (6000, 5958, 0, "3976e5a0b9c6642732b0097c883d8d8c14e5ce90990c3a13e9db9243553b4152"),
    "varied": (5860, 3882, 140, "1c1856a294ed535b097152ba4034e4138ddf438b9237442738b780a032eb2dbf"),
    # The benchmark's workload at the size the speed-up was measured on, and the varied workload's
    # journal folded again (journal lines rather than ingress values).
    "recorded": (20000, 20000, 0, "cfcd19557b365b3ffddae7faeb4270cd164aa42be6506f02f8e7835919fe8315"),
    "varied-journal": (5860, 3882, 0, "c7933af74f1f841392d90cd75fd4168dcd3ffa10274afaa0a6661371960c9172"),
}


def digest(lines: list[bytes]) -> tuple[int, int, int, str]:
    """(journal entries, versions, dead letters, SHA-256 over them) of the offline fold of `lines`."""
    sha = hashlib.sha256()
    counts = {"journal": 0, "pod-status-history": 0}
    letters = []
    for out in replay(lines):
        if out.topic == "dead-letter":
            letters.append(encode(out.value))
        elif out.topic in counts:
            counts[out.topic] += 1
            value = out.value
            if out.topic == "pod-status-history":
                value = [getattr(value, name) for name in VERSION_FIELDS]
            sha.update(out.topic.encode() + b"\0" + encode(value) + b"\n")
    for letter in sorted(letters):
        sha.update(b"dead-letter\0" + letter + b"\n")
    return counts["journal"], counts["pod-status-history"], len(letters), sha.hexdigest()


def workload_lines(pods: int = 200, events: int = 6000, nodes: int = 2) -> list[bytes]:
    return [encode(e.value) for e in workload(pods, events, nodes=nodes, seed=7, start_ms=1_700_000_000_000)]


def recorded_lines() -> list[bytes]:
    return workload_lines(2000, 20000, nodes=20)


def journal_lines(lines: list[bytes]) -> list[bytes]:
    """The journal entries the offline fold of `lines` writes, as lines to fold again."""
    return [encode(out.value) for out in replay(lines) if out.topic == "journal"]


# --------------------------------------------------------------------------- the varied workload


def _iso(ms: int, fraction: bool = False) -> str:
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000))
    return f"{text}.{ms % 1000:03d}123Z" if fraction else f"{text}Z"


class _Pod:
    """One pod of a random shape and its runtime, moved at random; `event` is its next input."""

    def __init__(self, index: int, rng: random.Random) -> None:
        self.rng = rng
        self.uid, self.node = f"golden-{index:04d}", f"node-{index % 3}"
        regular = [f"c{i}" for i in range(rng.randint(1, 3))]
        init = [f"i{i}" for i in range(rng.choice([0, 0, 1, 2]))]
        self.names = regular + init
        spec: dict[str, Any] = {"nodeName": self.node, "containers": [self._container(n) for n in regular]}
        if policy := rng.choice(["Always", "OnFailure", "Never", None]):
            spec["restartPolicy"] = policy
        if init:
            sidecar = {"restartPolicy": "Always"}
            spec["initContainers"] = [self._container(n, sidecar if rng.random() < 0.4 else {}) for n in init]
        if rng.random() < 0.2:
            spec["readinessGates"] = [{"conditionType": "example.com/gate"}]
        meta: dict[str, Any] = {
            "uid": self.uid,
            "name": f"pod-{index:04d}",
            "namespace": rng.choice(["default", ""]),
        }
        if rng.random() < 0.15:
            meta["annotations"] = {"kubernetes.io/config.source": rng.choice(["file", "http", "api"])}
        self.pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        if rng.random() < 0.6:
            self.pod["status"] = self._api_status(regular)
        self.runtime: list[dict[str, Any]] = []
        self.serial = 0
        self.sandbox_ready = rng.random() < 0.8
        self.announced = False

    def _container(self, name: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        rng = self.rng
        c: dict[str, Any] = {"name": name, "image": rng.choice([f"example/{name}:1", ""]), **(extra or {})}
        for probe in ("readinessProbe", "startupProbe", "livenessProbe"):
            if rng.random() < 0.35:
                c[probe] = {"exec": {"command": ["true"]}}
        if rng.random() < 0.3:
            c["resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
            if rng.random() < 0.5:
                c["resources"]["requests"] = {"cpu": "500m"}
        return c

    def _api_status(self, regular: list[str]) -> dict[str, Any]:
        rng = self.rng
        status: dict[str, Any] = {
            "phase": rng.choice(["Pending", "Running", "Running", "Pending", "Succeeded", "Failed", ""])
        }
        conditions = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _iso(T0)},
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "message": "",
                "lastProbeTime": None,
                "lastTransitionTime": _iso(T0 + 500, fraction=True),
            },
            {"type": "example.com/gate", "status": rng.choice(["True", "False"])},
            {"type": "PodHasNetwork", "status": "True", "lastProbeTime": _iso(T0, True)},
        ]
        if chosen := [c for c, p in zip(conditions, (0.5, 0.3, 0.3, 0.2), strict=True) if rng.random() < p]:
            status["conditions"] = chosen
        if rng.random() < 0.3:
            status["qosClass"] = "Burstable"
        if rng.random() < 0.3:
            status["reason"], status["message"] = "Evicted", rng.choice(["", "the node was low on memory"])
        if rng.random() < 0.3:
            status["startTime"] = _iso(T0 - 5000, fraction=True)
        if rng.random() < 0.3:
            states = [
                {"running": {"startedAt": _iso(T0, True)}},
                {"terminated": {"exitCode": rng.choice([0, 1]), "finishedAt": _iso(T0)}},
                {"waiting": {"reason": "ContainerCreating"}},
            ]
            status["containerStatuses"] = [
                {
                    "name": n,
                    "state": rng.choice(states),
                    "lastState": {},
                    "ready": False,
                    "restartCount": rng.randint(0, 2),
                    "image": "",
                }
                for n in regular
            ]
        return status

    def _move(self, ts: int) -> None:
        """One runtime change: a container created, started, exited, unknown or gone."""
        rng = self.rng
        name = rng.choice(self.names)
        current = next((c for c in self.runtime if c["name"] == name), None)
        roll = rng.random()
        if current is None or (current["state"] in ("exited", "unknown") and roll < 0.6):
            self.serial += 1
            self.runtime.insert(
                0,
                {
                    "id": f"{self.uid}-{name}-{self.serial}",
                    "name": name,
                    "image": rng.choice([f"example/{name}:1", None]),
                    "image_id": rng.choice(["sha256:abc", ""]),
                    "state": "created",
                    "exit_code": None,
                    "reason": None,
                    "message": None,
                    "created_at": _iso(ts, fraction=rng.random() < 0.5),
                    "started_at": None,
                    "finished_at": None,
                    "restart_count": sum(1 for c in self.runtime if c["name"] == name),
                },
            )
            same = [i for i, c in enumerate(self.runtime) if c["name"] == name]
            if len(same) > 3:  # the runtime removes old instances
                del self.runtime[same[-1]]
        elif current["state"] == "created":
            current["state"], current["started_at"] = "running", _iso(ts, fraction=rng.random() < 0.5)
        elif current["state"] == "running" and roll < 0.7:
            current["state"], current["finished_at"] = "exited", _iso(ts, fraction=rng.random() < 0.5)
            current["exit_code"] = rng.choice([0, 0, 1, 137])
            current["reason"] = "Completed" if current["exit_code"] == 0 else rng.choice(["Error", ""])
            current["message"] = rng.choice([None, "", "boom " * rng.choice([1, 1000]), "ü" * 1400])
        elif roll < 0.85:
            current["state"] = "unknown"
        else:
            self.runtime = [c for c in self.runtime if c is not current]  # gone between relists
        if rng.random() < 0.1:
            self.sandbox_ready = not self.sandbox_ready

    def _snapshot(self) -> dict[str, Any]:
        rng = self.rng
        snap: dict[str, Any] = {
            "containers": [dict(c) for c in self.runtime],
            "ips": rng.choice([["10.0.0.1"], ["10.0.0.1", "fd00::1", "10.0.0.2"], []]),
            "runtime_type": rng.choice(["sim", "process"]),
            "sandbox": None if rng.random() < 0.05 else {"id": f"{self.uid}-sb", "ready": self.sandbox_ready},
        }
        if rng.random() < 0.5:
            snap["host_ips"] = ["192.168.0.1", "fd00::2"]
        return snap

    def event(self, ts: int) -> dict[str, Any]:
        rng = self.rng
        if not self.announced and rng.random() < 0.7:
            self.announced = True
            return {"op": "ADD", "source": "api", "node": self.node, "pod": self.pod, "ts_ms": ts}
        base = {"uid": self.uid, "node": self.node if rng.random() > 0.01 else "node-x", "ts_ms": ts}
        roll = rng.random()
        if roll < 0.45:
            self._move(ts)
            kind = rng.choice(["ContainerStarted", "ContainerDied", "ContainerChanged"])
            cid = self.runtime[0]["id"] if self.runtime else None
            return {**base, "type": kind, "container_id": cid, "runtime": self._snapshot()}
        if roll < 0.7:
            name = rng.choice(self.names)
            cid = rng.choice([c["id"] for c in self.runtime if c["name"] == name] or ["none"])
            probe = rng.choice(["readiness", "readiness", "startup", "liveness"])
            result = rng.choice(["Success", "Failure", "Unknown"])
            runtime_type = rng.choice(["sim", "process"])
            return {
                **base,
                "container_name": name,
                "container_id": f"{runtime_type}://{cid}",
                "probe": probe,
                "result": result,
            }
        if roll < 0.85:
            results = [
                {"container": n, "reason": rng.choice(["CrashLoopBackOff", "ErrImagePull", ""])}
                | ({"message": rng.choice(["back-off 10s", ""])} if rng.random() < 0.7 else {})
                for n in rng.sample(self.names, rng.randint(0, len(self.names)))
            ]
            return {**base, "kind": "sync_result", "sync_results": results}
        if roll < 0.87:
            return {**base, "kind": "terminating", "grace_s": 30}
        if roll < 0.88:
            for c in self.runtime:
                if c["state"] in ("running", "created"):
                    c["state"], c["exit_code"], c["finished_at"] = "exited", 137, _iso(ts)
            return {**base, "kind": "terminated", "runtime": self._snapshot() if rng.random() < 0.7 else None}
        if roll < 0.98:
            if rng.random() < 0.3:
                self.pod = {**self.pod, "metadata": {**self.pod["metadata"], "deletionTimestamp": _iso(ts)}}
            if rng.random() < 0.3:
                self.pod = {
                    **self.pod,
                    "status": self._api_status([c["name"] for c in self.pod["spec"]["containers"]]),
                }
            return {"op": "UPDATE", "source": "api", "node": self.node, "pod": self.pod, "ts_ms": ts}
        self.announced, self.runtime = False, []
        return {"op": "REMOVE", "source": "api", "node": self.node, "pod": self.pod, "ts_ms": ts}


def varied_lines(pods: int = 300, events: int = 6000, seed: int = 11) -> list[bytes]:
    rng = random.Random(seed)
    lives = [_Pod(i, rng) for i in range(pods)]
    ts = T0
    lines = []
    for _ in range(events):
        ts += rng.choice([1, 7, 250, 999, 1500])
        lines.append(orjson.dumps(lives[rng.randrange(pods)].event(ts)))
    return lines


# --------------------------------------------------------------------------- the tests


def test_the_benchmark_workload_folds_to_its_recorded_history() -> None:
    assert digest(workload_lines()) == EXPECTED["workload"]


def test_the_varied_workload_folds_to_its_recorded_history() -> None:
    assert digest(varied_lines()) == EXPECTED["varied"]


def test_the_recorded_benchmark_workload_folds_to_its_recorded_history() -> None:
    assert digest(recorded_lines()) == EXPECTED["recorded"]


def test_the_varied_workloads_journal_folds_to_its_recorded_history() -> None:
    assert digest(journal_lines(varied_lines())) == EXPECTED["varied-journal"]


if __name__ == "__main__":  # re-record
    sets = [("workload", workload_lines()), ("varied", varied_lines()), ("recorded", recorded_lines())]
    for name, lines in [*sets, ("varied-journal", journal_lines(varied_lines()))]:
        print(f"    {name!r}: {digest(lines)},")
