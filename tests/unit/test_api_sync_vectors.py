"""The sink's pure decisions (agents/sink/decisions.py), named after the upstream tests in
pkg/kubelet/status/status_manager_test.go and pkg/util/pod/pod_test.go, plus strategic-patch cases."""

from __future__ import annotations

import copy
from functools import partial
from typing import Any

import orjson
import pytest

from podledger.agents.sink import decisions as api_sync
from podledger.types import CONFIG_MIRROR_ANNOTATION, CONFIG_SOURCE_ANNOTATION, JSONDict
from tests import pods

NOW = "2026-01-01T10:00:00Z"
EARLIER = "2025-12-31T09:00:00Z"

# The API pod of upstream's status manager tests: "foo" in namespace "new", uid 12345678.
make_pod = partial(pods.pod, name="foo", namespace="new", uid="12345678")


def cond(type_: str, status: str = "True", reason: str = "", **extra: Any) -> JSONDict:
    out: JSONDict = {"type": type_, "status": status}
    if reason:
        out["reason"] = reason
    out.update(extra)
    return out


def shape(conditions: list[JSONDict]) -> list[tuple[str, str, str]]:
    """A condition list without its times: (type, status, reason) in order."""
    return [(c["type"], c["status"], c.get("reason", "")) for c in conditions]


# --------------------------------------------------------------------------- TestMergePodStatus


def merge_base() -> JSONDict:
    """getPodStatus() of status_manager_test.go."""
    return {"phase": "Running", "conditions": [cond("Ready"), cond("PodScheduled")], "message": "Message"}


def with_conditions(status: JSONDict, *extra: JSONDict) -> JSONDict:
    return {**status, "conditions": [*status["conditions"], *extra]}


def failed(status: JSONDict) -> JSONDict:
    return {**status, "phase": "Failed"}


DT_KUBELET = cond("DisruptionTarget", reason="TerminationByKubelet")
DT_EVICTION = cond("DisruptionTarget", reason="EvictedByEvictionAPI")
FEATURE_TRUE = cond("example.com/feature")
FEATURE_FALSE = cond("example.com/feature", "False")
READY_FALSE_BASE = {**merge_base(), "conditions": [cond("Ready", "False"), cond("PodScheduled")]}
FAILED_READY = ("Ready", "False", "PodFailed")
FAILED_CONTAINERS_READY = ("ContainersReady", "False", "PodFailed")
READY = ("Ready", "True", "")
SCHEDULED = ("PodScheduled", "True", "")

