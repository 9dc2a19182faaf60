"""What the fold emits: an output message (`Output`), where an input sat (`Coordinates`), and the
dead letters that stand for an input the fold could not use. Pure: no Kafka, no clock."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from podledger.schemas import DecodeError, decode, encode, models
from podledger.types import Topic


@dataclass(slots=True)
class Output:
    """A message the fold wants published: logical topic, pod UID key, value (None = tombstone),
    and record headers (the journal carries its input's proof of origin). The native fold core's
    outputs never become these: it answers whole record batches (Batch.built)."""

    topic: str
    key: str
    value: Any
    headers: list[tuple[str, bytes]] | None = None
    encoded: bytes | None = None  # the value's bytes, once BatchFold has checked that it encodes

    def wire_value(self) -> bytes | None:
        """The bytes to publish (None for a tombstone)."""
        if self.value is None:
            return None
        if self.encoded is None:
            self.encoded = encode(self.value)
        return self.encoded


@dataclass(slots=True)
class Coordinates:
    """Where an input event sits in Kafka, and its timestamp."""

    topic: str
    partition: int
    offset: int
    ts_ms: int


# A dead letter must fit under the broker's default message limit (1 MiB) after base64 (4/3):
# longer values keep a prefix, their length and their digest.
DEAD_LETTER_VALUE_MAX = 600_000
DEAD_LETTER_KEY_MAX = 4_096
DEAD_LETTER_DETAIL_MAX = 2_000


def dead_letter(reason: str, detail: str, at: Coordinates, key: bytes | None, value: bytes | None) -> Output:
    """A dead-letter output carrying the original bytes (or a bounded prefix plus the original's
    length and SHA-256) and where they came from."""
    clipped = value is not None and len(value) > DEAD_LETTER_VALUE_MAX
    letter = models.DeadLetter(
        reason=reason,
        detail=detail[:DEAD_LETTER_DETAIL_MAX],
        topic=at.topic,
        partition=at.partition,
        offset=at.offset,
        key_b64=None if key is None else base64.b64encode(key[:DEAD_LETTER_KEY_MAX]).decode(),
        value_b64=None if value is None else base64.b64encode(value[:DEAD_LETTER_VALUE_MAX]).decode(),
        ts_ms=at.ts_ms,
    )
    if clipped:
        assert value is not None
        letter.value_size, letter.value_sha256 = len(value), hashlib.sha256(value).hexdigest()
    return Output(
        Topic.DEAD_LETTER, key[:DEAD_LETTER_KEY_MAX].decode(errors="replace") if key else "", letter
    )


def unusable(at: Coordinates, event: Any, error: Exception) -> Output:
    """The dead letter for a schema-valid event the rules failed on: the fold goes on without it."""
    detail = f"{at.topic} event the fold could not apply: {error.__class__.__name__}: {error}"
    return dead_letter("unusable", detail, at, str(getattr(event, "uid", "")).encode(), encode(event))


def decode_input(topic: str, at: Coordinates, key: bytes | None, value: bytes | None, max_bytes: int) -> Any:
    """The decoded input model, or the dead-letter Output that replaces it."""
    try:
        return decode(topic, value, max_bytes=max_bytes)
    except DecodeError as exc:
        return dead_letter(exc.reason, str(exc), at, key, value)


def dead_letter_unknown_pod(uid: str, at: Coordinates, event: Any, why: str) -> Output:
    detail = f"{at.topic} event for pod {uid}, which pod-updates never announced ({why})"
    return dead_letter("unknown_pod", detail, at, uid.encode(), encode(event))


def refused(reason: str, detail: str, at: Coordinates, event: Any) -> Output:
    """A dead letter for an event the fold refuses (`forged`, `replayed`), with the event's bytes."""
    return dead_letter(reason, detail, at, event.uid.encode(), encode(event))
