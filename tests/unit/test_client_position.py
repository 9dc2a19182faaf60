"""Resume tokens (read/client/position.py): what they carry, what they refuse."""

from __future__ import annotations

import pytest

from podledger.read.client.position import (
    CLOCK_MARGIN_MS,
    InvalidToken,
    Position,
    ahead_partitions,
    decode_position,
    encode_position,
    expired_reason,
)

DAY = 86_400_000


@pytest.mark.parametrize(
    "position",
    [
        Position((0,), 0),
        Position((0, 1, 2, 3, 4, 5), 1_767_225_600_000),
        Position((2**40, 127, 128, 16_383, 16_384), 2**45),
    ],
)
def test_a_token_gives_back_its_position(position: Position) -> None:
    token = encode_position(position)
    assert token.startswith("pl1.")
    assert all(ch.isalnum() or ch in "._-" for ch in token), "URL-safe: passed unchanged in a query"
    assert decode_position(token) == position


def test_tokens_of_different_positions_differ() -> None:
    assert encode_position(Position((1, 2), 5)) != encode_position(Position((2, 1), 5))


@pytest.mark.parametrize(
    "text",
    ["", "42", "pl2.AQ", "pl1.", "pl1.!!", "pl1.AQ", "pl1.AAI", "pl1.gA", "pl1." + "A" * 5000, "pl1.AAAA"],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(InvalidToken):
        decode_position(text)


def test_a_negative_offset_cannot_be_encoded() -> None:
    with pytest.raises(ValueError):
        encode_position(Position((-1,), 0))


NOW = 10 * DAY


@pytest.mark.parametrize(
    ("position", "starts", "expected"),
    [
        (Position((5, 9), NOW - 1000), [0, 0], None),
        (Position((5, 9), NOW - 1000), [5, 9], None),
        (Position((5, 9), NOW - 1000), [6, 0], "partition 0 of pod-status now starts at offset 6"),
        (Position((5,), NOW), [0, 0], "for 1 partitions"),
        (Position((5, 9), NOW - DAY + CLOCK_MARGIN_MS), [0, 0], None),
        (Position((5, 9), NOW - DAY + CLOCK_MARGIN_MS - 1), [0, 0], "older than the tombstone retention"),
    ],
)
def test_expired_reason(position: Position, starts: list[int], expected: str | None) -> None:
    reason = expired_reason(position, starts, NOW, DAY)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason


def test_ahead_partitions() -> None:
    assert ahead_partitions(Position((3, 7, 2), 0), [3, 6, 9]) == [1]
