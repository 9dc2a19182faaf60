"""Strategies for the poison fuzzers: schema-valid but odd values of podledger's topics.

A value is a good one with one to three subtrees replaced, deleted or added, inside the parts its
topic's schema leaves open; a change the schema would refuse is undone, so every value drawn passes
the schema (that is what makes it poison rather than garbage). `PODLEDGER_FUZZ_EXAMPLES` sets how
many each fuzz test draws (default 10,000, as `make test` runs them).
"""

from __future__ import annotations

import copy
import os
from typing import Any

from hypothesis import strategies as st

from podledger.schemas import DecodeError, from_dict
from podledger.types import Topic

EXAMPLES = int(os.environ.get("PODLEDGER_FUZZ_EXAMPLES", "10000"))

json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in items:
        out.append((*prefix, key))
        out += _paths(child, (*prefix, key))
    return out


def mutate(value: Any, path: tuple[Any, ...], action: str, new: Any) -> None:
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "replace":
        parent[last] = new
    elif action == "delete":
        del parent[last]
    elif isinstance(parent, list):
        parent.insert(last, new)
    else:
        parent[f"{last}-x"] = new


# Where each topic's schema leaves values open: odd values there pass the schema, and the fold must
# cope with them. Elsewhere (enums, required scalars) a mutation mostly meets the schema's refusal,
# which the malformed-values test covers.
OPEN_PARTS: dict[str, tuple[str, ...]] = {
    Topic.POD_UPDATES: ("pod",),
    Topic.POD_STATUS: ("status",),
    Topic.PLEG: ("runtime", "container_id"),
    Topic.POD_LIFECYCLE: ("sync_results", "backoff", "runtime", "grace_s"),
    Topic.PROBE_RESULTS: ("container_name", "container_id"),
}


@st.composite
def odd_values(draw: st.DrawFn, base: dict[str, Any], topic: str | None = None) -> dict[str, Any]:
    """`base` with one to three subtrees replaced, deleted or added, inside the parts of `topic`
    its schema leaves open (anywhere when None). The pod's UID and node are kept, so the value
    reaches the pod's record (another node's claim is test_fold_origin's subject)."""
    value = copy.deepcopy(base)
    roots = OPEN_PARTS.get(topic or "", ())
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(value) if p[-1] not in ("uid", "node") and (not roots or p[0] in roots)]
        if not paths:
            break
        path = paths[draw(st.integers(0, len(paths) - 1))]
        new = draw(json_values if len(path) > 1 else json_values | st.text(max_size=40))
        before = copy.deepcopy(value)
        mutate(value, path, draw(st.sampled_from(["replace", "replace", "delete", "insert"])), new)
        if topic is not None and not schema_valid(topic, value):
            value = before  # keep only what the schema lets through: odd, not invalid
    return value


def schema_valid(topic: str, value: Any) -> bool:
    try:
        from_dict(topic, value)
    except DecodeError:
        return False
    return True
