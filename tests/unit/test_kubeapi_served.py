"""What serve keeps of a pod version and the answers made of it (read/kubeapi/served.py), and
what it reads of the topics' values (read/kubeapi/records.py)."""

from __future__ import annotations

from functools import partial

import orjson
import pytest

from podledger.read.client.pods import pod_object
from podledger.read.client.select import PodFilter
from podledger.read.kubeapi.records import desired_json, status_fields
from podledger.read.kubeapi.served import (
    chunks,
    event_json,
    metadata,
    metadata_json,
    pod_doc,
    pod_json,
    pod_list_chunks,
    selected,
    table_chunks,
    table_row_json,
    watch_object,
)
from podledger.read.kubeapi.table import Clock
from podledger.schemas import DecodeError, encode, models
from tests import pods

make_pod = partial(pods.pod, ["main"], node="n1", image="app:1")
GV = "meta.k8s.io/v1"
NOW = 1_800_000_000.0


def version(name: str = "web-1", n: int = 2, app: str = "web") -> tuple[models.VersionedPodStatus, dict]:
    desired = make_pod(name=name, uid=f"uid-{name}", metadata={"labels": {"app": app}, "managedFields": [{}]})
    return pods.versioned(desired, "n1", n, pods.running_status()), desired


def test_the_json_is_the_pod_object_with_its_resource_version_first() -> None:
    vs, desired = version()
    doc = pod_doc(vs, desired, "pl1.AAEC")
    assert orjson.loads(doc.json) == pod_object(vs, desired, "pl1.AAEC")
    assert doc.json.startswith(b'{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"pl1.AAEC",')
    assert (doc.uid, doc.namespace, doc.name, doc.rv) == ("uid-web-1", "default", "web-1", "pl1.AAEC")
    assert metadata(doc) == orjson.loads(doc.json)["metadata"]


@pytest.mark.parametrize("rv", ["pl1.Z", "pl1.a-much-longer-resource-version_", ""])
def test_the_pod_at_another_resource_version_differs_in_that_alone(rv: str) -> None:
    vs, desired = version()
    doc = pod_doc(vs, desired, "pl1.AAEC")
    moved = orjson.loads(pod_json(doc, rv))
    assert moved == pod_object(vs, desired, rv)
    assert orjson.loads(metadata_json(doc, rv)) == moved["metadata"]
    assert pod_json(doc, "pl1.AAEC") is doc.json and pod_json(doc) is doc.json


def test_a_list_is_written_in_chunks_of_the_ready_json() -> None:
    docs = [pod_doc(*version(f"web-{i}"), f"rv{i}") for i in range(50)]
    written = list(pod_list_chunks(docs, "rv-list", per_chunk=7))
    assert len(written) == 2 + 8, "the opening, 8 chunks of at most 7 pods, the close"
    listed = orjson.loads(b"".join(written))
    assert (listed["kind"], listed["metadata"]) == ("PodList", {"resourceVersion": "rv-list"})
    assert [p["metadata"]["name"] for p in listed["items"]] == [f"web-{i}" for i in range(50)]
    assert listed["items"][3] == orjson.loads(docs[3].json)
    assert orjson.loads(b"".join(pod_list_chunks([], "rv")))["items"] == []


def test_watch_events_waiting_together_are_joined_up_to_a_size() -> None:
    lines = [b"x" * 100] * 50
    joined = list(chunks(lines, size=1000))
    assert b"".join(joined) == b"".join(lines) and [len(c) for c in joined] == [1000] * 5
    assert list(chunks([])) == []