# (description, could have running containers, API status, cached status,
#  expected phase, reason, message, conditions in order)
MERGE_CASES = [
    ("no change", False, merge_base(), merge_base(), "Running", None, "Message", [READY, SCHEDULED]),
    (
        "add DisruptionTarget condition when transitioning into failed phase",
        False,
        merge_base(),
        failed(with_conditions(merge_base(), DT_KUBELET)),
        "Failed",
        None,
        "Message",
        [
            FAILED_READY,
            SCHEDULED,
            ("DisruptionTarget", "True", "TerminationByKubelet"),
            FAILED_CONTAINERS_READY,
        ],
    ),
    (
        "don't add DisruptionTarget condition when transitioning into failed phase, "
        "but there might still be running containers",
        True,
        merge_base(),
        failed(with_conditions(merge_base(), DT_KUBELET)),
        "Running",
        None,
        "Message",
        [READY, SCHEDULED],
    ),
    (
        "preserve DisruptionTarget condition",
        False,
        with_conditions(merge_base(), DT_KUBELET),
        merge_base(),
        "Running",
        None,
        "Message",
        [("DisruptionTarget", "True", "TerminationByKubelet"), READY, SCHEDULED],
    ),
    (
        "override DisruptionTarget condition",
        False,
        with_conditions(merge_base(), DT_EVICTION),
        failed(with_conditions(merge_base(), DT_KUBELET)),
        "Failed",
        None,
        "Message",
        [
            ("DisruptionTarget", "True", "TerminationByKubelet"),
            FAILED_READY,
            SCHEDULED,
            FAILED_CONTAINERS_READY,
        ],
    ),
    (
        "don't override DisruptionTarget condition when remaining in running phase",
        False,
        with_conditions(merge_base(), DT_EVICTION),
        with_conditions(merge_base(), DT_KUBELET),
        "Running",
        None,
        "Message",
        [("DisruptionTarget", "True", "EvictedByEvictionAPI"), READY, SCHEDULED],
    ),
    (
        "don't override DisruptionTarget condition when transitioning to failed phase "
        "but there might still be running containers",
        True,
        with_conditions(merge_base(), DT_EVICTION),
        failed(with_conditions(merge_base(), DT_KUBELET)),
        "Running",
        None,
        "Message",
        [("DisruptionTarget", "True", "EvictedByEvictionAPI"), READY, SCHEDULED],
    ),
    (
        "readiness changes",
        False,
        merge_base(),
        READY_FALSE_BASE,
        "Running",
        None,
        "Message",
        [("Ready", "False", ""), SCHEDULED],
    ),
    (
        "additional pod condition",
        False,
        with_conditions(merge_base(), FEATURE_TRUE),
        merge_base(),
        "Running",
        None,
        "Message",
        [("example.com/feature", "True", ""), READY, SCHEDULED],
    ),
    (
        "additional pod condition and readiness changes",
        False,
        with_conditions(merge_base(), FEATURE_TRUE),
        READY_FALSE_BASE,
        "Running",
        None,
        "Message",
        [("example.com/feature", "True", ""), ("Ready", "False", ""), SCHEDULED],
    ),
    (
        "additional pod condition changes",
        False,
        with_conditions(merge_base(), FEATURE_TRUE),
        with_conditions(merge_base(), FEATURE_FALSE),
        "Running",
        None,
        "Message",
        [("example.com/feature", "True", ""), READY, SCHEDULED],
    ),
    (
        "phase is transitioning to failed and no containers running",
        False,
        {**merge_base(), "reason": "Unknown"},
        {**merge_base(), "phase": "Failed", "reason": "Evicted", "message": "Was Evicted"},
        "Failed",
        "Evicted",
        "Was Evicted",
        [FAILED_READY, SCHEDULED, FAILED_CONTAINERS_READY],
    ),
    (
        "phase is transitioning to failed and containers running",
        True,
        {**merge_base(), "reason": "Unknown"},
        {**merge_base(), "phase": "Failed", "reason": "Evicted", "message": "Was Evicted"},
        "Running",
        "Unknown",
        "Message",
        [READY, SCHEDULED],
    ),
]


@pytest.mark.parametrize(
    ("running", "api", "new", "phase", "reason", "message", "conditions"),
    [case[1:] for case in MERGE_CASES],
    ids=[case[0] for case in MERGE_CASES],
)
def test_TestMergePodStatus(
    running: bool,
    api: JSONDict,
    new: JSONDict,
    phase: str,
    reason: str | None,
    message: str,
    conditions: list[tuple[str, str, str]],
) -> None:
    api_before, new_before = copy.deepcopy(api), copy.deepcopy(new)
    merged = api_sync.merge_pod_status(api, new, running, now=NOW)
    assert merged["phase"] == phase
    assert merged.get("reason") == reason
    assert merged["message"] == message
    assert shape(merged["conditions"]) == conditions
    assert (api, new) == (api_before, new_before), "inputs must not change"


def test_TestMergePodStatus_terminal_conditions_get_now() -> None:
    """The forced Ready/ContainersReady and a new DisruptionTarget transition at `now`."""
    api = with_conditions(merge_base())
    api["conditions"][0]["lastTransitionTime"] = EARLIER
    merged = api_sync.merge_pod_status(api, failed(with_conditions(merge_base(), DT_KUBELET)), False, now=NOW)
    times = {c["type"]: c.get("lastTransitionTime") for c in merged["conditions"]}
    assert times["Ready"] == NOW
    assert times["ContainersReady"] == NOW
    assert times["DisruptionTarget"] == NOW


