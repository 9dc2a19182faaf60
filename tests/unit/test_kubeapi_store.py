"""The pods serve answers from and the events its watches get (read/kubeapi/store.py)."""

from __future__ import annotations

from functools import partial

from podledger.read.client.select import PodFilter
from podledger.read.kubeapi.served import metadata, pod_doc
from podledger.read.kubeapi.store import ADDED, DELETED, MODIFIED, PodStore, event_for
from tests import pods

make_pod = partial(pods.pod, ["main"], node="n1", image="app:1")


def put(store: PodStore, offset: int, uid: str, version: int | None, app: str = "web", partition: int = 0):
    desired = make_pod(name=f"pod-{uid}", uid=uid, metadata={"labels": {"app": app}})
    rv = f"rv{offset}"
    doc = (
        None
        if version is None
        else pod_doc(pods.versioned(desired, "n1", version, pods.running_status()), desired, rv)
    )
    return store.apply(partition, offset, uid, doc, rv, ts_ms=offset * 1000)


def test_apply_adds_modifies_and_deletes() -> None:
    store = PodStore(2)
    assert put(store, 0, "a", 1).type == ADDED
    event = put(store, 1, "a", 2)
    assert event.type == MODIFIED and event.old.rv == "rv0" and event.rv == "rv1"
    assert metadata(store.get("default", "pod-a"))["resourceVersion"] == "rv1"
    deleted = put(store, 2, "a", None)
    assert deleted.type == DELETED and deleted.rv == "rv2"
    assert metadata(deleted.doc)["annotations"]["podledger.io/status-version"] == "2", "its last version"
    assert store.get("default", "pod-a") is None
    assert put(store, 3, "zz", None) is None, "a tombstone of an unknown pod changes nothing"


def test_a_resume_gets_each_changed_pod_once_at_its_newest_version() -> None:
    store = PodStore(2)
    put(store, 0, "old", 1)
    put(store, 1, "changed", 1)
    put(store, 2, "removed", 1)
    put(store, 0, "other-partition", 1, partition=1)
    # the client stands here: partition 0 at offset 3, partition 1 at offset 1
    put(store, 3, "changed", 2)
    put(store, 4, "changed", 3)
    put(store, 5, "new", 1)
    put(store, 6, "removed", None)
    put(store, 7, "born-and-gone", 1)
    put(store, 8, "born-and-gone", None)
    events = [(e.type, e.doc.uid, e.offset) for e in store.since((3, 1))]
    assert events == [(MODIFIED, "changed", 4), (ADDED, "new", 5), (DELETED, "removed", 6)]
    assert store.since((9, 1)) == []
    assert [e.doc.uid for e in store.since((0, 0))][-1] == "other-partition"


def test_forgetting_removed_pods_refuses_resumes_from_before_them() -> None:
    store = PodStore(1)
    put(store, 0, "a", 1)
    put(store, 1, "a", None)
    assert store.refused_below((0,)) == []
    store.forget_gone(before_ms=1500)
    assert store.refused_below((1,)) == [0]
    assert store.refused_below((2,)) == []


def test_a_watch_with_a_selector_sees_pods_enter_and_leave() -> None:
    store = PodStore(1)
    web = PodFilter.parse(labels="app=web")
    assert event_for(put(store, 0, "a", 1, app="db"), web) is None
    kind, _, _ = event_for(put(store, 1, "a", 2, app="web"), web)
    assert kind == ADDED
    assert event_for(put(store, 2, "a", 3, app="web"), web)[0] == MODIFIED
    kind, doc, rv = event_for(put(store, 3, "a", 4, app="db"), web)
    assert kind == DELETED and metadata(doc)["labels"] == {"app": "web"}, "the version it was seen at"
    assert rv == "rv3"
    put(store, 4, "a", 5, app="web")
    assert event_for(put(store, 5, "a", None), web)[0] == DELETED
    assert event_for(put(store, 6, "b", 1, app="db"), web) is None
    assert event_for(put(store, 7, "b", None), web) is None
