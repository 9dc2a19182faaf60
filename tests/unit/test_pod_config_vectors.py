"""Pod config merging in incremental mode, source "test" (agents/sources/pod_config.py), named after the
upstream tests in pkg/kubelet/config/config_test.go, plus static pod defaults and sources-ready."""

from __future__ import annotations

import copy
import re

import pytest

from podledger.agents.sources.pod_config import (
    HASH_ANNOTATION,
    SEEN_ANNOTATION,
    MergedUpdate,
    PodStorage,
    apply_static_defaults,
    pods_differ_semantically,
)
from podledger.types import CONFIG_MIRROR_ANNOTATION, CONFIG_SOURCE_ANNOTATION, JSONDict
from tests import pods

SRC = "test"
NOW = "2026-01-01T10:00:00Z"
LATER = "2026-01-01T10:05:00Z"


def valid_pod(name: str, namespace: str = "new") -> JSONDict:
    """CreateValidPod: the UID is name+namespace, unique enough for these tests."""
    ctr = pods.container("ctr", "image", imagePullPolicy="IfNotPresent", terminationMessagePolicy="File")
    return pods.pod(
        [ctr],
        name=name,
        namespace=namespace,
        uid=name + namespace,
        restart_policy="Always",
        dnsPolicy="ClusterFirst",
    )


def other_containers(pod: JSONDict) -> JSONDict:
    pod["spec"]["containers"] = [
        pods.container("bar", "test", imagePullPolicy="IfNotPresent", terminationMessagePolicy="File")
    ]
    return pod


def names(update: MergedUpdate) -> list[str]:
    return sorted(p["metadata"]["name"] for p in update.pods)


def expect(got: list[MergedUpdate], *expected: tuple[str, list[JSONDict]]) -> None:
    """Like upstream expectPodUpdate: same ops/sources in order, pods equal ignoring local annotations."""
    assert [(u.op, u.source) for u in got] == [(op, SRC) for op, _ in expected]
    for update, (_, expected_pods) in zip(got, expected, strict=True):
        want = sorted(expected_pods, key=lambda p: p["metadata"]["name"])
        have = sorted(update.pods, key=lambda p: p["metadata"]["name"])
        assert len(have) == len(want)
        for w, h in zip(want, have, strict=True):
            assert not pods_differ_semantically(w, h), (w, h)
            assert (w.get("status") or {}) == (h.get("status") or {})


def test_TestNewPodAdded() -> None:
    storage = PodStorage()
    got = storage.merge(SRC, "ADD", [valid_pod("foo")], NOW)
    expect(got, ("ADD", [valid_pod("foo")]))
    annotations = got[0].pods[0]["metadata"]["annotations"]
    assert annotations[CONFIG_SOURCE_ANNOTATION] == SRC
    assert annotations[SEEN_ANNOTATION] == NOW

    synced = storage.sync()
    assert (synced.op, synced.source) == ("SET", "*")
    assert names(synced) == ["foo"]


def test_TestNewPodAddedUpdatedRemoved() -> None:
    storage = PodStorage()
    expect(storage.merge(SRC, "ADD", [valid_pod("foo")], NOW), ("ADD", [valid_pod("foo")]))
    # An identical ADD changes nothing.
    assert storage.merge(SRC, "ADD", [valid_pod("foo")], LATER) == []

    changed = other_containers(valid_pod("foo"))
    expect(storage.merge(SRC, "ADD", [changed], LATER), ("UPDATE", [changed]))

    expect(storage.merge(SRC, "REMOVE", [valid_pod("foo")], LATER), ("REMOVE", [changed]))
    assert storage.pods[SRC] == {}
    # Removing an unknown pod is a no-op.
    assert storage.merge(SRC, "REMOVE", [valid_pod("foo")], LATER) == []


def test_TestNewPodAddedDelete() -> None:
    storage = PodStorage()
    expect(storage.merge(SRC, "ADD", [valid_pod("foo")], NOW), ("ADD", [valid_pod("foo")]))

    deleted = valid_pod("foo")
    deleted["metadata"]["deletionTimestamp"] = LATER
    deleted["metadata"]["deletionGracePeriodSeconds"] = 30
    got = storage.merge(SRC, "DELETE", [deleted], LATER)
    expect(got, ("DELETE", [deleted]))
    assert got[0].pods[0]["metadata"]["deletionTimestamp"] == LATER
    # A source DELETE is an upsert: the pod stays stored until a REMOVE.
    assert "foonew" in storage.pods[SRC]


