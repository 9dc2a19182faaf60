"""The codec's fast path (schemas/compiled.py) decides exactly as the plain one: fastjsonschema's
validator, its error turned into a DecodeError, then the keyword-dict build.

Values are workload events and every topic's example, mutated one to three times anywhere: a field
dropped, replaced by a value of the wrong type, a near-miss of an enum, a pattern or a length bound,
or a subclass the fast test does not recognise; a known optional field or an unknown one added,
at the top or deep inside. Both paths must accept the same values, build equal models from the
same objects, and refuse the rest with the same reason, field and message.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import re
from typing import Any

import fastjsonschema
import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from podledger.schemas import DecodeError, codec, compiled, encode, from_dict
from podledger.types import PodOp, Topic
from podledger.workload import workload
from tests.fuzz import _paths, json_values, mutate
from tests.unit.test_schemas import EXAMPLES

INGRESS = (Topic.POD_UPDATES, Topic.PLEG, Topic.PROBE_RESULTS, Topic.POD_LIFECYCLE)


def _seeds() -> dict[str, list[dict[str, Any]]]:
    seeds: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for ingress in workload(12, 400, nodes=2, seed=3, start_ms=1_700_000_000_000):
        seeds[str(ingress.topic)].append(orjson.loads(encode(ingress.value)))
    seeds["journal"] += [
        {"type": f"{topic}:x", "topic": str(topic), "partition": 1, "offset": i, "ts_ms": 5, "event": value}
        for topic in INGRESS
        for i, value in enumerate(seeds[topic][:20])
    ]
    for topic, model in EXAMPLES.items():
        seeds[topic].append(orjson.loads(encode(model)))
    return seeds


SEEDS = _seeds()


def _schema_words(node: Any, found: tuple[set[str], set[str]]) -> tuple[set[str], set[str]]:
    """Every property name and every enum value the schemas use."""
    if isinstance(node, dict):
        found[0].update(node.get("properties", {}))
        found[1].update(v for v in node.get("enum", []) if isinstance(v, str))
        for child in node.values():
            _schema_words(child, found)
    elif isinstance(node, list):
        for child in node:
            _schema_words(child, found)
    return found


NAMES, ENUMS = _schema_words([codec.schema(t) for t in codec.MODELS], (set(), set()))

# Near misses of the schemas' patterns and bounds, and values of the right JSON type that the fast
# test does not recognise (subclasses, integral floats, tuples, OrderedDicts): the full validator
# must take those.
tricky: st.SearchStrategy[Any] = st.sampled_from(
    [
        "",
        "a",
        "A",
        "-a",
        "a-",
        "a_b",
        "a.b",
        "a..b",
        ".a",
        "a b",
        "a/b",
        "ab\n",
        "ab\x00",
        "ü",
        "a" * 63,
        "a" * 64,
        "a" * 128,
        "a" * 129,
        "a" * 253,
        "a" * 254,
        "3c1f2f9e-1111-4a2b",
        0,
        1,
        -1,
        2**70,
        1.0,
        1.5,
        -0.5,
        True,
        False,
        None,
        [],
        {},
        [""],
        [{}],
        [1],
        ("x",),
        {"name": "c"},
        {"delay": 1, "last_update": 2.5},
        {"delay": "1", "last_update": 2},
        Topic.PLEG,
        PodOp.ADD,
        collections.OrderedDict(name="c"),
        collections.OrderedDict(),
    ]
)
odd = st.one_of(
    tricky.map(copy.deepcopy),
    st.sampled_from(sorted(ENUMS)),
    st.sampled_from(sorted(ENUMS)).map(str.lower),
    json_values,
)


# The schemas' minLength, maxLength and minimum, and one past each.
EDGE_LENGTHS = [0, 1, 2, 62, 63, 64, 127, 128, 129, 252, 253, 254]
EDGE_NUMBERS = [-2, -1, 0, 1, 2]


@st.composite
def mutated(draw: st.DrawFn, topic: str) -> Any:
    value = copy.deepcopy(draw(st.sampled_from(SEEDS[topic])))
    for _ in range(draw(st.integers(0, 3))):
        paths = _paths(value)
        actions = ["replace", "replace", "delete", "insert", "add", "alike", "edge", "edge", "whole"]
        action = draw(st.sampled_from(actions))
        if action == "whole" or not paths:
            return draw(odd)
        path = paths[draw(st.integers(0, len(paths) - 1))]
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        old = parent[path[-1]]
        if action == "add" and isinstance(old, dict):  # a field some schema knows, with an odd value
            old[draw(st.sampled_from(sorted(NAMES)))] = draw(odd)
        elif action == "alike":  # the same value in a type the fast test does not recognise
            parent[path[-1]] = _alike(old)
        elif action == "edge" and type(old) in (str, int):  # on a bound or just past it
            n = draw(st.sampled_from(EDGE_LENGTHS if type(old) is str else EDGE_NUMBERS))
            parent[path[-1]] = "a" * n if type(old) is str else n
        elif action in ("replace", "delete", "insert"):
            mutate(value, path, action, draw(odd))
    return value


class _Text(str):
    """A str subclass, as a StrEnum member is."""


def _alike(value: Any) -> Any:
    kinds: dict[type, Any] = {str: _Text, int: float, list: tuple, dict: collections.OrderedDict}
    return kinds[type(value)](value) if type(value) in kinds else value


def _plain(topic: str, obj: Any) -> Any:
    """from_dict as it was: the full validator, then the keyword-dict build."""
    try:
        fastjsonschema.compile(codec.schema(topic))(obj)
    except fastjsonschema.JsonSchemaValueException as exc:
        raise codec._schema_error(topic, obj, exc) from None
    return codec._build(codec.MODELS[topic], obj)


def _outcome(decode: Any, topic: str, obj: Any) -> tuple[Any, ...]:
    try:
        model = decode(topic, obj)
    except DecodeError as exc:
        return ("refused", exc.reason, exc.field, str(exc))
    except Exception as exc:  # a value no wire gives (an int past 64 bits)
        return ("refused", type(exc), str(exc))
    return _fields(model)


def _same(fast: tuple[Any, ...], plain: tuple[Any, ...]) -> bool:
    if fast[0] != plain[0] or fast[0] == "refused":
        return fast == plain
    return fast[1] is plain[1] and all(map(_same_field, fast[2], plain[2]))


def _same_field(a: Any, b: Any) -> bool:
    """The same object, or a new one made alike: a default list, a nested model."""
    if a is b or (type(a) is type(b) is list and a == [] == b):
        return True
    return dataclasses.is_dataclass(a) and _same(_fields(a), _fields(b))


def _fields(model: Any) -> tuple[Any, ...]:
    return ("accepted", type(model), [getattr(model, f.name) for f in dataclasses.fields(model)])


@pytest.mark.parametrize("topic", sorted(codec.MODELS))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_path_decides_as_the_plain_one(topic: str, data: st.DataObject) -> None:
    obj = data.draw(mutated(topic))
    before = copy.deepcopy(obj)
    plain = _outcome(_plain, topic, obj)
    fast = _outcome(from_dict, topic, obj)
    assert _same(fast, plain), (fast, plain)
    assert obj == before  # neither path changes the value it reads
    event(f"{plain[0]}, {'by the fast test' if codec._decoder(topic)[0](obj) else 'by the full validator'}")


@pytest.mark.parametrize("topic", sorted(codec.MODELS))
def test_every_seed_is_accepted_by_the_fast_test_itself(topic: str) -> None:
    """The v1 schemas compile whole, and workload values never need the full validator."""
    check, _ = codec._decoder(topic)
    assert check is not codec._unsure
    for value in SEEDS[topic]:
        assert check(value), value


@pytest.mark.parametrize("topic", INGRESS)
def test_each_mutation_kind_is_refused_with_the_plain_error(topic: str) -> None:
    """Vectors: the plain path's error, word for word, for the mutations the brief names."""
    base = SEEDS[topic][0]
    first_required = codec.schema(topic)["required"][0]
    cases: list[Any] = []
    for change in (
        lambda v: v.pop(first_required),
        lambda v: v.__setitem__("ts_ms", "soon"),
        lambda v: v.__setitem__("ts_ms", -1),
        lambda v: v.__setitem__("node", ""),
        lambda v: v.__setitem__("uid" if "uid" in v else "op", "a/b"),
    ):
        value = copy.deepcopy(base)
        change(value)
        cases.append(value)
    for value in cases:
        plain = _outcome(_plain, topic, value)
        assert plain[0] == "refused"
        assert _outcome(from_dict, topic, value) == plain