def test_TestMergePodStatus_disruption_target_keeps_api_time_when_unchanged() -> None:
    api = with_conditions(merge_base(), {**DT_EVICTION, "lastTransitionTime": EARLIER})
    cached = failed(
        with_conditions(merge_base(), {**DT_KUBELET, "lastTransitionTime": "2026-01-01T11:00:00Z"})
    )
    merged = api_sync.merge_pod_status(api, cached, False, now=NOW)
    target = next(c for c in merged["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["reason"], target["lastTransitionTime"]) == ("TerminationByKubelet", EARLIER)


def test_TestMergePodStatus_succeeded_is_pod_completed() -> None:
    merged = api_sync.merge_pod_status(merge_base(), {**merge_base(), "phase": "Succeeded"}, False, now=NOW)
    assert shape(merged["conditions"]) == [
        ("Ready", "False", "PodCompleted"),
        SCHEDULED,
        ("ContainersReady", "False", "PodCompleted"),
    ]


def test_TestMergePodStatus_terminal_keeps_cached_phase_even_if_running() -> None:
    """Not a transition (the API is already terminal): the hold-back does not apply."""
    api = {**merge_base(), "phase": "Failed", "reason": "Evicted"}
    merged = api_sync.merge_pod_status(api, {**merge_base(), "phase": "Failed"}, True, now=NOW)
    assert (merged["phase"], merged.get("reason")) == ("Failed", None)
    assert shape(merged["conditions"]) == [FAILED_READY, SCHEDULED, FAILED_CONTAINERS_READY]


def test_TestMergePodStatus_resource_claim_statuses_come_from_api() -> None:
    claims = [{"name": "gpu", "resourceClaimName": "pod-gpu-x1"}]
    merged = api_sync.merge_pod_status(
        {**merge_base(), "resourceClaimStatuses": claims},
        {**merge_base(), "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "mine"}]},
        False,
        now=NOW,
    )
    assert merged["resourceClaimStatuses"] == claims
    alone = api_sync.merge_pod_status(
        merge_base(), {**merge_base(), "resourceClaimStatuses": claims}, False, now=NOW
    )
    assert "resourceClaimStatuses" not in alone


# --------------------------------------------------------------------------- TestPatchPodStatus


def go_container_status(name: str, ready: bool) -> JSONDict:
    """A v1.ContainerStatus{Name, Ready} as Go's json.Marshal writes it."""
    return {
        "name": name,
        "state": {},
        "lastState": {},
        "ready": ready,
        "restartCount": 0,
        "image": "",
        "imageID": "",
    }


def go_condition(type_: str, status: str) -> JSONDict:
    return {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": None}


def patch_base() -> JSONDict:
    """getPodStatus() of pod_test.go, marshalled as Go does."""
    return {
        "phase": "Running",
        "conditions": [go_condition("Ready", "True"), go_condition("PodScheduled", "True")],
        "message": "Message",
        "containerStatuses": [
            go_container_status("container1", True),
            go_container_status("container2", True),
        ],
    }


def message_change(status: JSONDict) -> JSONDict:
    return {**status, "message": "random message"}


def condition_change(status: JSONDict) -> JSONDict:
    status["conditions"][0]["status"] = "False"
    return status


def init_container_added(status: JSONDict) -> JSONDict:
    return {**status, "initContainerStatuses": [go_container_status("init-container", True)]}


PATCH_CASES = [
    ("no change", lambda s: s, True, b'{"metadata":{"uid":"myuid"}}'),
    (
        "message change",
        message_change,
        False,
        b'{"metadata":{"uid":"myuid"},"status":{"message":"random message"}}',
    ),
    (
        "pod condition change",
        condition_change,
        False,
        b'{"metadata":{"uid":"myuid"},"status":{"$setElementOrder/conditions":[{"type":"Ready"},'
        b'{"type":"PodScheduled"}],"conditions":[{"status":"False","type":"Ready"}]}}',
    ),
    (
        "additional init container condition",
        init_container_added,
        False,
        b'{"metadata":{"uid":"myuid"},"status":{"initContainerStatuses":[{"image":"","imageID":"",'
        b'"lastState":{},"name":"init-container","ready":true,"restartCount":0,"state":{}}]}}',
    ),
]


@pytest.mark.parametrize(
    ("mutate", "unchanged", "expected"),
    [case[1:] for case in PATCH_CASES],
    ids=[case[0] for case in PATCH_CASES],
)
def test_TestPatchPodStatus(mutate: Any, unchanged: bool, expected: bytes) -> None:
    patch = api_sync.status_patch("myuid", patch_base(), mutate(patch_base()))
    assert (patch is None) == unchanged
    sent = {"metadata": {"uid": "myuid"}} if patch is None else patch
    assert api_sync.patch_bytes(sent) == expected


# --------------------------------------------------------------------------- strategic merge patch units


def status_patch_of(api: JSONDict, merged: JSONDict) -> JSONDict | None:
    patch = api_sync.status_patch("u", api, merged)
    if patch is not None:
        assert patch["metadata"] == {"uid": "u"}
        return patch["status"]
    return None


def test_strategic_patch_pod_ips_merge_by_ip() -> None:
    api = {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}]}
    merged = {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}
    assert status_patch_of(api, merged) == {
        "$setElementOrder/podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
        "podIPs": [{"ip": "fd00::1"}],
    }


def test_strategic_patch_pod_ip_replaced() -> None:
    api = {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}], "hostIPs": [{"ip": "192.168.0.2"}]}
    merged = {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}], "hostIPs": [{"ip": "192.168.0.2"}]}
    assert status_patch_of(api, merged) == {
        "podIP": "10.0.0.9",
        "$setElementOrder/podIPs": [{"ip": "10.0.0.9"}],
        "podIPs": [{"ip": "10.0.0.9"}, {"ip": "10.0.0.1", "$patch": "delete"}],
    }