def test_TestNewPodAddedUpdatedSet() -> None:
    storage = PodStorage()
    first = [valid_pod("foo"), valid_pod("foo2"), valid_pod("foo3")]
    expect(storage.merge(SRC, "ADD", first, NOW), ("ADD", first))

    foo2 = other_containers(valid_pod("foo2"))
    got = storage.merge(SRC, "SET", [foo2, valid_pod("foo3"), valid_pod("foo4")], LATER)
    expect(got, ("REMOVE", [valid_pod("foo")]), ("ADD", [valid_pod("foo4")]), ("UPDATE", [foo2]))
    assert sorted(storage.pods[SRC]) == ["foo2new", "foo3new", "foo4new"]


@pytest.mark.parametrize("op", ["ADD", "SET"])
def test_TestNewPodAddedSetReconciled(op: str) -> None:
    def fresh(touch_status: bool, touch_spec: bool) -> list[JSONDict]:
        pods = [valid_pod("changeable-pod-0"), valid_pod("constant-pod-1"), valid_pod("constant-pod-2")]
        if touch_status:
            pods[0]["status"] = {"message": "touched"}
        if touch_spec:
            pods[0]["spec"]["containers"][0]["name"] = "renamed"
        return pods

    storage = PodStorage()
    # SET first so the source is marked seen; its adds stand in for the ready signal.
    expect(storage.merge(SRC, "SET", fresh(False, False), NOW), ("ADD", fresh(False, False)))
    assert storage.merge(SRC, op, fresh(False, False), NOW) == []

    pods = fresh(True, False)
    got = storage.merge(SRC, op, pods, NOW)
    expect(got, ("RECONCILE", [pods[0]]))
    assert got[0].pods[0]["status"] == {"message": "touched"}

    pods = fresh(True, True)
    pods[0]["status"] = {"message": "touched again"}
    got = storage.merge(SRC, op, pods, NOW)
    expect(got, ("UPDATE", [pods[0]]))
    assert got[0].pods[0]["status"] == {"message": "touched again"}


def test_TestInitialEmptySet() -> None:
    storage = PodStorage()
    assert storage.merge(SRC, "SET", [], NOW) == [MergedUpdate("ADD", SRC, ())]
    # Only the first SET signals readiness.
    assert storage.merge(SRC, "SET", [], NOW) == []
    expect(storage.merge(SRC, "ADD", [valid_pod("foo")], NOW), ("ADD", [valid_pod("foo")]))


def test_first_set_with_only_removals_still_signals_ready() -> None:
    # Derived from Merge: the ready signal depends on adds/updates/deletes only, so it follows a REMOVE.
    storage = PodStorage()
    storage.merge(SRC, "ADD", [valid_pod("foo")], NOW)
    got = storage.merge(SRC, "SET", [], NOW)
    assert [(u.op, len(u.pods)) for u in got] == [("REMOVE", 1), ("ADD", 0)]


def test_TestPodUpdateAnnotations() -> None:
    storage = PodStorage()
    pod = valid_pod("foo2")
    pod["metadata"]["annotations"] = {"kubernetes.io/blah": "blah"}
    everything = [valid_pod("foo1"), copy.deepcopy(pod), valid_pod("foo3")]
    expect(storage.merge(SRC, "SET", everything, NOW), ("ADD", everything))

    pod["metadata"]["annotations"]["kubernetes.io/blah"] = "superblah"
    got = storage.merge(SRC, "SET", [valid_pod("foo1"), copy.deepcopy(pod), valid_pod("foo3")], NOW)
    expect(got, ("UPDATE", [pod]))

    pod["metadata"]["annotations"]["kubernetes.io/otherblah"] = "doh"
    got = storage.merge(SRC, "SET", [valid_pod("foo1"), copy.deepcopy(pod), valid_pod("foo3")], NOW)
    expect(got, ("UPDATE", [pod]))

    del pod["metadata"]["annotations"]["kubernetes.io/blah"]
    got = storage.merge(SRC, "SET", [valid_pod("foo1"), copy.deepcopy(pod), valid_pod("foo3")], NOW)
    expect(got, ("UPDATE", [pod]))
    assert "kubernetes.io/blah" not in got[0].pods[0]["metadata"]["annotations"]


