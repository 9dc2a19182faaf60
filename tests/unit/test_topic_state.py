"""Which of a topic's configs count as set on the topic itself (`topic_overrides`), which a repair
of `podledger topics create` keeps: as each DescribeConfigs version tells it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from podledger.streams.topic_state import topic_configs, topic_overrides

# (name, value, read only, source or is-default, sensitive): a v1 source is 1 for the topic's own
# config, 4 for the broker's static config, 5 for Kafka's default.
V1_ENTRIES: list[tuple[Any, ...]] = [
    ("retention.ms", "7776000000", False, 1, False, []),
    ("compression.type", "zstd", False, 1, False, []),
    ("segment.bytes", "1073741824", False, 5, False, []),
    ("max.message.bytes", "2097152", False, 4, False, []),
    ("sasl.jaas.config", None, False, 1, True, []),
]
# v0 tells only whether a value is Kafka's default.
V0_ENTRIES: list[tuple[Any, ...]] = [
    ("retention.ms", "7776000000", False, False, False),
    ("segment.bytes", "1073741824", False, True, False),
    ("broker.only", "x", True, False, False),
]


class Admin:
    def __init__(self, version: int, entries: list[Any]) -> None:
        self.version, self.entries = version, entries

    async def describe_configs(self, resources: list[Any]) -> list[Any]:
        rows = [(0, None, 2, r.name, self.entries) for r in resources]
        return [SimpleNamespace(API_VERSION=self.version, resources=rows)]


@pytest.mark.parametrize(
    ("version", "entries", "own"),
    [
        (1, V1_ENTRIES, {"retention.ms": "7776000000", "compression.type": "zstd"}),
        (0, V0_ENTRIES, {"retention.ms": "7776000000"}),
    ],
)
def test_what_is_set_on_the_topic_itself(version: int, entries: list[Any], own: dict[str, str]) -> None:
    admin: Any = Admin(version, entries)
    assert asyncio.run(topic_overrides(admin, ["t"])) == {"t": own}


def test_every_value_in_force_but_a_sensitive_one() -> None:
    admin: Any = Admin(1, V1_ENTRIES)
    configs = asyncio.run(topic_configs(admin, ["t"]))["t"]
    assert set(configs) == {"retention.ms", "compression.type", "segment.bytes", "max.message.bytes"}