@pytest.mark.parametrize("include", ["Metadata", "Object", "None"])
def test_a_table_list_carries_the_object_asked_for(include: str) -> None:
    docs = [pod_doc(*version(f"web-{i}"), f"rv{i}") for i in range(5)]
    clock = Clock(NOW)
    table = orjson.loads(b"".join(table_chunks(docs, "rv-list", GV, include, clock, per_chunk=2)))
    assert (table["kind"], table["apiVersion"], table["metadata"]) == (
        "Table",
        GV,
        {"resourceVersion": "rv-list"},
    )
    assert [r["cells"][:4] for r in table["rows"]] == [[f"web-{i}", "1/1", "Running", "0"] for i in range(5)]
    assert table["rows"] == [orjson.loads(table_row_json(d, None, include, GV, clock)) for d in docs], (
        "a list's rows are a watch event's rows"
    )
    first = table["rows"][0]["object"]
    if include == "None":
        assert first is None
    elif include == "Object":
        assert first == orjson.loads(docs[0].json)
    else:
        assert first == {"kind": "PartialObjectMetadata", "apiVersion": GV, "metadata": metadata(docs[0])}


def test_a_watch_event_as_an_object_or_a_table() -> None:
    doc = pod_doc(*version(), "rv-1")
    line = event_json("DELETED", watch_object(doc, "rv-9", None, "Metadata", Clock(NOW), headers=True))
    assert line.endswith(b"\n")
    event = orjson.loads(line)
    assert event["type"] == "DELETED" and event["object"]["metadata"]["resourceVersion"] == "rv-9"
    first, later = (
        orjson.loads(watch_object(doc, "rv-9", GV, "Metadata", Clock(NOW), headers=h)) for h in (True, False)
    )
    assert first["metadata"]["resourceVersion"] == "rv-9" and len(first["columnDefinitions"]) == 9
    assert later["columnDefinitions"] == [] and later["rows"] == first["rows"]
    assert first["rows"][0]["object"]["metadata"]["resourceVersion"] == "rv-9"


def test_selectors_match_what_the_doc_keeps() -> None:
    docs = [pod_doc(*version("web-1"), "a"), pod_doc(*version("db-1", app="db"), "b")]
    assert [d.name for d in selected(docs, PodFilter.parse(labels="app=db"))] == ["db-1"]
    assert [d.name for d in selected(docs, PodFilter.parse(fields="metadata.name=web-1"))] == ["web-1"]
    assert selected(docs, PodFilter()) == docs


def test_records_read_the_fields_a_pod_is_made_of() -> None:
    vs, desired = version()
    uid, fields = status_fields(encode(vs))
    assert uid == vs.uid
    assert (fields.namespace, fields.name, fields.node, fields.version, fields.status) == (
        vs.namespace, vs.name, vs.node, vs.version, vs.status,
    )  # fmt: skip
    assert orjson.loads(pod_doc(fields, desired, "rv").json) == pod_object(vs, desired, "rv")
    uid, kept = desired_json(encode(models.PodUpdate("ADD", "api", "n1", desired, 0)))
    assert uid == vs.uid and kept is not None
    assert orjson.loads(kept) == {
        "metadata": {k: v for k, v in desired["metadata"].items() if k != "managedFields"},
        "spec": desired["spec"],
    }
    assert desired_json(encode(models.PodUpdate("REMOVE", "api", "n1", desired, 0))) == (vs.uid, None)


@pytest.mark.parametrize(
    "value",
    [b"not json", b"[1]", b'{"uid": "u"}', b'{"uid":"u","namespace":"n","name":"p","node":"n1","version":"2",'
     b'"status":{}}', b'{"uid":"u","namespace":"n","name":"p","node":"n1","version":2,"status":[]}'],
)  # fmt: skip
def test_a_status_value_without_the_fields_does_not_decode(value: bytes) -> None:
    with pytest.raises(DecodeError):
        status_fields(value)


@pytest.mark.parametrize("value", [b"{}", b'{"op":"ADD","pod":{"metadata":{}}}', b'{"op":"ADD","pod":[]}'])
def test_an_update_without_a_pod_uid_does_not_decode(value: bytes) -> None:
    with pytest.raises(DecodeError):
        desired_json(value)
