"""Hash chains over a topic partition: the tamper evidence of `journal` and `pod-status-history`.

Every record the fold writes to those topics carries two headers:

- `podledger-prev`: the hash of the record before it on its partition (GENESIS, 64 zeros, for
  the first one), and
- `podledger-hash`: SHA-256(prev ‖ len(key) ‖ key ‖ len(value) ‖ value), the lengths as 4-byte
  big-endian integers (so no two (key, value) pairs hash alike), both headers in lowercase hex.

The values keep their v1 schemas; any consumer can recompute a link. An edited record no longer
matches its own hash, and a record dropped from a copy leaves its successor pointing at a hash
that is nowhere: `ChainWalk` names both by offset.

Writers resend (podledger.delivery.deliver_batched resends a partition from its first failure
on), so a record may appear twice: an exact re-send has the same key, value and prev as an earlier record,
hence the same hash, and is reported as a duplicate, not as tampering. The chain then goes on
from it, as a writer restored from the partition's last record (the re-sent one) would.
"""

from __future__ import annotations

import hashlib
from binascii import hexlify
from collections import OrderedDict
from collections.abc import Iterable
from enum import StrEnum

PREV_HEADER = "podledger-prev"
HASH_HEADER = "podledger-hash"
GENESIS = bytes(32)
DUPLICATE_WINDOW = 1 << 16  # recent hashes a re-send is recognised against (a resend is recent)

Headers = Iterable[tuple[str, bytes]]


def link_hash(prev: bytes, key: bytes, value: bytes | None) -> bytes:
    """The hash of a record chained after `prev` (a tombstone hashes as a length of 2**32 - 1)."""
    size = 0xFFFFFFFF if value is None else len(value)
    digest = hashlib.sha256(prev)
    digest.update(b"".join((len(key).to_bytes(4, "big"), key, size.to_bytes(4, "big"))))
    if value:  # fed as it is: a value is most of what is hashed, and not copied to be joined
        digest.update(value)
    return digest.digest()


def link(prev: bytes, key: bytes, value: bytes | None) -> tuple[bytes, list[tuple[str, bytes]]]:
    """(the record's hash, which is the partition's new head; the headers that carry the link)."""
    digest = link_hash(prev, key, value)
    return digest, [(PREV_HEADER, hexlify(prev)), (HASH_HEADER, hexlify(digest))]


def read_link(headers: Headers) -> tuple[bytes, bytes] | None:
    """(prev, hash) from a record's headers; None when it carries no link. ValueError when a link
    header is not 64 hex digits."""
    found = {name: value for name, value in headers if name in (PREV_HEADER, HASH_HEADER)}
    if not found:
        return None
    raw_prev, raw_hash = found.get(PREV_HEADER), found.get(HASH_HEADER)
    if not isinstance(raw_prev, bytes) or not isinstance(raw_hash, bytes):  # missing, or null (Kafka allows)
        raise ValueError("malformed chain headers: a link header is missing or has no value")
    try:
        prev, digest = bytes.fromhex(raw_prev.decode()), bytes.fromhex(raw_hash.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed chain headers: {exc}") from None
    if len(prev) != 32 or len(digest) != 32:
        raise ValueError("malformed chain headers: not 32-byte hashes")
    return prev, digest


def head_after(headers: Headers) -> bytes:
    """The head a writer chains on after a partition's last record: its hash, or GENESIS when it
    carries none (records written before chains existed, or none at all)."""
    try:
        found = read_link(headers)
    except ValueError:
        found = None
    return GENESIS if found is None else found[1]


class Verdict(StrEnum):
    LINKED = "linked"  # extends the chain
    DUPLICATE = "duplicate"  # an exact re-send of a recent record
    UNCHAINED = "unchained"  # no link, before the partition's chain began (written before chains)
    ALTERED = "altered"  # its key or value no longer give its hash
    BROKEN = "broken"  # its prev is not the record before it: a record is missing, or it was injected
    MALFORMED = "malformed"  # link headers that cannot be read


class ChainWalk:
    """Checks one partition's records in offset order.

    `from_start`: the walk begins at the partition's first offset ever (0), so the chain must
    begin at GENESIS. Otherwise the first record read is the anchor (older records expired), as
    is a record chained on GENESIS after unchained ones (the chain began after an upgrade)."""

    def __init__(self, from_start: bool = True) -> None:
        self.head: bytes | None = GENESIS if from_start else None
        self.chained = False  # a chained record was seen: unchained ones are out of place from now on
        self._recent: OrderedDict[bytes, None] = OrderedDict()

    def check(self, key: bytes, value: bytes | None, headers: Headers) -> tuple[Verdict, str]:
        """The verdict on the next record, and why (empty when it is linked)."""
        try:
            found = read_link(headers)
        except ValueError as exc:
            return Verdict.MALFORMED, str(exc)
        if found is None:
            if self.chained:
                return Verdict.BROKEN, "a record without chain headers inside the chain"
            self.head = GENESIS  # the chain, when it begins, begins at GENESIS
            return Verdict.UNCHAINED, ""
        prev, digest = found
        head = self.head
        self.head, self.chained = digest, True  # resynchronise: one problem is reported once
        if link_hash(prev, key, value) != digest:
            return Verdict.ALTERED, "its key or value do not give its hash (edited after it was written)"
        if digest in self._recent:
            return Verdict.DUPLICATE, "an exact re-send of an earlier record"
        self._remember(digest)
        if head is None or prev == head:
            return Verdict.LINKED, ""
        return (
            Verdict.BROKEN,
            f"its prev {prev.hex()[:16]}… is not the hash of the record before it {head.hex()[:16]}…"
            " (a record is missing before it, or it was written by someone else)",
        )

    def _remember(self, digest: bytes) -> None:
        self._recent[digest] = None
        if len(self._recent) > DUPLICATE_WINDOW:
            self._recent.popitem(last=False)
