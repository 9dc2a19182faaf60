"""Where a reader stands in `pod-status`: the next offset of every partition, and since when the
reader has been sure of it. Encoded as an opaque token, which is also the `resourceVersion` that
`podledger serve` hands out (docs/consuming.md, "Resume tokens").

Pure: no clock, no Kafka; the edges pass the offsets and times in.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

TOKEN_PREFIX = "pl1."
# A token older than the tombstone retention of pod-status, less this margin for clock skew between
# the reader and the broker, is refused: a deletion after it may be gone from the topic.
CLOCK_MARGIN_MS = 3_600_000


class InvalidToken(ValueError):
    """Text that is not a token this version wrote."""


@dataclass(frozen=True, slots=True)
class Position:
    """`offsets[p]` is the next offset to read on partition p: every record before it was seen.

    `safe_ms` is a time at or before which the reader had seen every record written before it: any
    tombstone after `offsets` was written at or after `safe_ms`, so the topic keeps it at least
    until `safe_ms` plus its tombstone retention."""

    offsets: tuple[int, ...]
    safe_ms: int

    @property
    def partitions(self) -> int:
        return len(self.offsets)


def _varint(value: int, out: bytearray) -> None:
    if value < 0:
        raise ValueError(f"a token holds no negative numbers ({value})")
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _read_varints(data: bytes) -> list[int]:
    values, value, shift = [], 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift > 70:
            raise InvalidToken("a number in the token is too long")
        if not byte & 0x80:
            values.append(value)
            value, shift = 0, 0
    if shift:
        raise InvalidToken("the token ends inside a number")
    return values


def encode_position(position: Position) -> str:
    """`pl1.` + URL-safe base64 (unpadded) of varints: safe_ms, the partition count, the offsets."""
    out = bytearray()
    for value in (position.safe_ms, len(position.offsets), *position.offsets):
        _varint(value, out)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(bytes(out)).decode().rstrip("=")


def decode_position(token: str) -> Position:
    """The position a token names; InvalidToken for anything else."""
    if not token.startswith(TOKEN_PREFIX):
        raise InvalidToken(f"not a podledger resume token (it must start with {TOKEN_PREFIX!r})")
    body = token[len(TOKEN_PREFIX) :]
    if len(body) > 4096 or not body.replace("-", "").replace("_", "").isalnum():
        raise InvalidToken("the token is not URL-safe base64")
    try:
        data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError:
        raise InvalidToken("the token is not URL-safe base64") from None
    values = _read_varints(data)
    if len(values) < 2 or values[1] != len(values) - 2 or values[1] == 0:
        raise InvalidToken("the token's partition count does not match its offsets")
    return Position(offsets=tuple(values[2:]), safe_ms=values[0])


def expired_reason(
    position: Position, log_starts: Sequence[int], now_ms: int, tombstone_retention_ms: int
) -> str | None:
    """Why the topic may no longer hold what follows `position` (a reader must list again), or None.

    `log_starts[p]` is the oldest offset partition p still holds."""
    if position.partitions != len(log_starts):
        return (
            f"the token is for {position.partitions} partitions of pod-status; the topic has"
            f" {len(log_starts)}"
        )
    for partition, (offset, start) in enumerate(zip(position.offsets, log_starts, strict=True)):
        if offset < start:
            return (
                f"partition {partition} of pod-status now starts at offset {start}; the token is at {offset}"
            )
    if now_ms - position.safe_ms > tombstone_retention_ms - CLOCK_MARGIN_MS:
        return "the token is older than the tombstone retention of pod-status: deletions after it may be gone"
    return None


def ahead_partitions(position: Position, ends: Sequence[int]) -> list[int]:
    """The partitions where `position` is past what the topic holds now (a token from other topics,
    or from a reader that is ahead of this one)."""
    return [p for p, (offset, end) in enumerate(zip(position.offsets, ends, strict=True)) if offset > end]
