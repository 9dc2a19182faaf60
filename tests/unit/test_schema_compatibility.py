"""Schema compatibility (schemas/compatibility.py, docs/guarantees.md "Schema evolution").

Two halves: every schema in `schemas/` must be FULL compatible with every released snapshot in
`schemas/released/` (so an incompatible change fails `make test`), and a vector table of changes
with the verdict for each. A vector that breaks a direction carries a witness value: one the
writer's schema takes and the reader's refuses, checked with `jsonschema` (not the validator the
module uses), so each verdict is shown to be a real break, not a structural guess.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from podledger.schemas import compatibility
from podledger.schemas.compatibility import Incompatibility, backward, forward, full, full_transitive

RELEASED = compatibility.released()
CURRENT = compatibility.current()
STATUS = RELEASED["0.1.0"]["pod-status.v1"]
DEAD_LETTER = RELEASED["0.1.0"]["dead-letter.v1"]


@pytest.mark.parametrize(
    ("release", "name"),
    [(release, name) for release in sorted(RELEASED) for name in sorted(RELEASED[release])],
)
def test_every_schema_is_full_compatible_with_every_release(release: str, name: str) -> None:
    assert name in CURRENT, f"{name} was released in {release} and is gone: readers of it break"
    findings = full(RELEASED[release][name], CURRENT[name])
    assert not findings, (
        f"schemas/{name}.json breaks what {release} released (a v2 goes to a new file):\n"
        + "\n".join(map(str, findings))
    )


def test_the_snapshots_are_the_files_the_package_ships() -> None:
    folder = Path(compatibility.__file__).parent / "released"
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(RELEASED)
    # The first release holds every topic value's schema: pod-status-history shares pod-status's.
    assert sorted(RELEASED["0.1.0"]) == [
        "dead-letter.v1",
        "journal.v1",
        "pleg.v1",
        "pod-deletions.v1",
        "pod-lifecycle.v1",
        "pod-status.v1",
        "pod-updates.v1",
        "probe-results.v1",
    ]
    for release, schemas in RELEASED.items():
        for name, schema in schemas.items():
            jsonschema.Draft7Validator.check_schema(schema)
            assert schema["$id"] == f"podledger/{name.replace('.v', '/v')}", (release, name)


def test_a_schema_that_disappears_breaks_its_readers() -> None:
    without = {name: schema for name, schema in CURRENT.items() if name != "pleg.v1"}
    [(release, name, finding)] = full_transitive(without, {"0.1.0": {"pleg.v1": CURRENT["pleg.v1"]}})
    assert (release, name, finding.problem) == ("0.1.0", "pleg.v1", "removed")


def test_every_release_is_checked_not_only_the_newest() -> None:
    v1 = {"x": obj({"a": {"type": "integer"}}, ["a"])}
    v2 = {"x": obj({"a": {"type": "integer"}, "b": {"type": "string"}}, ["a"])}  # adds optional b
    v3 = {"x": obj({"a": {"type": "integer"}}, ["a"])}  # drops b again
    assert full_transitive(v2, {"1": v1}) == []
    found = full_transitive(v3, {"1": v1, "2": v2})
    assert [(release, f.problem) for release, _, f in found] == [("2", "removed")]


def obj(
    properties: dict[str, Any], required: list[str] | tuple[str, ...] = (), **more: Any
) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), **more}


def changed(schema: dict[str, Any], *path: str, **values: Any) -> dict[str, Any]:
    """A copy of `schema` with the keywords `values` set (None deletes) at `path`."""
    out = copy.deepcopy(schema)
    node = out
    for key in path:
        node = node[key]
    for key, value in values.items():
        if value is None:
            node.pop(key, None)
        else:
            node[key] = value
    return out


def status_field(name: str, **values: Any) -> dict[str, Any]:
    return changed(STATUS, "properties", name, **values)


INT, STR = {"type": "integer"}, {"type": "string"}
TREE = {
    "$defs": {"node": obj({"name": STR, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}})},
    "$ref": "#/$defs/node",
}
STATUS_WITHOUT_MIRROR = changed(
    changed(STATUS, "properties", mirror_uid=None),
    required=[name for name in STATUS["required"] if name != "mirror_uid"],
)
VALID_STATUS = {
    "uid": "u",
    "namespace": "default",
    "name": "web",
    "node": "n",
    "version": 1,
    "status": {"phase": "Running"},
    "could_have_running_containers": True,
    "finished": False,
    "static": False,
    "mirror_uid": None,
    "deleting": False,
    "cause": {"type": "pleg:ContainerStarted", "topic": "pleg", "partition": 0, "offset": 3, "ts_ms": 9},
    "ts_ms": 9,
}
LETTER = {
    "reason": "schema",
    "detail": "d",
    "topic": "pleg",
    "partition": 0,
    "offset": 1,
    "key_b64": None,
    "value_b64": None,
    "ts_ms": 9,
}

# (id, old, new, expected {(direction, problem, pointer)}, witnesses). A witness is a value that
# breaks one direction. Every direction a vector breaks needs one, except for the verdicts that are
# not about validation: "removed" (an old consumer reads an absence as a statement) and the ones the
# check gives when it cannot compare ("pattern", "keyword": a changed regular expression may well
# take every old value, but that is not proven).
UNPROVEN = {"removed", "pattern", "keyword"}
VECTORS: list[tuple[str, Any, Any, set[tuple[str, str, str]], list[Any]]] = [
    ("identical", STATUS, STATUS, set(), []),
    (
        "an_optional_field_added",
        STATUS,
        changed(STATUS, "properties", rules={"type": ["integer", "null"], "minimum": 1}),
        set(),
        [],
    ),
    (
        "a_required_field_added",
        obj({"a": INT}, ["a"]),
        obj({"a": INT, "b": STR}, ["a", "b"]),
        {("backward", "required", "/properties/b")},
        [{"a": 1}],
    ),
    (
        "an_optional_field_removed",
        obj({"a": INT, "b": STR}, ["a"]),
        obj({"a": INT}, ["a"]),
        {("forward", "removed", "/properties/b")},
        [],
    ),
    (
        "a_required_field_removed",
        STATUS,
        STATUS_WITHOUT_MIRROR,
        {("forward", "required", "/properties/mirror_uid"), ("forward", "removed", "/properties/mirror_uid")},
        [{k: v for k, v in VALID_STATUS.items() if k != "mirror_uid"}],
    ),
    (
        "a_field_renamed",
        obj({"node": STR}, ["node"]),
        obj({"node_name": STR}, ["node_name"]),
        {
            ("backward", "required", "/properties/node_name"),
            ("forward", "required", "/properties/node"),
            ("forward", "removed", "/properties/node"),
        },
        [{"node": "n"}, {"node_name": "n"}],
    ),
    (
        "a_field_retyped",
        STATUS,
        status_field("version", type="string", minimum=None),
        {("backward", "type", "/properties/version/type"), ("forward", "type", "/properties/version/type")},
        [VALID_STATUS, {**VALID_STATUS, "version": "1"}],
    ),
    (
        "integer_widened_to_number",
        obj({"a": INT}),
        obj({"a": {"type": "number"}}),
        {("forward", "type", "/properties/a/type")},
        [{"a": 1.5}],
    ),
    (
        "null_allowed",
        obj({"a": INT}),
        obj({"a": {"type": ["integer", "null"]}}),
        {("forward", "type", "/properties/a/type")},
        [{"a": None}],
    ),
    (
        "null_no_longer_allowed",
        obj({"a": {"type": ["string", "null"]}}),
        obj({"a": STR}),
        {("backward", "type", "/properties/a/type")},
        [{"a": None}],
    ),
    (
        "an_enum_widened",  # a v1 enum is closed: old consumers refuse the new value
        DEAD_LETTER,
        changed(
            DEAD_LETTER, "properties", "reason", enum=[*DEAD_LETTER["properties"]["reason"]["enum"], "late"]
        ),
        {("forward", "enum", "/properties/reason")},
        [{**LETTER, "reason": "late"}],
    ),
    (
        "an_enum_narrowed",
        DEAD_LETTER,
        changed(DEAD_LETTER, "properties", "reason", enum=["malformed", "schema"]),
        {("backward", "enum", "/properties/reason")},
        [{**LETTER, "reason": "forged"}],
    ),
    (
        "a_const_changed",
        obj({"kind": {"const": "a"}}),
        obj({"kind": {"const": "b"}}),
        {("backward", "enum", "/properties/kind"), ("forward", "enum", "/properties/kind")},
        [{"kind": "a"}, {"kind": "b"}],
    ),
    (
        "a_string_narrowed_to_an_enum",
        obj({"phase": STR}),
        obj({"phase": {"enum": ["Running", "Failed"]}}),
        {("backward", "enum", "/properties/phase")},
        [{"phase": "Pending"}],
    ),
    (
        "a_pattern_added",
        obj({"uid": STR}),
        obj({"uid": {"type": "string", "pattern": "^[a-z]+$"}}),
        {("backward", "pattern", "/properties/uid/pattern")},
        [{"uid": "A/B"}],
    ),
    (
        "a_pattern_changed",  # even a wider one: regular languages are not compared
        obj({"uid": {"type": "string", "pattern": "^[a-z]+$"}}),
        obj({"uid": {"type": "string", "pattern": "^[a-z0-9]+$"}}),
        {
            ("backward", "pattern", "/properties/uid/pattern"),
            ("forward", "pattern", "/properties/uid/pattern"),
        },
        [{"uid": "a1"}],
    ),
    (
        "a_minimum_raised",
        STATUS,
        status_field("version", minimum=2),
        {("backward", "range", "/properties/version/minimum")},
        [VALID_STATUS],
    ),
    (
        "a_minimum_lowered",
        STATUS,
        status_field("version", minimum=0),
        {("forward", "range", "/properties/version/minimum")},
        [{**VALID_STATUS, "version": 0}],
    ),
    (
        "a_minimum_made_exclusive",
        obj({"a": {"type": "integer", "minimum": 1}}),
        obj({"a": {"type": "integer", "exclusiveMinimum": 1}}),
        {("backward", "range", "/properties/a/exclusiveMinimum")},
        [{"a": 1}],
    ),
    (
        "an_exclusive_minimum_made_an_inclusive_one_above_it",
        obj({"a": {"type": "number", "exclusiveMinimum": 0}}),
        obj({"a": {"type": "number", "minimum": 1}}),
        {("backward", "range", "/properties/a/minimum")},
        [{"a": 0.5}],
    ),
    (
        "a_maximum_and_a_length_added",
        obj({"a": INT, "s": STR}),
        obj({"a": {"type": "integer", "maximum": 10}, "s": {"type": "string", "maxLength": 3}}),
        {("backward", "range", "/properties/a/maximum"), ("backward", "length", "/properties/s/maxLength")},
        [{"a": 11}, {"s": "long"}],
    ),
    (
        "a_multiple_of_added",
        obj({"a": INT}),
        obj({"a": {"type": "integer", "multipleOf": 2}}),
        {("backward", "range", "/properties/a/multipleOf")},
        [{"a": 3}],
    ),
    (
        "a_field_added_to_a_closed_object",
        STATUS,
        changed(STATUS, "properties", "cause", "properties", worker={"type": "string"}),
        {("forward", "closed", "/properties/cause/properties/worker")},
        [{**VALID_STATUS, "cause": {**VALID_STATUS["cause"], "worker": "a"}}],
    ),
    (
        "a_closed_object_opened",
        STATUS,
        changed(STATUS, "properties", "cause", additionalProperties=None),
        set(),
        [],
    ),
    (
        "a_free_form_object_closed",
        STATUS,
        status_field("status", properties={"phase": STR}, additionalProperties=False),
        {
            ("backward", "closed", "/properties/status/additionalProperties"),
            ("backward", "type", "/properties/status/properties/phase/type"),
        },
        [
            {**VALID_STATUS, "status": {"phase": "Running", "podIP": "10.0.0.1"}},
            {**VALID_STATUS, "status": {"phase": 1}},
        ],
    ),
    (
        "a_field_of_a_free_form_object_typed",  # old values may hold anything there
        STATUS,
        status_field("status", properties={"phase": {"enum": ["Running"]}}),
        {
            ("backward", "type", "/properties/status/properties/phase/type"),
            ("backward", "enum", "/properties/status/properties/phase"),
        },
        [{**VALID_STATUS, "status": {"phase": "Pending"}}],
    ),
    (
        "array_items_narrowed",
        obj({"ips": {"type": "array", "items": STR}}),
        obj({"ips": {"type": "array", "items": {"type": "string", "minLength": 7}, "uniqueItems": True}}),
        {
            ("backward", "length", "/properties/ips/items/minLength"),
            ("backward", "length", "/properties/ips/uniqueItems"),
        },
        [{"ips": ["::1"]}, {"ips": ["10.0.0.1", "10.0.0.1"]}],
    ),
    (
        "a_map_of_typed_values_narrowed",
        obj({"backoff": {"type": "object", "additionalProperties": {"type": "number"}}}),
        obj({"backoff": {"type": "object", "additionalProperties": {"type": "integer"}}}),
        {("backward", "type", "/properties/backoff/additionalProperties/type")},
        [{"backoff": {"app": 0.5}}],
    ),
    (
        "inlined_into_a_ref",
        obj({"a": {"type": "string", "maxLength": 5}}),
        {"$defs": {"short": {"type": "string", "maxLength": 5}}, **obj({"a": {"$ref": "#/$defs/short"}})},
        set(),
        [],
    ),
    (
        "narrowed_through_a_ref",
        {"$defs": {"short": {"type": "string", "maxLength": 5}}, **obj({"a": {"$ref": "#/$defs/short"}})},
        {"$defs": {"short": {"type": "string", "maxLength": 4}}, **obj({"a": {"$ref": "#/$defs/short"}})},
        {("backward", "length", "/properties/a/maxLength")},
        [{"a": "fives"}],
    ),
    ("a_recursive_schema", TREE, copy.deepcopy(TREE), set(), []),
    (
        "a_recursive_schema_narrowed_deep_down",
        TREE,
        changed(TREE, "$defs", "node", "properties", name={"type": "string", "minLength": 1}),
        {("backward", "length", "/properties/name/minLength")},
        [{"children": [{"name": ""}]}],
    ),
    (
        "a_type_widened_into_an_any_of",
        obj({"a": STR}),
        obj({"a": {"anyOf": [STR, INT]}}),
        {("forward", "type", "/properties/a/anyOf/1/type")},
        [{"a": 1}],
    ),
    (
        "an_any_of_split_into_one_of_with_overlapping_branches",  # "x" matches both: oneOf refuses it
        obj({"a": STR}),
        obj({"a": {"oneOf": [STR, {"type": "string", "maxLength": 3}]}}),
        {("backward", "union", "/properties/a/oneOf/1")},
        [{"a": "x"}],
    ),
    (
        "a_one_of_with_disjoint_branches",
        obj({"a": {"type": ["string", "integer"]}}),
        obj({"a": {"oneOf": [STR, INT]}}),
        set(),
        [],
    ),
    (
        "a_value_excluded_with_not",
        obj({"a": STR}),
        obj({"a": {"type": "string", "not": {"const": ""}}}),
        {("backward", "keyword", "/properties/a/not")},
        [{"a": ""}],
    ),
    (
        "a_writer_all_of_combined",
        obj({"a": {"allOf": [STR, {"maxLength": 4}]}}),
        obj({"a": {"type": "string", "maxLength": 4}}),
        set(),
        [],
    ),
    (
        "an_unknown_keyword_changed",
        obj({"a": STR}, propertyNames={"enum": ["a", "b"]}),
        obj({"a": STR}, propertyNames={"enum": ["a", "c"]}),
        {("backward", "keyword", "/propertyNames"), ("forward", "keyword", "/propertyNames")},
        [{"b": 1}, {"c": 1}],
    ),
    (
        "a_field_that_may_never_be_written",
        obj({"a": INT}),
        obj({"a": False}),
        {("backward", "nothing", "/properties/a")},
        [{"a": 1}],
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "expected", "witnesses"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_vectors(old: Any, new: Any, expected: set[tuple[str, str, str]], witnesses: list[Any]) -> None:
    findings = full(old, new)
    assert {(f.direction, f.problem, f.pointer) for f in findings} == expected, "\n".join(map(str, findings))
    assert findings == backward(old, new) + forward(old, new)
    # No value breaks a direction the check calls compatible; every proven break is shown by one.
    broken = {f.direction for f in findings}
    proven = {f.direction for f in findings if f.problem not in UNPROVEN}
    shown: set[str] = set()
    for value in witnesses:
        old_ok, new_ok = (jsonschema.Draft7Validator(s).is_valid(value) for s in (old, new))
        shown |= {"backward"} if old_ok and not new_ok else {"forward"} if new_ok and not old_ok else set()
        assert old_ok != new_ok, f"{json.dumps(value)} does not tell the schemas apart"
    assert proven <= shown <= broken


def test_a_finding_reads_as_direction_pointer_and_reason() -> None:
    [finding] = backward(obj({"a": INT}), obj({"a": INT, "b": STR}, ["b"]))
    assert finding == Incompatibility("backward", "/properties/b", "required", finding.detail)
    assert str(finding) == "backward /properties/b: 'b' is required now: older values may lack it"
    [finding] = forward(DEAD_LETTER, changed(DEAD_LETTER, "properties", "reason", enum=["malformed", "late"]))
    assert str(finding) == "forward /properties/reason: the old schema refuses 'late'"


def test_only_local_refs_are_followed() -> None:
    with pytest.raises(ValueError, match="only local"):
        full(obj({"a": INT}), obj({"a": {"$ref": "other.json#/a"}}))