def test_strategic_patch_removed_condition_is_deleted() -> None:
    api = {"conditions": [cond("Ready"), cond("example.com/gone"), cond("PodScheduled")]}
    merged = {"conditions": [cond("Ready"), cond("PodScheduled")]}
    patch = api_sync.status_patch("myuid", api, merged)
    assert patch is not None
    assert api_sync.patch_bytes(patch) == (
        b'{"metadata":{"uid":"myuid"},"status":{"$setElementOrder/conditions":[{"type":"Ready"},'
        b'{"type":"PodScheduled"}],"conditions":[{"$patch":"delete","type":"example.com/gone"}]}}'
    )


def test_strategic_patch_changes_follow_new_order_then_deletions() -> None:
    api = {"conditions": [cond("Ready"), cond("Old"), cond("PodScheduled", "False")]}
    merged = {"conditions": [cond("PodScheduled"), cond("Initialized"), cond("Ready", "False")]}
    assert status_patch_of(api, merged) == {
        "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Initialized"}, {"type": "Ready"}],
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            cond("Initialized"),
            {"type": "Ready", "status": "False"},
            {"type": "Old", "$patch": "delete"},
        ],
    }


def test_strategic_patch_order_only_change() -> None:
    api = {"conditions": [cond("Ready"), cond("PodScheduled")]}
    merged = {"conditions": [cond("PodScheduled"), cond("Ready")]}
    assert status_patch_of(api, merged) == {
        "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}]
    }


def test_strategic_patch_new_merge_list_is_sent_whole() -> None:
    merged = {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}]}
    assert status_patch_of({"phase": "Running"}, merged) == {"podIPs": [{"ip": "10.0.0.1"}]}


def test_strategic_patch_removed_scalar_becomes_null() -> None:
    api = {"phase": "Failed", "reason": "Evicted", "message": "Was Evicted"}
    patch = api_sync.status_patch("myuid", api, {"phase": "Failed"})
    assert patch is not None
    assert (
        api_sync.patch_bytes(patch) == b'{"metadata":{"uid":"myuid"},"status":{"message":null,"reason":null}}'
    )


def test_strategic_patch_removed_list_becomes_null() -> None:
    api = {"phase": "Running", "conditions": [cond("Ready")], "podIPs": [{"ip": "10.0.0.1"}]}
    assert status_patch_of(api, {"phase": "Running", "podIPs": []}) == {"conditions": None, "podIPs": None}


def test_strategic_patch_container_statuses_are_atomic() -> None:
    api = patch_base()
    merged = patch_base()
    merged["containerStatuses"][1]["ready"] = False
    assert status_patch_of(api, merged) == {"containerStatuses": merged["containerStatuses"]}
    merged_reordered = patch_base()
    merged_reordered["containerStatuses"].reverse()
    assert status_patch_of(api, merged_reordered) == {
        "containerStatuses": merged_reordered["containerStatuses"]
    }


def test_strategic_patch_resource_claim_statuses_retain_keys() -> None:
    api = {"resourceClaimStatuses": [{"name": "a", "resourceClaimName": "x"}, {"name": "b"}]}
    merged = {"resourceClaimStatuses": [{"name": "a", "resourceClaimName": "y"}, {"name": "b"}]}
    assert status_patch_of(api, merged) == {
        "$setElementOrder/resourceClaimStatuses": [{"name": "a"}, {"name": "b"}],
        "resourceClaimStatuses": [
            {"$retainKeys": ["name", "resourceClaimName"], "name": "a", "resourceClaimName": "y"}
        ],
    }


