"""Poison, property-tested: schema-valid but odd values on every ingress topic, and malformed bytes,
between good events of the same pod. Whatever the value, no exception escapes the fold; a value it
rejects is on dead-letter with a reason, its coordinates and its bytes; the good events around it
are folded; and every output is valid under its topic's schema.

`PODLEDGER_FUZZ_EXAMPLES` sets the schema-valid examples per topic (default 10,000, as `make test`
runs them). Values that once broke the fold are kept in `fuzz_regressions.json` and run first.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podledger.schemas import decode, encode, to_dict
from podledger.streams.batch import BatchFold
from podledger.streams.fold import Coordinates, HoldLimits, PodRecord
from podledger.types import Topic
from podledger.workload import workload
from tests.fuzz import EXAMPLES, mutate, odd_values, schema_valid

REGRESSIONS = json.loads((Path(__file__).parent / "fuzz_regressions.json").read_text())
T0 = 1_700_000_000_000


def _bases() -> dict[str, dict[str, Any]]:
    """One good value per ingress topic, all of one pod."""
    events = list(workload(1, 300, nodes=1, seed=2, start_ms=T0))
    out: dict[str, dict[str, Any]] = {}
    for e in events:
        key = e.topic if e.topic != Topic.POD_LIFECYCLE else f"{e.topic}:{e.value.kind}"
        out.setdefault(key, to_dict(e.value))
    return out


BASES = _bases()
ADD = BASES[Topic.POD_UPDATES]
FOLLOW_UP = BASES[Topic.PLEG]
UID = ADD["pod"]["metadata"]["uid"]


def fold_around(topic: str, raw: bytes) -> None:
    """Fold [good ADD, raw, good pleg] (for pod-updates: [raw, good pleg]) and check the property."""
    table: dict[bytes, PodRecord] = {}
    offsets: dict[str, int] = {}
    sequence = [] if topic == Topic.POD_UPDATES else [(Topic.POD_UPDATES, encode(ADD))]
    sequence += [(topic, raw), (Topic.PLEG, encode(FOLLOW_UP))]
    fold = BatchFold(table.get, HoldLimits(), 1 << 20)
    coordinates = []
    for i, (t, value) in enumerate(sequence):
        offset = offsets[t] = offsets.get(t, -1) + 1
        at = Coordinates(t, 0, offset, T0 + i)
        coordinates.append(at)
        fold.add_message(at, UID.encode(), value)
    journaled = {(e.value.topic, e.value.offset) for _, e in fold.batch.journal}
    letters = [out.value for _, out in fold.batch.outputs if out.topic == Topic.DEAD_LETTER]
    lettered = {(d.topic, d.offset): d for d in letters}
    odd_at = coordinates[-2]
    if (odd_at.topic, odd_at.offset) not in journaled:
        letter = lettered.get((odd_at.topic, odd_at.offset))
        assert letter is not None, "a value neither folded nor dead-lettered"
        assert letter.reason and letter.partition == 0
        if letter.reason in ("malformed", "schema", "unknown_op", "oversize"):
            assert base64.b64decode(letter.value_b64 or "") == raw  # its bytes, as sent
    good = [(at.topic, at.offset) for at in coordinates if at is not odd_at]
    if topic == Topic.POD_UPDATES and (odd_at.topic, odd_at.offset) not in journaled:
        good = good[:0]  # no pod announced: the pleg waits (held), which is right
    assert set(good) <= journaled, "a good event around the odd one was not folded"
    for _, out in fold.batch.journal + fold.batch.outputs:
        if out.value is not None:  # every output is valid on the wire
            decode(out.topic, encode(out.value))


INGRESS = [
    Topic.POD_UPDATES,
    Topic.PLEG,
    Topic.PROBE_RESULTS,
    "pod-lifecycle:sync_result",
    "pod-lifecycle:terminated",
]


def _topic(name: str) -> str:
    return name.split(":")[0]


@pytest.mark.parametrize("base", [b for b in INGRESS if b in BASES])
def test_schema_valid_odd_values_never_stop_the_fold(base: str) -> None:
    topic = _topic(base)
    valid = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(odd_values(BASES[base], topic))
    def run(value: dict[str, Any]) -> None:
        nonlocal valid
        assert schema_valid(topic, value)
        valid += 1
        fold_around(topic, json.dumps(value).encode())

    run()
    assert valid >= EXAMPLES


@pytest.mark.parametrize("base", [b for b in INGRESS if b in BASES])
def test_malformed_and_schema_invalid_values_are_dead_lettered_with_their_bytes(base: str) -> None:
    topic = _topic(base)

    @settings(max_examples=max(EXAMPLES // 10, 100), deadline=None, database=None)
    @given(st.binary(max_size=200) | odd_values(BASES[base]).map(lambda v: json.dumps(v).encode()))
    def run(raw: bytes) -> None:
        fold_around(topic, raw)

    run()


@pytest.mark.parametrize("case", REGRESSIONS, ids=[case["id"] for case in REGRESSIONS])
def test_values_that_once_broke_the_fold(case: dict[str, Any]) -> None:
    base = copy.deepcopy(BASES[case["base"]])
    for path, new in case["set"]:
        mutate(base, tuple(path), "replace", new)
    for path in case.get("delete", []):
        mutate(base, tuple(path), "delete", None)
    fold_around(_topic(case["base"]), json.dumps(base).encode())