def test_TestPodUpdateLabels() -> None:
    storage = PodStorage()
    pod = valid_pod("foo2")
    pod["metadata"]["labels"] = {"key": "value"}
    expect(storage.merge(SRC, "SET", [copy.deepcopy(pod)], NOW), ("ADD", [pod]))
    pod["metadata"]["labels"]["key"] = "newValue"
    expect(storage.merge(SRC, "SET", [copy.deepcopy(pod)], NOW), ("UPDATE", [pod]))


def test_local_annotations_ignored_and_seen_kept() -> None:
    storage = PodStorage()
    storage.merge(SRC, "ADD", [valid_pod("foo")], NOW)
    local = valid_pod("foo")
    local["metadata"]["annotations"] = {SEEN_ANNOTATION: "bogus", CONFIG_MIRROR_ANNOTATION: "x"}
    assert storage.merge(SRC, "ADD", [local], LATER) == []

    changed = other_containers(valid_pod("foo"))
    changed["metadata"]["annotations"] = {SEEN_ANNOTATION: "bogus", "a": "b"}
    (update,) = storage.merge(SRC, "UPDATE", [changed], LATER)
    annotations = update.pods[0]["metadata"]["annotations"]
    assert annotations == {"a": "b", CONFIG_SOURCE_ANNOTATION: SRC, SEEN_ANNOTATION: NOW}


def test_duplicate_name_namespace_dropped() -> None:
    storage = PodStorage()
    first = valid_pod("foo")
    twin = valid_pod("foo")
    twin["metadata"]["uid"] = "another-uid"
    got = storage.merge(SRC, "SET", [first, twin, valid_pod("foo", "other")], NOW)
    assert [(u.op, sorted(p["metadata"]["uid"] for p in u.pods)) for u in got] == [
        ("ADD", ["foonew", "fooother"])
    ]
    assert [p["metadata"]["uid"] for p in storage.rejected] == ["another-uid"]
    assert sorted(storage.pods[SRC]) == ["foonew", "fooother"]
    # The next merge reports only its own rejects.
    storage.merge(SRC, "ADD", [valid_pod("bar")], NOW)
    assert storage.rejected == ()


def test_inputs_and_outputs_are_not_aliased() -> None:
    storage = PodStorage()
    pod = valid_pod("foo")
    (update,) = storage.merge(SRC, "ADD", [pod], NOW)
    assert "annotations" not in pod["metadata"]
    update.pods[0]["spec"]["containers"].clear()
    pod["spec"]["containers"].clear()
    assert storage.pods[SRC]["foonew"]["spec"]["containers"]
    assert storage.sync().pods[0]["spec"]["containers"]


def test_unknown_op_rejected_without_state_change() -> None:
    storage = PodStorage()
    with pytest.raises(ValueError):
        storage.merge(SRC, "RECONCILE", [valid_pod("foo")], NOW)
    assert storage.pods == {}


def test_sources_ready() -> None:
    storage = PodStorage()
    expected = {"file", "api"}
    assert not storage.sources_ready(expected)
    storage.merge("api", "ADD", [valid_pod("foo")], NOW)
    assert not storage.sources_ready(expected)  # an ADD is not a SET
    storage.merge("api", "SET", [valid_pod("foo")], NOW)
    assert not storage.sources_ready(expected)
    storage.merge("file", "SET", [], NOW)
    assert storage.sources_ready(expected)
    assert storage.sources_ready(set())
    assert not storage.sources_ready({"file", "http"})


def manifest(image: str = "nginx:1.25") -> JSONDict:
    """A static pod manifest as written: no uid, and an empty namespace that the defaults fill in."""
    return pods.pod(("web",), name="web", namespace="", uid=None, image=image)


def test_static_defaults_file_pod() -> None:
    original = manifest()
    pod = apply_static_defaults(
        original, "Node-A", source="file", path_or_url="/etc/kubernetes/manifests/web.yaml"
    )
    meta = pod["metadata"]
    assert re.fullmatch(r"[0-9a-f]{32}", meta["uid"])
    assert meta["name"] == "web-node-a"
    assert meta["namespace"] == "default"
    assert pod["spec"]["nodeName"] == "Node-A"
    assert meta["annotations"][HASH_ANNOTATION] == meta["uid"]
    assert pod["spec"]["tolerations"] == [{"operator": "Exists", "effect": "NoExecute"}]
    assert pod["status"]["phase"] == "Pending"
    assert original == manifest()  # a new dict; the input is untouched