def test_strategic_patch_null_and_empty_equal_absent() -> None:
    """Go marshals a typed status, so null, "" and [] on one side match nothing on the other."""
    api = {"phase": "Running", "conditions": [go_condition("Ready", "True")], "nominatedNodeName": None}
    merged = {"phase": "Running", "conditions": [cond("Ready")], "message": "", "podIPs": []}
    assert api_sync.status_patch("u", api, merged) is None


def test_strategic_patch_nested_map_diffed_per_field() -> None:
    api = {"extendedResourceClaimStatus": {"resourceClaimName": "c1", "requestMappings": [{"a": 1}]}}
    merged = {"extendedResourceClaimStatus": {"resourceClaimName": "c2", "requestMappings": [{"a": 1}]}}
    assert status_patch_of(api, merged) == {"extendedResourceClaimStatus": {"resourceClaimName": "c2"}}


def test_strategic_patch_merge_key_missing_is_an_error() -> None:
    with pytest.raises(ValueError, match="merge key"):
        api_sync.status_patch("u", {"conditions": [cond("Ready")]}, {"conditions": [{"status": "True"}]})


def test_status_patch_does_not_mutate_inputs() -> None:
    api, merged = patch_base(), condition_change(init_container_added(patch_base()))
    api_before, merged_before = copy.deepcopy(api), copy.deepcopy(merged)
    api_sync.status_patch("u", api, merged)
    assert (api, merged) == (api_before, merged_before)


def test_patch_bytes_escapes_like_go() -> None:
    raw = api_sync.patch_bytes({"status": {"message": "a<b>&c\u2028"}, "metadata": {"uid": "u"}})
    assert raw == b'{"metadata":{"uid":"u"},"status":{"message":"a\\u003cb\\u003e\\u0026c\\u2028"}}'
    assert orjson.loads(raw)["status"]["message"] == "a<b>&c\u2028"


# A small strategic-merge applier for the subset above, to check patch(api) == merged.


def _apply(original: JSONDict, patch: JSONDict, merge_lists: dict[str, tuple[str, bool]]) -> JSONDict:
    out = copy.deepcopy(original)
    retain = patch.get("$retainKeys")
    if retain is not None:
        out = {k: v for k, v in out.items() if k in retain}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif key in merge_lists and isinstance(out.get(key), list):
            merge_key = merge_lists[key][0]
            items = {e[merge_key]: e for e in out[key]}
            for element in value:
                if element.get("$patch") == "delete":
                    items.pop(element[merge_key], None)
                elif element[merge_key] in items:
                    items[element[merge_key]] = _apply(items[element[merge_key]], element, {})
                else:
                    items[element[merge_key]] = element
            order = [e[merge_key] for e in patch.get(f"$setElementOrder/{key}", [])]
            ordered = [items[k] for k in order if k in items] + [
                v for k, v in items.items() if k not in order
            ]
            out[key] = ordered
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _apply(out[key], value, {})
        else:
            out[key] = value
    for key in patch:
        if key.startswith("$setElementOrder/") and key[len("$setElementOrder/") :] not in patch:
            field = key[len("$setElementOrder/") :]
            merge_key = api_sync.POD_STATUS_MERGE_LISTS[field][0]
            by_key = {e[merge_key]: e for e in out[field]}
            out[field] = [by_key[e[merge_key]] for e in patch[key]]
    return out


ROUND_TRIPS = [
    (patch_base(), condition_change(init_container_added(message_change(patch_base())))),
    (
        {"conditions": [cond("Ready"), cond("Old"), cond("PodScheduled", "False")], "podIPs": [{"ip": "a"}]},
        {
            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("Ready", "False")],
            "podIPs": [{"ip": "b"}],
        },
    ),
    (
        {"conditions": [cond("Ready"), cond("PodScheduled")]},
        {"conditions": [cond("PodScheduled"), cond("Ready")]},
    ),
    (
        {
            "phase": "Running",
            "reason": "Unknown",
            "resourceClaimStatuses": [{"name": "a", "resourceClaimName": "x"}],
        },
        {
            "phase": "Failed",
            "resourceClaimStatuses": [{"name": "a"}, {"name": "z", "resourceClaimName": "q"}],
        },
    ),
]


