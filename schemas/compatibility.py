"""Schema compatibility: does a new JSON Schema of a topic keep the promises the old one made?

The model (docs/guarantees.md, "Schema evolution"). A *writer* produces values valid under its
schema; inside an object that declares `properties` it writes only the declared names (plus keys
its `patternProperties` or an `additionalProperties` schema describe), while an object declaring
no properties (`status`, `event`) is free-form and may hold anything. A *reader* validates with
its schema and ignores names it does not declare, unless the object is closed
(`additionalProperties: false`). A reader accepts a writer when every value the writer can
produce validates under the reader.

- BACKWARD: reader = new, writer = old: consumers on the new schema read what is on the topics.
- FORWARD: reader = old, writer = new: consumers still on the old schema read new values. A
  property the old schema declares may not disappear either, optional or not: old consumers read
  its absence as a statement ("not clipped", "no rules version named").
- FULL: both. FULL_TRANSITIVE: FULL against every released snapshot, not only the newest.

The check is structural and errs towards "incompatible": what it cannot prove (a changed
`pattern`, any other keyword that differs) is reported. Findings name a JSON pointer into the
schema, with every `$ref` inlined.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import fastjsonschema

Schema = Any  # a JSON Schema: a dict, or True / False

ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "examples", "default", "readOnly", "writeOnly", "deprecated"}
    | {"$schema", "$id", "$defs", "definitions"}
)
# Compared one by one below. Any other keyword of the reader must appear unchanged in the writer
# (the same constraint, so the same values pass), or it is reported.
_HANDLED = frozenset(
    {"$ref", "type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "properties", "required"}
    | {"additionalProperties", "patternProperties", "items", "additionalItems", "uniqueItems"}
    | {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
_BOUNDS = (  # (the type they bound, problem, lower, upper)
    ("number", "range", "minimum", "maximum"),
    ("integer", "range", "minimum", "maximum"),
    ("string", "length", "minLength", "maxLength"),
    ("array", "length", "minItems", "maxItems"),
    ("object", "length", "minProperties", "maxProperties"),
)


@dataclass(frozen=True, slots=True)
class Incompatibility:
    direction: str  # "backward" (new readers, old values) or "forward" (old readers, new values)
    pointer: str  # where, in the schema with $refs inlined ("" is the root)
    problem: str  # required, removed, closed, type, enum, range, length, pattern, union, keyword, nothing
    detail: str

    def __str__(self) -> str:
        return f"{self.direction} {self.pointer or '/'}: {self.detail}"


def backward(old: Schema, new: Schema) -> list[Incompatibility]:
    """What stops a consumer on `new` from reading values written under `old`."""
    return _Check(reader=new, writer=old, direction="backward").run()


def forward(old: Schema, new: Schema) -> list[Incompatibility]:
    """What stops a consumer still on `old` from reading values written under `new`."""
    return _Check(reader=old, writer=new, direction="forward").run()


def full(old: Schema, new: Schema) -> list[Incompatibility]:
    return backward(old, new) + forward(old, new)


def full_transitive(
    current: Mapping[str, Schema], releases: Mapping[str, Mapping[str, Schema]]
) -> list[tuple[str, str, Incompatibility]]:
    """(release, schema name, finding) for every released schema the current one breaks. A released
    name (`pod-status.v1`) with no current schema of that name breaks every reader of it."""
    out: list[tuple[str, str, Incompatibility]] = []
    for release, schemas in sorted(releases.items()):
        for name, old in sorted(schemas.items()):
            if name not in current:
                out.append((release, name, Incompatibility("forward", "", "removed", f"{name} is gone")))
            else:
                out += [(release, name, finding) for finding in full(old, current[name])]
    return out


def current() -> dict[str, Schema]:
    """This package's schemas by name (`pod-status.v1`): the package data codec.py reads too."""
    return _read_folder(resources.files("podledger.schemas"))


def released() -> dict[str, dict[str, Schema]]:
    """The released snapshots, schemas/released/<release>/<name>.json, by release and name."""
    folder = resources.files("podledger.schemas").joinpath("released")
    return {entry.name: _read_folder(entry) for entry in folder.iterdir() if entry.is_dir()}


def _read_folder(folder: Any) -> dict[str, Schema]:
    return {
        entry.name.removesuffix(".json"): json.loads(entry.read_text())
        for entry in folder.iterdir()
        if re.fullmatch(r".+\.v\d+\.json", entry.name)
    }


