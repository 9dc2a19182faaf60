"""Every model round-trips and validates against its v1 JSON Schema."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from podledger.schemas import DecodeError, codec, decode, encode, models, schema
from tests import pods

POD = pods.pod(("c",), name="web", uid="3c1f2f9e-1111-4a2b-9c3d-000000000001", image="app:1")
UID = POD["metadata"]["uid"]
CAUSE = models.Cause("pod-updates:ADD", "pod-updates", 2, 41, 1_700_000_000_000)

EXAMPLES: dict[str, Any] = {
    "pod-updates": models.PodUpdate("ADD", "api", "node-a", POD, 1_700_000_000_000),
    "pleg": models.PlegEvent(
        UID,
        "node-a",
        "ContainerStarted",
        "c-1",
        {
            "containers": [
                {
                    "id": "c-1",
                    "name": "c",
                    "state": "running",
                    "image": "app:1",
                    "exit_code": None,
                    "reason": None,
                    "message": None,
                    "created_at": "2026-01-01T00:00:00Z",
                    "started_at": "2026-01-01T00:00:01Z",
                    "finished_at": None,
                    "restart_count": 0,
                }
            ],
            "ips": ["127.0.0.1"],
        },
        1_700_000_000_001,
    ),
    "probe-results": models.ProbeResult(UID, "node-a", "c", "process://c-1", "readiness", "Success", 5),
    "pod-lifecycle": models.PodLifecycle(
        UID, "node-a", "sync_result", 6, [{"container": "c", "reason": "CrashLoopBackOff", "message": "m"}]
    ),
    "journal": models.JournalEntry("pod-updates:ADD", "pod-updates", 2, 41, 7, {"op": "ADD"}),
    "pod-status": models.VersionedPodStatus(
        UID, "default", "web", "node-a", 1, {"phase": "Pending"}, True, False, False, None, False, CAUSE, 8
    ),
    "pod-status-history": models.VersionedPodStatus(
        UID, "default", "web", "node-a", 2, {"phase": "Running"}, True, False, True, "m-1", True, CAUSE, 9
    ),
    "pod-deletions": models.PodDeletion(UID, "default", "web", "node-a", 7, 10),
    "dead-letter": models.DeadLetter(
        "schema", "pod-updates: missing field 'op'", "pod-updates", 0, 3, None, "e30=", 11
    ),
    "pod-status-watermarks": models.Watermark(2, 1_700_000_000_500, {"pleg": 12, "pod-updates": 4}, None),
}


def test_every_topic_has_a_schema_file_and_an_example() -> None:
    from podledger.streams.topics import TOPICS

    assert {t.name for t in TOPICS} == set(codec.MODELS) == set(EXAMPLES)
    files = {p.name for p in Path(codec.__file__).parent.glob("*.v1.json")}
    assert files == {f"{name}.v1.json" for name in codec.MODELS if name != "pod-status-history"}


@pytest.mark.parametrize("topic", sorted(EXAMPLES))
def test_model_round_trips_and_validates(topic: str) -> None:
    model = EXAMPLES[topic]
    data = encode(model)
    # An independent validator (jsonschema, not the codec's) accepts what we write.
    jsonschema.Draft7Validator.check_schema(schema(topic))
    jsonschema.validate(orjson.loads(data), schema(topic))
    back = decode(topic, data)
    assert back == model
    assert encode(back) == data


@pytest.mark.parametrize("topic", sorted(EXAMPLES))
def test_schema_and_model_name_the_same_fields(topic: str) -> None:
    s = schema(topic)
    fields = {f.name for f in dataclasses.fields(codec.MODELS[topic])}
    assert set(s["properties"]) == fields
    required_in_model = {
        f.name
        for f in dataclasses.fields(codec.MODELS[topic])
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert set(s["required"]) >= required_in_model


def _value(topic: str) -> dict[str, Any]:
    return orjson.loads(encode(EXAMPLES[topic]))


def test_missing_field_names_the_field() -> None:
    value = _value("pod-status")
    del value["version"]
    with pytest.raises(DecodeError) as err:
        decode("pod-status", orjson.dumps(value))
    assert err.value.reason == "schema" and err.value.field == "version"
    assert "'version'" in str(err.value)


def test_missing_nested_field_names_its_path() -> None:
    value = _value("pod-updates")
    del value["pod"]["metadata"]["uid"]
    with pytest.raises(DecodeError) as err:
        decode("pod-updates", orjson.dumps(value))
    assert err.value.field == "pod.metadata.uid"
    assert "pod.metadata.uid" in str(err.value)


def test_wrong_type_names_the_field() -> None:
    value = _value("probe-results")
    value["ts_ms"] = "yesterday"
    with pytest.raises(DecodeError) as err:
        decode("probe-results", orjson.dumps(value))
    assert err.value.reason == "schema" and err.value.field == "ts_ms"
    assert "'ts_ms' must be integer" in str(err.value)


@pytest.mark.parametrize(
    ("topic", "field"), [("pod-updates", "op"), ("pleg", "type"), ("pod-lifecycle", "kind")]
)
def test_unknown_op_names_the_field(topic: str, field: str) -> None:
    value = _value(topic)
    value[field] = "EXPLODE"
    with pytest.raises(DecodeError) as err:
        decode(topic, orjson.dumps(value))
    assert err.value.reason == "unknown_op" and err.value.field == field
    assert f"'{field}'" in str(err.value) and "EXPLODE" in str(err.value)


def test_malformed_bytes_and_oversize_values_are_refused() -> None:
    with pytest.raises(DecodeError) as err:
        decode("pleg", b"\xff{not json")
    assert err.value.reason == "malformed"
    big = encode(EXAMPLES["pod-updates"])
    with pytest.raises(DecodeError) as err:
        decode("pod-updates", big, max_bytes=len(big) - 1)
    assert err.value.reason == "oversize"
    assert decode("pod-updates", big, max_bytes=len(big)) == EXAMPLES["pod-updates"]


def test_unknown_extra_fields_are_ignored_for_forward_compatibility() -> None:
    value = _value("pod-deletions")
    value["added_in_v1_1"] = True
    assert decode("pod-deletions", orjson.dumps(value)) == EXAMPLES["pod-deletions"]


def test_schema_files_are_draft7_with_a_versioned_id() -> None:
    for path in Path(codec.__file__).parent.glob("*.v1.json"):
        doc = json.loads(path.read_text())
        assert doc["$schema"] == "http://json-schema.org/draft-07/schema#"
        assert doc["$id"] == f"podledger/{path.name.removesuffix('.v1.json')}/v1"