@pytest.mark.parametrize(("api", "merged"), ROUND_TRIPS)
def test_strategic_patch_round_trips(api: JSONDict, merged: JSONDict) -> None:
    patch = api_sync.status_patch("u", api, merged)
    assert patch is not None
    applied = _apply(api, patch["status"], api_sync.POD_STATUS_MERGE_LISTS)
    assert api_sync.status_patch("u", applied, merged) is None
    assert api_sync.status_patch("u", merged, applied) is None


# --------------------------------------------------------------------------- TestReconcilePodStatus


def reconcile_pod(status: JSONDict) -> JSONDict:
    return make_pod(status=status)


def cached_status() -> JSONDict:
    """A status as set_pod_status caches it: normalized, times in whole seconds."""
    return {
        "phase": "Running",
        "message": "12345",
        "startTime": "2026-01-01T09:59:00Z",
        "conditions": [
            {**cond("Ready"), "lastProbeTime": None, "lastTransitionTime": "2026-01-01T09:59:30Z"},
            {**cond("PodScheduled"), "lastProbeTime": None, "lastTransitionTime": "2026-01-01T09:59:00Z"},
        ],
        "containerStatuses": [
            {
                "name": "c",
                "state": {"running": {"startedAt": "2026-01-01T09:59:10Z"}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": "img",
                "imageID": "",
            }
        ],
    }


def test_TestReconcilePodStatus_same_status_needs_nothing() -> None:
    cached = cached_status()
    assert not api_sync.needs_reconcile(copy.deepcopy(cached), cached, reconcile_pod(cached))


def test_TestReconcilePodStatus_subsecond_timestamps_need_nothing() -> None:
    cached = cached_status()
    api = copy.deepcopy(cached)
    api["startTime"] = "2026-01-01T09:59:00.123456789Z"
    api["conditions"][0]["lastTransitionTime"] = "2026-01-01T09:59:30.5Z"
    api["containerStatuses"][0]["state"]["running"]["startedAt"] = "2026-01-01T09:59:10.999Z"
    assert not api_sync.needs_reconcile(api, cached, reconcile_pod(api))


def test_TestReconcilePodStatus_different_owned_condition_needs_reconcile() -> None:
    cached = cached_status()
    api = copy.deepcopy(cached)
    api["conditions"][0]["status"] = "False"
    assert api_sync.needs_reconcile(api, cached, reconcile_pod(api))
    api["conditions"] = api["conditions"][1:]  # Ready gone from the API
    assert api_sync.needs_reconcile(api, cached, reconcile_pod(api))


def test_TestReconcilePodStatus_different_status_needs_reconcile() -> None:
    cached = cached_status()
    api = {**copy.deepcopy(cached), "message": "67890"}  # getRandomPodStatus differs
    assert api_sync.needs_reconcile(api, cached, reconcile_pod(api))


def test_TestReconcilePodStatus_foreign_condition_needs_nothing() -> None:
    cached = with_conditions(cached_status(), cond("www.example.com/feature"))
    api = with_conditions(cached_status(), cond("www.example.com/feature", "False"), cond("other.io/gate"))
    assert not api_sync.needs_reconcile(api, cached, reconcile_pod(api))


def test_TestReconcilePodStatus_does_not_mutate_inputs() -> None:
    cached = cached_status()
    api = copy.deepcopy(cached)
    api["startTime"] = "2026-01-01T09:59:00.5Z"
    api_before = copy.deepcopy(api)
    api_sync.needs_reconcile(api, cached, reconcile_pod(api))
    assert api == api_before


# --------------------------------------------------------------------------- TestDeletePod* / mirror pods


def api_pod(phase: str, *, deleting: bool = True, mirror: bool = False, uid: str = "12345678") -> JSONDict:
    return make_pod(
        uid=uid,
        metadata={"deletionTimestamp": NOW} if deleting else None,
        annotations={CONFIG_SOURCE_ANNOTATION: "api", CONFIG_MIRROR_ANNOTATION: "mirror"} if mirror else None,
        status={"phase": phase},
    )


def test_TestDeletePodBeforeFinished() -> None:
    """SetPodStatus(Failed) on a deleting pod: PATCH, but no DELETE before TerminatePod."""
    assert not api_sync.can_be_deleted(api_pod("Failed"), False, False)


def test_TestDeletePodFinished() -> None:
    """TerminatePod ran (finished) and the API phase is terminal: DELETE."""
    assert api_sync.can_be_deleted(api_pod("Failed"), True, False)
    assert api_sync.can_be_deleted(api_pod("Succeeded"), True, False)


def test_TestDeletePodFinished_waits_for_terminal_api_phase() -> None:
    assert not api_sync.can_be_deleted(api_pod("Running"), True, False)


def test_delete_pod_not_being_deleted() -> None:
    assert not api_sync.can_be_deleted(api_pod("Failed", deleting=False), True, False)


def test_TestDoNotDeleteMirrorPods() -> None:
    assert not api_sync.can_be_deleted(api_pod("Failed", mirror=True), True, False)
    assert not api_sync.can_be_deleted(api_pod("Failed"), True, True)
    assert api_sync.is_mirror_pod(api_pod("Failed", mirror=True))
    assert not api_sync.is_mirror_pod(api_pod("Failed"))


# --------------------------------------------------------------------------- TestSyncPod*


def versioned(status: JSONDict, version: int = 1, running: bool = False) -> JSONDict:
    return {"status": status, "version": version, "could_have_running_containers": running}


def test_TestSyncPodIgnoresNotFound() -> None:
    decision = api_sync.sync_decision("12345678", None, versioned({"message": "m"}), None, now=NOW)
    assert (decision.action, decision.patch, decision.version) == ("skip-notfound", None, None)


def test_TestSyncPodChecksMismatchedUID() -> None:
    """A status for "second" while the API returns "first": GET only, the status is dropped."""
    pod = api_pod("Running", deleting=False, uid="first")
    decision = api_sync.sync_decision("second", pod, versioned({"message": "m"}), None, now=NOW)
    assert (decision.action, decision.patch, decision.version) == ("drop-recreated", None, None)


def test_TestSyncPod() -> None:
    pod = api_pod("Running", deleting=False)
    decision = api_sync.sync_decision(
        "12345678", pod, versioned({"phase": "Running", "message": "m"}, 3), None, now=NOW
    )
    assert decision.action == "patch"
    assert decision.patch == {"metadata": {"uid": "12345678"}, "status": {"message": "m"}}
    assert (decision.version, decision.advances) == (3, True)


def test_TestStaleUpdates() -> None:
    """The API already shows the status, the recorded version is behind: no PATCH."""
    status = {"phase": "Running", "message": "second version bump"}
    pod = {**api_pod("Running", deleting=False), "status": status}
    decision = api_sync.sync_decision("12345678", pod, versioned(status, 3), 2, now=NOW)
    assert (decision.action, decision.patch, decision.version, decision.advances) == (
        "unchanged",
        None,
        3,
        True,
    )
    again = api_sync.sync_decision("12345678", pod, versioned(status, 3), 3, now=NOW)
    assert (again.action, again.advances) == ("unchanged", False)


def test_TestSyncPodNoDeadlock_deleting_but_still_running() -> None:
    """PATCH (readiness), phase and message
    stay the API's until the pod worker has terminated the pod."""
    pod = api_pod("Running")
    pod["status"] = {"phase": "Running", "message": "api", "conditions": [cond("Ready")]}
    cached = {"phase": "Failed", "message": "m", "conditions": [cond("Ready", "False", "PodFailed")]}
    decision = api_sync.sync_decision("12345678", pod, versioned(cached, 2, running=True), 1, now=NOW)
    assert decision.action == "patch"
    assert decision.patch == {
        "metadata": {"uid": "12345678"},
        "status": {
            "$setElementOrder/conditions": [{"type": "Ready"}],
            "conditions": [{"type": "Ready", "status": "False", "reason": "PodFailed"}],
        },
    }
    assert decision.merged is not None
    assert (decision.merged["phase"], decision.merged["message"]) == ("Running", "api")
    done = api_sync.sync_decision("12345678", pod, versioned(cached, 3, running=False), 2, now=NOW)
    assert done.patch is not None
    assert (done.patch["status"]["phase"], done.patch["status"]["message"]) == ("Failed", "m")