def test_static_uid_changes_when_manifest_edited() -> None:
    path = "/etc/kubernetes/manifests/web.yaml"
    uid = apply_static_defaults(manifest(), "n1", source="file", path_or_url=path)["metadata"]["uid"]
    assert apply_static_defaults(manifest(), "n1", source="file", path_or_url=path)["metadata"]["uid"] == uid
    edited = apply_static_defaults(manifest("nginx:1.26"), "n1", source="file", path_or_url=path)
    assert edited["metadata"]["uid"] != uid
    assert apply_static_defaults(manifest(), "n2", source="file", path_or_url=path)["metadata"]["uid"] != uid
    other_path = apply_static_defaults(manifest(), "n1", source="file", path_or_url="/other.yaml")
    assert other_path["metadata"]["uid"] != uid


def test_static_edit_is_remove_then_add() -> None:
    path = "/m/web.yaml"
    storage = PodStorage()
    v1 = apply_static_defaults(manifest(), "n1", source="file", path_or_url=path)
    storage.merge("file", "SET", [v1], NOW)
    v2 = apply_static_defaults(manifest("nginx:1.26"), "n1", source="file", path_or_url=path)
    got = storage.merge("file", "SET", [v2], LATER)
    assert [(u.op, u.pods[0]["metadata"]["uid"]) for u in got] == [
        ("REMOVE", v1["metadata"]["uid"]),
        ("ADD", v2["metadata"]["uid"]),
    ]


def test_static_defaults_http_pod() -> None:
    url = "http://config.example/pods"
    pod = apply_static_defaults(manifest(), "n1", source="http", path_or_url=url)
    assert "tolerations" not in pod["spec"]
    assert pod["metadata"]["name"] == "web-n1"
    assert pod["status"]["phase"] == "Pending"
    # Upstream hashes only the URL for http pods, not the host.
    assert (
        apply_static_defaults(manifest(), "n2", source="http", path_or_url=url)["metadata"]["uid"]
        == (pod["metadata"]["uid"])
    )
    assert (
        apply_static_defaults(manifest(), "n1", source="http", path_or_url=url + "2")["metadata"]["uid"]
        != (pod["metadata"]["uid"])
    )


def test_static_defaults_keep_given_fields() -> None:
    given = manifest()
    given["metadata"].update(uid="fixed", namespace="kube-system")
    given["spec"]["tolerations"] = [
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
    ]
    pod = apply_static_defaults(given, "n1", source="file", path_or_url="/m/web.yaml")
    assert pod["metadata"]["uid"] == "fixed"
    assert pod["metadata"]["annotations"][HASH_ANNOTATION] == "fixed"
    assert pod["metadata"]["namespace"] == "kube-system"
    # The matching toleration is replaced in place, not duplicated.
    assert pod["spec"]["tolerations"] == [
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "NoExecute"},
    ]


def test_static_defaults_reject_other_sources() -> None:
    with pytest.raises(ValueError):
        apply_static_defaults(manifest(), "n1", source="api", path_or_url="")


def test_emission_order_all_kinds() -> None:
    # Derived from Merge: one SET producing every kind emits REMOVE, ADD, UPDATE, DELETE, RECONCILE.
    storage = PodStorage()
    storage.merge(SRC, "ADD", [valid_pod(n) for n in ("gone", "upd", "del", "rec")], NOW)
    deleted = valid_pod("del")
    deleted["metadata"]["deletionTimestamp"] = LATER
    reconciled = valid_pod("rec")
    reconciled["status"] = {"phase": "Running"}
    got = storage.merge(
        SRC, "SET", [valid_pod("new"), other_containers(valid_pod("upd")), deleted, reconciled], LATER
    )
    assert [(u.op, names(u)) for u in got] == [
        ("REMOVE", ["gone"]),
        ("ADD", ["new"]),
        ("UPDATE", ["upd"]),
        ("DELETE", ["del"]),
        ("RECONCILE", ["rec"]),
    ]
