"""Encode and decode topic values: orjson on the wire, JSON Schema at the door.

`decode` checks a value against its topic's v1 schema before building the model, so every
consumer rejects the same things with the same messages. Errors name the offending field. A test
compiled from the schema (schemas/compiled.py) lets the common value through cheaply; whatever it
is unsure of goes to the full fastjsonschema validator, which decides and words every rejection.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import fastjsonschema
import orjson

from podledger.schemas import compiled, models
from podledger.types import Topic

SCHEMA_VERSION = 1

# The logical (unprefixed) topic name decides the schema and the model.
MODELS: dict[str, type[Any]] = {
    Topic.POD_UPDATES: models.PodUpdate,
    Topic.PLEG: models.PlegEvent,
    Topic.PROBE_RESULTS: models.ProbeResult,
    Topic.POD_LIFECYCLE: models.PodLifecycle,
    Topic.JOURNAL: models.JournalEntry,
    Topic.POD_STATUS: models.VersionedPodStatus,
    Topic.POD_STATUS_HISTORY: models.VersionedPodStatus,
    Topic.POD_DELETIONS: models.PodDeletion,
    Topic.DEAD_LETTER: models.DeadLetter,
    Topic.POD_STATUS_WATERMARKS: models.Watermark,
}
# pod-status-history carries the same value as pod-status, one message per version.
_SCHEMA_FILE = {name: name for name in MODELS} | {Topic.POD_STATUS_HISTORY: Topic.POD_STATUS}

# Fields holding a nested model rather than plain JSON.
_NESTED: dict[type[Any], dict[str, type[Any]]] = {models.VersionedPodStatus: {"cause": models.Cause}}

# Enum-valued fields whose violation is an unknown operation rather than a plain schema error.
_OP_FIELDS = frozenset({"op", "type", "kind", "probe"})

T = TypeVar("T")


class DecodeError(ValueError):
    """A value that cannot be read. `reason` is one of models.DEAD_LETTER_REASONS."""

    def __init__(self, reason: str, field: str | None, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field


def schema(topic: str) -> dict[str, Any]:
    """The JSON Schema (version 1) of a topic's values."""
    return _load_schema(_SCHEMA_FILE[_known(topic)])


@cache
def _load_schema(name: str) -> dict[str, Any]:
    text = resources.files("podledger.schemas").joinpath(f"{name}.v1.json").read_text()
    return dict(json.loads(text))


@cache
def _validator(topic: str) -> Any:
    return fastjsonschema.compile(schema(topic))


def _known(topic: str) -> str:
    if topic not in MODELS:
        raise KeyError(f"no schema for topic {topic!r}; known: {', '.join(MODELS)}")
    return topic


def encode(value: Any) -> bytes:
    """Serialize a model (a dataclass) or a plain dict to JSON bytes."""
    return orjson.dumps(value)


def to_dict(value: Any) -> dict[str, Any]:
    """A model as the plain dict that goes on the wire."""
    return dict(orjson.loads(orjson.dumps(value)))


def decode(topic: str, data: bytes | str | None, *, max_bytes: int | None = None) -> Any:
    """Parse, validate and build the model for one value of `topic`."""
    if data is None:
        raise DecodeError("malformed", None, f"{topic}: empty value (tombstone) where an event was expected")
    if max_bytes is not None and len(data) > max_bytes:
        raise DecodeError(
            "oversize", None, f"{topic}: value of {len(data)} bytes exceeds the limit of {max_bytes}"
        )
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError("malformed", None, f"{topic}: not JSON: {exc}") from None
    return from_dict(topic, obj)


def from_dict(topic: str, obj: Any) -> Any:
    """Validate an already-parsed value and build its model."""
    check, construct = _decoder(topic if topic in MODELS else _known(topic))
    if not check(obj):  # the fast test is unsure: the full validator decides, and words the error
        try:
            _validator(topic)(obj)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise _schema_error(topic, obj, exc) from None
    return construct(obj)


def build(topic: str, obj: dict[str, Any]) -> Any:
    """The model of a value already validated against its topic's schema (no second check)."""
    cls = MODELS[topic]
    return (_CONSTRUCTORS.get(cls) or _constructor(cls))(obj)


@cache
def _decoder(topic: str) -> tuple[compiled.Predicate, compiled.Constructor]:
    # The predicate reads each pattern with the regex the full validator compiled for it.
    patterns = getattr(_validator(topic), "__globals__", {}).get("REGEX_PATTERNS", {})
    check = compiled.predicate(schema(topic), patterns) or _unsure
    return check, _constructor(MODELS[topic])


def _unsure(obj: Any) -> bool:
    return False


_CONSTRUCTORS: dict[type[Any], compiled.Constructor] = {}


def _constructor(cls: type[Any]) -> compiled.Constructor:
    construct = _CONSTRUCTORS.get(cls)
    if construct is None:
        nested = {name: _constructor(model) for name, model in _NESTED.get(cls, {}).items()}
        construct = _CONSTRUCTORS[cls] = compiled.constructor(cls, nested, lambda obj: _build(cls, obj))
    return construct


def _build(cls: type[T], obj: dict[str, Any]) -> T:
    """The plain build: the model's fields present in `obj`, passed by keyword."""
    nested = _NESTED.get(cls)
    if nested is None:  # the ingress models: plain JSON fields, named once per model
        return cls(**{name: obj[name] for name in _field_names(cls) if name in obj})
    kwargs = {}
    for name in _field_names(cls):
        if name in obj:
            value = obj[name]
            kwargs[name] = _build(nested[name], value) if name in nested else value
    return cls(**kwargs)


_FIELD_NAMES: dict[type[Any], tuple[str, ...]] = {}


def _field_names(cls: type[Any]) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def _schema_error(topic: str, obj: Any, exc: fastjsonschema.JsonSchemaValueException) -> DecodeError:
    path = (exc.name or "data").removeprefix("data").lstrip(".") or None
    if exc.rule == "required" and isinstance(exc.value, dict):
        missing = [name for name in exc.rule_definition if name not in exc.value]
        field = ".".join(p for p in (path, missing[0] if missing else None) if p)
        return DecodeError("schema", field, f"{topic}: missing field {field!r}")
    shown = orjson.dumps(exc.value).decode()[:80]
    if exc.rule == "enum" and path in _OP_FIELDS:
        allowed = ", ".join(exc.rule_definition)
        return DecodeError(
            "unknown_op",
            path,
            f"{topic}: field {path!r} has unknown value {shown} (expected one of {allowed})",
        )
    if exc.rule == "type":
        want = exc.rule_definition
        want_text = " or ".join(want) if isinstance(want, list) else want
        return DecodeError(
            "schema", path, f"{topic}: field {path or '(value)'!r} must be {want_text}, got {shown}"
        )
    return DecodeError(
        "schema", path, f"{topic}: field {path or '(value)'!r} is invalid ({exc.rule}): {shown}"
    )
