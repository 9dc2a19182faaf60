"""Poison at the sink, property-tested: a pod-status version whose status is schema-valid but odd
(for example a `podIPs` entry with `address` instead of `ip`) never escapes a sink worker's syncPod.
The failure stays with that pod: it is counted, retried with back-off, and the next pod is written.

The apiserver here is an in-memory stand-in that answers the sink's GET, PATCH and DELETE; the real
one is in tests/integration/test_sink.py."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings

from podledger.agents.sink.writer import Sink
from podledger.config import Settings
from podledger.schemas import from_dict, to_dict
from podledger.types import JSONDict, Topic
from tests import pods
from tests.fuzz import EXAMPLES, odd_values, schema_valid

NODE = "node-1"


class ApiPods:
    """The few apiserver calls the sink makes, over a dict of pods."""

    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], JSONDict] = {}
        self.patches = 0

    def get_pod(self, namespace: str, name: str) -> JSONDict:
        return copy.deepcopy(self.pods[(namespace, name)])

    def patch_pod_status(self, namespace: str, name: str, patch: JSONDict) -> JSONDict:
        self.patches += 1
        pod = self.pods[(namespace, name)]
        pod["status"] = {**(pod.get("status") or {}), **patch.get("status", {})}
        return copy.deepcopy(pod)

    def delete_pod(self, namespace: str, name: str, *, grace_seconds: int, uid: str) -> None:
        self.pods.pop((namespace, name), None)


def base_status() -> JSONDict:
    pod = pods.pod(("main",), name="fuzzed", uid="uid-fuzz", node=NODE)
    status = pods.running_status()
    status["podIPs"] = [{"ip": "10.0.0.7"}]
    return to_dict(pods.versioned(pod, NODE, 2, status))


BASE = base_status()
LOOP = asyncio.new_event_loop()


def sync(api: ApiPods, sink: Sink, value: JSONDict) -> None:
    vs = from_dict(Topic.POD_STATUS, value)
    api_pod = pods.pod(("main",), name=vs.name, uid=vs.uid, node=NODE)
    api_pod["status"] = copy.deepcopy(BASE["status"]) | {"podIPs": [{"ip": "10.0.0.6"}]}  # written before
    api.pods[(vs.namespace, vs.name)] = api_pod
    sink.offer(vs)
    LOOP.run_until_complete(sink.sync_one(vs.uid))  # raises if anything escapes


def new_sink() -> tuple[ApiPods, Sink]:
    api = ApiPods()

    async def publish(topic: str, key: str, value: Any, node: str) -> None:
        pass  # sink-state and pod-deletions: not this test's subject

    return api, Sink(api, Settings(node=NODE), publish=publish)  # type: ignore[arg-type]


def test_podIPs_with_address_instead_of_ip_stays_with_its_pod() -> None:
    api, sink = new_sink()
    odd = copy.deepcopy(BASE)
    odd["status"]["podIPs"] = [{"address": "10.0.0.7"}]
    assert schema_valid(Topic.POD_STATUS, odd)
    sync(api, sink, odd)
    entry = sink.pods["uid-fuzz"]
    written_or_retried = entry.written == 2 or (entry.failures == 1 and entry.queued)
    assert written_or_retried
    assert sink.stats["unusable"] == 1  # merging the status failed: counted, and retried later
    good = copy.deepcopy(BASE) | {"uid": "uid-good", "name": "good"}
    sync(api, sink, good)
    assert sink.pods["uid-good"].written == 2  # the next pod is written


def test_schema_valid_odd_statuses_never_escape_a_sink_worker() -> None:
    api, sink = new_sink()
    drawn = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(odd_values(BASE, Topic.POD_STATUS))
    def run(value: JSONDict) -> None:
        nonlocal drawn
        drawn += 1
        value = value | {"uid": f"uid-{drawn}", "name": f"pod-{drawn}"}
        sync(api, sink, value)
        entry = sink.pods[value["uid"]]
        assert entry.written == value["version"] or (entry.failures >= 1 and entry.queued)

    run()
    assert drawn >= EXAMPLES
    assert sink.stats["patches"] + sink.stats["unchanged"] + sink.stats["unusable"] >= EXAMPLES
