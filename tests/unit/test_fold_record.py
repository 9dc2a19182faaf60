"""The fold's pod record is what the state topic stores: it must encode as JSON whatever type
the caller used to name a topic (the Faust app passes `Topic` members, replay passes strings)."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from podledger.schemas import models
from podledger.streams.fold import Coordinates, PodRecord, fold_event
from podledger.types import Topic
from tests import pods

T0 = 1_763_700_000_000


def probe(ts: int) -> models.ProbeResult:
    return models.ProbeResult("u-1", "n1", "c", "process://1", "readiness", "Success", ts)


def add() -> models.PodUpdate:
    return models.PodUpdate("ADD", "api", "n1", pods.pod(name="web", uid="u-1", node="n1", image="app:1"), T0)


def assert_stored_as_json(record: PodRecord | None) -> None:
    assert record is not None
    assert all(type(name) is str for name in record["applied"])
    assert orjson.loads(orjson.dumps(record)) == record


@pytest.mark.parametrize("name_topic", [lambda t: t, str], ids=["Topic member", "plain str"])
def test_applied_offsets_are_keyed_by_plain_strings(name_topic: Callable[[Topic], str]) -> None:
    # An event held before the pod is known, then the ADD that releases it, then a plain update.
    held, _ = fold_event(None, Coordinates(name_topic(Topic.PROBE_RESULTS), 0, 5, T0), probe(T0))
    assert_stored_as_json(held)
    record, _ = fold_event(held, Coordinates(name_topic(Topic.POD_UPDATES), 0, 7, T0), add())
    assert_stored_as_json(record)
    record, _ = fold_event(record, Coordinates(name_topic(Topic.PROBE_RESULTS), 0, 9, T0 + 1), probe(T0 + 1))
    assert_stored_as_json(record)
    assert record is not None and record["applied"] == {"probe-results": 9, "pod-updates": 7}