def types_of(schema: Mapping[str, Any]) -> frozenset[str]:
    """The JSON types a schema admits ("number" includes "integer"), from `type` or its values."""
    if "type" in schema:
        named = set(_listed(schema["type"]))
        return frozenset(named | ({"integer"} if "number" in named else set()))
    values = _values(schema)
    return ALL_TYPES if values is None else frozenset(map(_type_of, values))


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    return {float: "number", str: "string", list: "array", dict: "object"}[type(value)]


def _values(schema: Mapping[str, Any]) -> list[Any] | None:
    """Every value a schema admits when they are few (const, enum, null, boolean); else None."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    named = set(_listed(schema.get("type", "any")))
    if named <= {"null", "boolean"}:
        return [None] * ("null" in named) + [False, True] * ("boolean" in named)
    return None


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    return fastjsonschema.compile(json.loads(schema_json))


def _valid(value: Any, schema: Schema, root: Schema) -> bool:
    if isinstance(schema, bool):
        return schema
    defs = {k: root[k] for k in ("$defs", "definitions") if isinstance(root, dict) and k in root}
    try:
        _validator(json.dumps({**defs, **schema}, sort_keys=True))(value)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _matching(schema: Mapping[str, Any], name: str) -> list[tuple[str, Schema]]:
    return [(p, s) for p, s in schema.get("patternProperties", {}).items() if re.search(p, name)]


def _disjoint(a: Schema, b: Schema) -> bool:
    """Provably no value satisfies both: no common type, or no common listed value."""
    if a is False or b is False:
        return True
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return False
    va, vb = _values(a), _values(b)
    listed_apart = va is not None and vb is not None and not any(x == y for x in va for y in vb)
    return listed_apart or not types_of(a) & types_of(b)


def _merge(parts: list[Schema], around: Mapping[str, Any]) -> Schema | None:
    """One schema admitting what all `parts` admit together (a writer's allOf): types intersect,
    requirements add up, properties combine. None when other keywords clash."""
    merged: dict[str, Any] = {k: v for k, v in around.items() if k != "allOf"}
    for part in parts:
        if part is False:
            return False
        for key, value in ({} if part is True else part).items():
            if key not in merged or merged[key] == value or key in ANNOTATIONS:
                merged.setdefault(key, value)
            elif key == "type":
                merged[key] = sorted(types_of({"type": merged[key]}) & types_of({"type": value}))
            elif key == "required":
                merged[key] = sorted({*merged[key], *value})
            elif key == "properties":
                both = {n: {"allOf": [merged[key][n], s]} for n, s in value.items() if n in merged[key]}
                merged[key] = {**merged[key], **value, **both}
            else:
                return None
    return merged


class _Check:
    def __init__(self, reader: Schema, writer: Schema, direction: str) -> None:
        self.roots = (reader, writer)
        self.direction = direction
        self.r, self.w = ("new", "old") if direction == "backward" else ("old", "new")
        self.found: list[Incompatibility] = []
        self.seen: set[tuple[int, int]] = set()  # (reader, writer) pairs entered through a $ref

    def run(self) -> list[Incompatibility]:
        self.accepts(self.roots[0], self.roots[1], "")
        return self.found

    def report(self, pointer: str, problem: str, detail: str) -> None:
        self.found.append(Incompatibility(self.direction, pointer, problem, detail))

    def quietly(self, reader: Schema, writer: Schema) -> bool:
        """Whether `reader` accepts `writer`, recording nothing."""
        probe = _Check(*self.roots, self.direction)
        probe.seen = set(self.seen)
        probe.accepts(reader, writer, "")
        return not probe.found

    def resolve(self, schema: Schema, side: int) -> Schema:
        for _ in range(64):
            if not isinstance(schema, dict) or "$ref" not in schema:
                return schema
            ref = schema["$ref"]  # draft-07: a $ref's sibling keywords are ignored
            if not ref.startswith("#"):
                raise ValueError(f"only local $refs are supported, not {ref!r}")
            schema = self.roots[side]
            for token in filter(None, ref[1:].split("/")):
                schema = schema[token.replace("~1", "/").replace("~0", "~")]
        raise ValueError("$refs that never reach a schema")

    def accepts(self, reader: Schema, writer: Schema, at: str) -> None:
        """Report why a value valid under `writer` may fail `reader`, if one may."""
        r, w = self.resolve(reader, 0), self.resolve(writer, 1)
        if r is not reader or w is not writer:
            if (id(r), id(w)) in self.seen:
                return  # a recursive schema: this pair is being checked further up
            self.seen.add((id(r), id(w)))
        if w is False or r is True or r == {}:
            return
        if r is False:
            return self.report(at, "nothing", f"the {self.r} schema accepts no value here")
        w = {} if w is True else w
        for union in ("anyOf", "oneOf"):
            if union in w:  # every branch of the writer's, with its sibling keywords
                rest = {k: v for k, v in w.items() if k != union}
                for i, branch in enumerate(w[union]):
                    self.accepts(r, {"allOf": [rest, branch]}, f"{at}/{union}/{i}")
                return
        if "allOf" in w:
            merged = _merge([self.resolve(s, 1) for s in w["allOf"]], w)
            if merged is None:
                return self.report(
                    at + "/allOf", "keyword", f"the {self.w} schema's allOf cannot be compared"
                )
            return self.accepts(r, merged, at)
        values = _values(w)
        if values is not None:  # few values: each one the writer admits must pass the reader
            for value in values:
                if _valid(value, w, self.roots[1]) and not _valid(value, r, self.roots[0]):
                    self.report(at, "enum", f"the {self.r} schema refuses {value!r}")
            return
        self.combinators(r, w, at)
        extra = types_of(w) - types_of(r)
        if extra:
            said = sorted(extra) if "type" in w else "any type"
            self.report(
                at + "/type", "type", f"the {self.w} schema allows {said}, the {self.r} one only {_t(r)}"
            )
        if "enum" in r or "const" in r:
            self.report(
                at, "enum", f"the {self.r} schema lists the values it takes, the {self.w} one does not"
            )
        kinds = types_of(w) & types_of(r)
        for problem, low, high in sorted({bound[1:] for bound in _BOUNDS if bound[0] in kinds}):
            self.bounds(r, w, at, problem, low, high)
        if kinds & {"number", "integer"}:
            self.numbers(r, w, at)
        if "array" in kinds:
            self.arrays(r, w, at)
        if "object" in kinds:
            self.objects(r, w, at)
        for key in sorted(set(r) - _HANDLED - ANNOTATIONS):
            if w.get(key, object()) != r[key]:
                problem = "pattern" if key in ("pattern", "format") else "keyword"
                self.report(f"{at}/{_escape(key)}", problem, f"{key!r} changed, and cannot be compared")

    def combinators(self, r: dict[str, Any], w: dict[str, Any], at: str) -> None:
        for i, part in enumerate(r.get("allOf", ())):
            self.accepts(part, w, f"{at}/allOf/{i}")
        for union in [u for u in ("anyOf", "oneOf") if u in r]:
            branches = [self.resolve(b, 0) for b in r[union]]
            # The writer's values as a whole fit one branch, or else each of its types fits one.
            whole = any(self.quietly(branch, w) for branch in branches)
            for piece in [w] if whole else [{**w, "type": t} for t in sorted(types_of(w))]:
                fits = [i for i, branch in enumerate(branches) if self.quietly(branch, piece)]
                if not fits:
                    self.report(
                        f"{at}/{union}", "union", f"no branch takes every value of the {self.w} schema"
                    )
                    break
                for i, branch in enumerate(branches if union == "oneOf" else ()):
                    if i != fits[0] and not _disjoint(branch, piece):
                        self.report(
                            f"{at}/oneOf/{i}", "union", f"a value may match branches {fits[0]} and {i}"
                        )
        if "not" in r:
            banned = self.resolve(r["not"], 0)
            if not (_disjoint(banned, w) or ("not" in w and self.quietly(w["not"], banned))):
                self.report(
                    f"{at}/not", "keyword", f"values of the {self.w} schema may be what 'not' excludes"
                )

    def bounds(
        self, r: dict[str, Any], w: dict[str, Any], at: str, problem: str, low: str, high: str
    ) -> None:
        # A writer's exclusive bound at the reader's inclusive one is tighter still.
        floor = max(
            w.get(low, -math.inf), w.get("exclusiveMinimum", -math.inf) if low == "minimum" else -math.inf
        )
        ceiling = min(
            w.get(high, math.inf), w.get("exclusiveMaximum", math.inf) if high == "maximum" else math.inf
        )
        if low in r and floor < r[low]:
            self.report(
                f"{at}/{low}",
                problem,
                f"{low} is {r[low]} in the {self.r} schema, {w.get(low, 'none')} in the {self.w} one",
            )
        if high in r and ceiling > r[high]:
            self.report(
                f"{at}/{high}",
                problem,
                f"{high} is {r[high]} in the {self.r} schema, {w.get(high, 'none')} in the {self.w} one",
            )

    def numbers(self, r: dict[str, Any], w: dict[str, Any], at: str) -> None:
        low, high = r.get("exclusiveMinimum"), r.get("exclusiveMaximum")  # draft-07: numbers
        if low is not None and not (
            w.get("exclusiveMinimum", -math.inf) >= low or w.get("minimum", -math.inf) > low
        ):
            self.report(
                at + "/exclusiveMinimum", "range", f"the {self.r} schema takes only values above {low}"
            )
        if high is not None and not (
            w.get("exclusiveMaximum", math.inf) <= high or w.get("maximum", math.inf) < high
        ):
            self.report(
                at + "/exclusiveMaximum", "range", f"the {self.r} schema takes only values below {high}"
            )
        ratio = w.get("multipleOf", 0.5) / r.get("multipleOf", 1)
        if "multipleOf" in r and abs(ratio - round(ratio)) > 1e-9:
            self.report(
                at + "/multipleOf", "range", f"the {self.r} schema takes only multiples of {r['multipleOf']}"
            )

    def arrays(self, r: dict[str, Any], w: dict[str, Any], at: str) -> None:
        if r.get("uniqueItems") and not w.get("uniqueItems"):
            self.report(at + "/uniqueItems", "length", f"the {self.r} schema takes only unique items")
        if isinstance(r.get("items"), list) or isinstance(w.get("items"), list):
            if (r.get("items"), r.get("additionalItems")) != (w.get("items"), w.get("additionalItems")):
                self.report(at + "/items", "keyword", "tuple items changed, and cannot be compared")
        elif "items" in r:
            self.accepts(r["items"], w.get("items", True), at + "/items")

    def objects(self, r: dict[str, Any], w: dict[str, Any], at: str) -> None:
        declared_r, declared_w = r.get("properties", {}), w.get("properties", {})
        for name in sorted(set(r.get("required", ())) - set(w.get("required", ()))):
            why = (
                "is required now: older values may lack it"
                if self.direction == "backward"
                else ("was required: newer values may lack it")
            )
            self.report(f"{at}/properties/{_escape(name)}", "required", f"{name!r} {why}")
        for name, schema in declared_w.items():
            where, patterns = f"{at}/properties/{_escape(name)}", _matching(r, name)
            if name in declared_r:
                self.accepts(declared_r[name], schema, where)
            for pattern, reader in patterns:
                self.accepts(reader, schema, f"{at}/patternProperties/{_escape(pattern)}")
            if name not in declared_r and not patterns and r.get("additionalProperties") is False:
                self.report(where, "closed", f"{name!r} is refused by the {self.r} schema's closed object")
            elif name not in declared_r and not patterns and "additionalProperties" in r:
                self.accepts(r["additionalProperties"], schema, at + "/additionalProperties")
        # What the writer may put under names it does not declare: anything, in a free-form object.
        extra = w.get("additionalProperties", None if declared_w else True)
        extra = None if extra is False else extra
        for name in declared_r.keys() - declared_w.keys():
            produced = [s for _, s in _matching(w, name)] + ([extra] if extra is not None else [])
            for writer in produced:
                self.accepts(declared_r[name], writer, f"{at}/properties/{_escape(name)}")
            if not produced and self.direction == "forward":
                self.report(f"{at}/properties/{_escape(name)}", "removed", f"{name!r} is no longer declared")
        if extra is not None and r.get("additionalProperties") is False:
            self.report(
                at + "/additionalProperties",
                "closed",
                f"the {self.r} schema closes the object, the {self.w} one leaves it open",
            )
        elif extra is not None and "additionalProperties" in r:
            self.accepts(r["additionalProperties"], extra, at + "/additionalProperties")
        for pattern, reader in r.get("patternProperties", {}).items() if extra is not None else ():
            self.accepts(reader, extra, f"{at}/patternProperties/{_escape(pattern)}")


def _t(schema: Mapping[str, Any]) -> str:
    kinds = types_of(schema)
    shown = kinds - ({"integer"} if "number" in kinds else set())
    return "any type" if kinds == ALL_TYPES else ", ".join(sorted(shown))
