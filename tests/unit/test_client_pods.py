"""The Pod object of a versioned status, and what a selector's view sees change
(read/client/pods.py)."""

from __future__ import annotations

from functools import partial

from podledger.read.client.pods import STATUS_VERSION_ANNOTATION, ChangeType, Selection, pod_object
from podledger.read.client.select import PodFilter
from tests import pods

make_pod = partial(pods.pod, ["main"], node="n1", image="app:1")


def versioned(version: int, labels: dict[str, str] | None = None, uid: str = "u1") -> tuple:
    desired = make_pod(name="web", uid=uid, metadata={"labels": labels or {}, "managedFields": [{}]})
    return pods.versioned(desired, "n1", version, pods.running_status()), desired


def test_the_pod_joins_the_desired_pod_and_the_status() -> None:
    vs, desired = versioned(3, {"app": "web"})
    desired["metadata"]["resourceVersion"] = "12345"
    obj = pod_object(vs, desired, "pl1.token")
    assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert obj["metadata"]["resourceVersion"] == "pl1.token", "the ledger's position, not the apiserver's"
    assert "managedFields" not in obj["metadata"]
    assert obj["metadata"]["annotations"][STATUS_VERSION_ANNOTATION] == "3"
    assert obj["spec"] == desired["spec"]
    assert obj["status"] is vs.status
    assert "annotations" not in desired["metadata"], "the desired pod is not changed"


def test_without_a_desired_pod_the_status_names_the_pod() -> None:
    vs, _ = versioned(1)
    obj = pod_object(vs, None, "rv")
    assert (obj["metadata"]["name"], obj["metadata"]["uid"]) == ("web", "u1")
    assert obj["spec"] == {"nodeName": "n1", "containers": []}
    assert obj["metadata"]["creationTimestamp"] == vs.status["startTime"]


def test_a_list_then_changes_of_one_pod() -> None:
    view = Selection(PodFilter())
    v1, desired = versioned(1)
    v2, _ = versioned(2)
    assert view.listed("u1", v1, desired, "t0").type == ChangeType.LISTED
    change = view.changed("u1", v2, desired, "t1")
    assert (change.type, change.token, change.status) == (ChangeType.MODIFIED, "t1", v2)
    deleted = view.changed("u1", None, None, "t2")
    assert (deleted.type, deleted.status) == (ChangeType.DELETED, v2), "DELETED carries the last version"
    assert view.changed("u1", None, None, "t3") is None, "a tombstone of a pod not shown is no change"
    assert view.changed("u2", versioned(1, uid="u2")[0], None, "t4").type == ChangeType.ADDED


def test_a_pod_leaving_the_selector_is_deleted_from_the_view() -> None:
    view = Selection(PodFilter.parse(labels="app=web"))
    v1, web = versioned(1, {"app": "web"})
    v2, db = versioned(2, {"app": "db"})
    assert view.listed("u1", v1, web, "t0") is not None
    assert view.changed("u1", v2, db, "t1").type == ChangeType.DELETED
    assert view.changed("u1", versioned(3, {"app": "db"})[0], db, "t2") is None
    assert view.changed("u1", versioned(4, {"app": "web"})[0], web, "t3").type == ChangeType.ADDED
    assert view.listed("u9", versioned(1, uid="u9")[0], None, "t4") is None, "no labels: no match"


def test_a_resumed_view_tells_new_pods_from_changed_ones_by_version() -> None:
    view = Selection(PodFilter(), resumed=True)
    assert view.changed("u1", versioned(1)[0], None, "t").type == ChangeType.ADDED
    assert view.changed("u2", versioned(5, uid="u2")[0], None, "t").type == ChangeType.MODIFIED
    deleted = view.changed("u3", None, None, "t")
    assert deleted.type == ChangeType.DELETED and deleted.status is None and deleted.pod() is None