def test_schemas_with_other_keywords_get_no_fast_test() -> None:
    for schema in (
        {"type": "object", "oneOf": [{"required": ["a"]}]},
        {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}},
        {"type": "string", "format": "date-time"},
        {"type": "array", "items": [{"type": "string"}]},
        {"enum": [1, 2]},
        {"required": ["a"]},
        {"type": "object", "properties": {"a": {"pattern": "^a$"}}},
    ):
        assert compiled.predicate(schema, {}) is None, schema


def test_pattern_memo_stays_bounded_and_never_accepts_a_miss() -> None:
    regex = re.compile(r"^[a-z]+\Z")
    check = compiled.predicate({"type": "string", "pattern": "^[a-z]+$"}, {"^[a-z]+$": regex})
    assert check is not None
    words = [
        "".join(chr(97 + (i >> s) % 26) for s in (0, 5, 10, 15)) for i in range(compiled._MATCHED_MAX + 99)
    ]
    assert all(check(word) for word in words)
    assert len(compiled._MATCHED[regex]) <= compiled._MATCHED_MAX
    assert not check("abc\n") and not check("") and not check("a1")
    assert check(words[-1])


@pytest.mark.parametrize("topic", sorted(codec.MODELS))
def test_constructor_fails_as_the_plain_build(topic: str) -> None:
    """Values the schema would refuse still fail the build as before (build() trusts its caller)."""
    cls = codec.MODELS[topic]
    construct = codec._constructor(cls)
    value = SEEDS[topic][0]
    required = codec.schema(topic)["required"]
    bads: list[Any] = [
        {k: v for k, v in value.items() if k != required[-1]},
        None,
        [],
        "x",
        collections.OrderedDict(value),
    ]
    for bad in bads:
        try:
            expected: Any = codec._build(cls, bad)
        except Exception as exc:  # the plain build's error is the expectation
            with pytest.raises(type(exc)) as got:
                construct(bad)
            assert str(got.value) == str(exc)
        else:
            assert construct(bad) == expected
