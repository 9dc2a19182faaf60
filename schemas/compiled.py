"""The fast path of `codec.from_dict`: a topic's schema and model compiled to straight-line Python.

`predicate` turns a JSON Schema into a function that answers True only for values the schema
accepts. It may answer False for a value the schema accepts but it does not recognise (a str
subclass, a dict subclass, an integer written as a float): the codec then runs the full
fastjsonschema validator, which alone decides every rejection and words its error. Only the
keywords the v1 schemas use are compiled; a schema using any other keyword gets no predicate.

`constructor` builds a model from a validated dict by passing its fields positionally, with the
dataclass defaults for absent optional ones, instead of building a keyword dict per value.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

Predicate = Callable[[Any], bool]
Constructor = Callable[[dict[str, Any]], Any]

_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description"})
# Each JSON type as the exact Python types orjson gives it. The fast path checks `type(v) is`, so
# subclasses and integral floats fall through to the full validator, which accepts them.
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}
# The keywords that apply to one JSON type only (fastjsonschema skips them for other types).
_KEYWORD_TYPE = {
    "required": (dict,),
    "properties": (dict,),
    "additionalProperties": (dict,),
    "items": (list,),
    "minLength": (str,),
    "maxLength": (str,),
    "pattern": (str,),
    "minimum": (int, float),
}
_KEYWORDS = _ANNOTATIONS | set(_KEYWORD_TYPE) | {"type", "enum"}


# Strings already found to match a pattern: the same few names, namespaces and UIDs come back in
# every event, and a regex search costs more than the rest of a value's checks. A string matches or
# not whatever came before, so the memo only saves time; it is emptied when full.
_MATCHED: dict[re.Pattern[str], set[str]] = {}
_MATCHED_MAX = 1 << 16


class _Unsupported(Exception):
    """The schema uses something the fast path does not compile."""


def predicate(schema: dict[str, Any], patterns: dict[str, re.Pattern[str]]) -> Predicate | None:
    """The schema's fast accept test, or None when it uses a keyword this module does not compile.

    `patterns` maps each `pattern` of the schema to the regex the full validator compiled for it
    (fastjsonschema matches `$` as end of string), so both read a pattern the same way."""
    writer = _Writer(patterns)
    try:
        body = writer.node(schema, "v0", 1)
    except _Unsupported:
        return None
    # A required property is read without testing for it first: KeyError means it is missing.
    lines = ["def check(v0):", "  try:", *body, "  except KeyError:", "    return False", "  return True"]
    source = "\n".join(lines)
    namespace: dict[str, Any] = dict(writer.constants)
    exec(compile(source, f"<predicate {schema.get('$id', '')}>", "exec"), namespace)
    check: Predicate = namespace["check"]
    return check


class _Writer:
    """Emits the lines of one predicate; every failed check is `return False`."""

    def __init__(self, patterns: dict[str, re.Pattern[str]]) -> None:
        self.patterns = patterns
        self.constants: dict[str, Any] = {"MISSING": _MISSING}
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def constant(self, value: Any) -> str:
        name = self.name("c")
        self.constants[name] = value
        return name

    def node(self, schema: Any, var: str, depth: int) -> list[str]:
        if not isinstance(schema, dict) or not set(schema) <= _KEYWORDS:
            raise _Unsupported
        pad = "    " * depth
        lines: list[str] = []
        allowed: tuple[type, ...] | None = None
        if "type" in schema:
            allowed = _allowed(schema)
            lines.append(f"{pad}if {_is_not(var, allowed, self)}: return False")
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values or not all(type(v) is str for v in values):
                raise _Unsupported
            members = self.constant(frozenset(values))
            lines.append(f"{pad}if type({var}) is not str or {var} not in {members}: return False")
        for group in dict.fromkeys(_KEYWORD_TYPE[k] for k in schema if k in _KEYWORD_TYPE):
            if allowed is None:  # a keyword with no declared type: never in the v1 schemas
                raise _Unsupported
            applies = tuple(t for t in group if t in allowed)
            if not applies:  # fastjsonschema skips a keyword the value's type cannot have
                continue
            guarded = set(allowed) > set(applies)
            inner = depth + 1 if guarded else depth
            checks = self.keywords(schema, group, var, inner)
            if checks and guarded:
                lines.append(f"{pad}if {_is(var, applies, self)}:")
            lines.extend(checks)
        return lines

    def keywords(self, schema: dict[str, Any], group: tuple[type, ...], var: str, depth: int) -> list[str]:
        pad = "    " * depth
        if group == (str,):
            return self.string(schema, var, pad)
        if group == (int, float):
            minimum = schema["minimum"]
            if type(minimum) not in (int, float) or not math.isfinite(minimum):
                raise _Unsupported
            return [f"{pad}if {var} < {minimum!r}: return False"]
        if group == (list,):
            items = schema["items"]
            body = self.node(items, (item := self.name("v")), depth + 1)
            return [f"{pad}for {item} in {var}:", *body] if body else []
        return self.object(schema, var, depth)

    def string(self, schema: dict[str, Any], var: str, pad: str) -> list[str]:
        lines = []
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        if type(low) is not int or (high is not None and type(high) is not int):
            raise _Unsupported
        if high is not None:
            lines.append(f"{pad}if not {low} <= len({var}) <= {high}: return False")
        elif low:
            lines.append(f"{pad}if len({var}) < {low}: return False")
        if "pattern" in schema:
            regex = self.patterns.get(schema["pattern"])
            if regex is None:
                raise _Unsupported
            seen = self.constant(_MATCHED.setdefault(regex, set()))
            lines += [
                f"{pad}if {var} not in {seen}:",
                f"{pad}    if {self.constant(regex)}.search({var}) is None: return False",
                f"{pad}    if len({seen}) >= {_MATCHED_MAX}: {seen}.clear()",
                f"{pad}    {seen}.add({var})",
            ]
        return lines

    def object(self, schema: dict[str, Any], var: str, depth: int) -> list[str]:
        pad = "    " * depth
        required = schema.get("required", [])
        properties = schema.get("properties", {})
        if not isinstance(required, list) or not all(type(n) is str for n in required):
            raise _Unsupported
        if not isinstance(properties, dict):
            raise _Unsupported
        lines, fetched = [], set()
        for name, sub in properties.items():
            value = self.name("v")
            if name in required:
                if body := self.node(sub, value, depth):  # a missing one raises KeyError: False
                    lines += [f"{pad}{value} = {var}[{name!r}]", *body]
                    fetched.add(name)
            elif isinstance(sub, dict) and set(sub) - _ANNOTATIONS == {"type"}:  # one test, absent or not
                absent_or = self.constant((*_allowed(sub), _Missing))
                lines.append(f"{pad}if type({var}.get({name!r}, MISSING)) not in {absent_or}: return False")
            elif body := self.node(sub, value, depth + 1):
                lines += [
                    f"{pad}{value} = {var}.get({name!r}, MISSING)",
                    f"{pad}if {value} is not MISSING:",
                    *body,
                ]
        if unchecked := [name for name in dict.fromkeys(required) if name not in fetched]:
            present = " and ".join(f"{name!r} in {var}" for name in unchecked)
            lines.insert(0, f"{pad}if not ({present}): return False")
        extra = schema.get("additionalProperties", True)
        if extra is True:
            return lines
        known = self.constant(frozenset(properties))
        key = self.name("k")
        if extra is False:
            return [*lines, f"{pad}for {key} in {var}:", f"{pad}    if {key} not in {known}: return False"]
        value = self.name("v")
        body = self.node(extra, value, depth + 2)
        if body:
            lines += [
                f"{pad}for {key}, {value} in {var}.items():",
                f"{pad}    if {key} not in {known}:",
                *body,
            ]
        return lines


def _allowed(schema: dict[str, Any]) -> tuple[type, ...]:
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if not names or any(n not in _TYPES for n in names):
        raise _Unsupported
    return tuple(dict.fromkeys(t for n in names for t in _TYPES[n]))


def _is_not(var: str, types: tuple[type, ...], writer: _Writer) -> str:
    op = "not in" if len(types) > 1 else "is not"
    return f"type({var}) {op} {writer.constant(types if len(types) > 1 else types[0])}"


def _is(var: str, types: tuple[type, ...], writer: _Writer) -> str:
    op = "in" if len(types) > 1 else "is"
    return f"type({var}) {op} {writer.constant(types if len(types) > 1 else types[0])}"


class _Missing:
    """Marks an absent property (None is a value)."""


_MISSING = _Missing()


def constructor(cls: type[Any], nested: dict[str, Constructor], generic: Constructor) -> Constructor:
    """A model's constructor from its validated dict, equal to `generic` (the keyword-dict build).

    It takes the fast path only for a plain dict holding every required field; anything else, and
    any error, goes to `generic`, so a bad value fails exactly as it always did. A dataclass with a
    __post_init__, InitVar, ClassVar, keyword-only or non-init fields is always built by `generic`."""
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or any(f.kw_only or not f.init for f in fields):
        return generic
    if len(fields) != len(cls.__dataclass_fields__):  # pseudo-fields: the positions may not match
        return generic
    namespace: dict[str, Any] = {"cls": cls, "generic": generic, "dict": dict}
    args = []
    for i, f in enumerate(fields):
        value = f"o[{f.name!r}]"
        if f.name in nested:
            namespace[f"n{i}"] = nested[f.name]
            value = f"n{i}({value})"
        if f.default_factory is not dataclasses.MISSING:
            namespace[f"d{i}"] = f.default_factory
            value = f"{value} if {f.name!r} in o else d{i}()"
        elif f.default is not dataclasses.MISSING:
            namespace[f"d{i}"] = f.default
            value = f"{value} if {f.name!r} in o else d{i}"
        args.append(value)
    source = "\n".join(
        [
            "def construct(o):",
            "    if type(o) is dict:",
            "        try:",
            f"            return cls({', '.join(args)})",
            "        except Exception:",
            "            pass",
            "    return generic(o)",
        ]
    )
    exec(compile(source, f"<constructor {cls.__name__}>", "exec"), namespace)
    construct: Constructor = namespace["construct"]
    return construct
