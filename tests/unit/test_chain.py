"""The hash chain of journal and pod-status-history (schemas/chain.py): the link arithmetic as
vectors, the walk's verdict on every kind of record an honest writer or an attacker leaves, and
the batch's sealing of its outputs (streams/batch.py seal)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from podledger.schemas import chain, models
from podledger.schemas.chain import GENESIS, ChainWalk, Verdict, link, link_hash, read_link
from podledger.streams.batch import Batch
from podledger.streams.fold import Output
from podledger.streams.seal import seal
from tests import pods

POD = pods.pod(("c",), name="web", uid="u-1", node="n1")
VERSION = pods.versioned(POD, "n1", 4, {"phase": "Running"})
ENTRY = models.JournalEntry("pleg:ContainerStarted", "pleg", 0, 9, 1_700_000_000_000, {"uid": "u-1"})
LETTER = models.DeadLetter("schema", "bad", "pleg", 0, 10, None, None, 1_700_000_000_000)

# Recorded once: the wire format of a link may never change silently (consumers recompute it).
VECTORS = [
    (GENESIS, b"u-1", b'{"a":1}', "2dfd4342af96143bc1700600756b31d3dd706912789b445313c18f6c67609ea6"),
    (
        bytes.fromhex("2dfd4342af96143bc1700600756b31d3dd706912789b445313c18f6c67609ea6"),
        b"u-1",
        None,
        "80adb6568027d204c29b4b5b2ee79ef1d28024bb15e87d690fcbb6defbc18a64",
    ),
    (GENESIS, b"", b"", "2c34ce1df23b838c5abf2a7f6437cca3d3067ed509ff25f11df6b11b582b51eb"),
]


@pytest.mark.parametrize(("prev", "key", "value", "expected"), VECTORS)
def test_link_hash_vectors(prev: bytes, key: bytes, value: bytes | None, expected: str) -> None:
    assert link_hash(prev, key, value).hex() == expected


def test_link_hash_is_sha256_of_prev_and_length_prefixed_key_and_value() -> None:
    prev, key, value = bytes(range(32)), b"uid", b"value"
    body = prev + (3).to_bytes(4, "big") + key + (5).to_bytes(4, "big") + value
    assert link_hash(prev, key, value) == hashlib.sha256(body).digest()
    # Where the key ends and the value begins is part of what is hashed.
    assert link_hash(prev, b"ab", b"c") != link_hash(prev, b"a", b"bc")
    assert link_hash(prev, b"k", b"") != link_hash(prev, b"k", None)


def test_link_headers_round_trip_and_malformed_ones_are_refused() -> None:
    digest, headers = link(GENESIS, b"k", b"v")
    assert dict(headers) == {
        "podledger-prev": b"0" * 64,
        "podledger-hash": digest.hex().encode(),
    }
    assert read_link([("other", b"x"), *headers]) == (GENESIS, digest)
    assert read_link([("other", b"x")]) is None
    nulled: list[tuple[str, Any]] = [("podledger-prev", None), headers[1]]  # Kafka allows null values
    for bad in ([("podledger-hash", digest.hex().encode())], [("podledger-prev", b"zz"), headers[1]], nulled):
        with pytest.raises(ValueError):
            read_link(bad)
    assert chain.head_after(headers) == digest
    assert chain.head_after([]) == GENESIS


Record = tuple[bytes, bytes | None, list[tuple[str, bytes]]]


def written(*values: bytes, head: bytes = GENESIS) -> list[Record]:
    """Records as the fold writes them: each chained on the one before."""
    out: list[Record] = []
    for value in values:
        head, headers = link(head, b"u-1", value)
        out.append((b"u-1", value, headers))
    return out


def verdicts(records: list[Record], from_start: bool = True) -> list[Verdict]:
    walk = ChainWalk(from_start)
    return [walk.check(*record)[0] for record in records]


def test_an_honest_chain_is_linked_throughout() -> None:
    assert verdicts(written(b"a", b"b", b"c")) == [Verdict.LINKED] * 3


def test_exact_resends_are_duplicates_and_the_chain_goes_on() -> None:
    a, b, c = written(b"a", b"b", b"c")
    d = written(b"d", head=chain.head_after(c[2]))[0]
    # deliver_batched resends a partition from its first failure on: b and c land twice.
    assert verdicts([a, b, c, b, c, d]) == [Verdict.LINKED] * 3 + [Verdict.DUPLICATE] * 2 + [Verdict.LINKED]
    # A worker killed mid-resend leaves b last; its successor chains on b (the last record).
    after_b = written(b"d", head=chain.head_after(b[2]))[0]
    assert verdicts([a, b, c, b, after_b]) == [*[Verdict.LINKED] * 3, Verdict.DUPLICATE, Verdict.LINKED]


def test_a_dropped_record_breaks_the_link_of_the_one_after_it_once() -> None:
    a, b, c, d = written(b"a", b"b", b"c", b"d")
    assert verdicts([a, c, d]) == [Verdict.LINKED, Verdict.BROKEN, Verdict.LINKED]
    assert verdicts([b, c, d]) == [Verdict.BROKEN, Verdict.LINKED, Verdict.LINKED]  # the first one
    assert verdicts([b, c, d], from_start=False) == [Verdict.LINKED] * 3  # older records expired


def test_an_edited_record_no_longer_gives_its_hash() -> None:
    a, b, c = written(b"a", b"b", b"c")
    edited = (b[0], b'{"phase":"Failed"}', b[2])
    assert verdicts([a, edited, c]) == [Verdict.LINKED, Verdict.ALTERED, Verdict.LINKED]
    rekeyed = (b"u-2", b[1], b[2])
    assert verdicts([a, rekeyed, c]) == [Verdict.LINKED, Verdict.ALTERED, Verdict.LINKED]


def test_records_without_a_link_are_tolerated_only_before_the_chain_began() -> None:
    a, b = written(b"a", b"b")
    plain: Record = (b"u-1", b"old", [])
    assert verdicts([plain, plain, a, b]) == [Verdict.UNCHAINED] * 2 + [Verdict.LINKED] * 2
    assert verdicts([a, plain, b]) == [Verdict.LINKED, Verdict.BROKEN, Verdict.LINKED]
    # After unchained records the chain must begin at GENESIS, even when older records expired.
    c = written(b"c", head=bytes(31) + b"\x01")[0]
    assert verdicts([plain, c], from_start=False) == [Verdict.UNCHAINED, Verdict.BROKEN]


def test_an_appended_record_chained_on_the_head_is_linked_and_a_naive_one_is_not() -> None:
    """The chain proves order and completeness; an attacker who can write may extend it (the
    re-fold of podledger verify judges the content), but cannot point anywhere else."""
    a, b = written(b"a", b"b")
    forged = written(b"forged", head=chain.head_after(b[2]))[0]
    naive = written(b"forged")[0]  # chained on GENESIS
    assert verdicts([a, b, forged]) == [Verdict.LINKED] * 3
    assert verdicts([a, b, naive]) == [Verdict.LINKED, Verdict.LINKED, Verdict.BROKEN]


def test_malformed_link_headers_are_reported() -> None:
    walk = ChainWalk()
    verdict, detail = walk.check(b"k", b"v", [("podledger-prev", b"00"), ("podledger-hash", b"11")])
    assert verdict == Verdict.MALFORMED and "32-byte" in detail


def test_seal_chains_journal_and_history_per_partition_and_marks_versions_as_cloudevents() -> None:
    version = VERSION
    batch = Batch(
        journal=[
            (0, Output("journal", "u-1", ENTRY, [("origin", b"x")])),
            (1, Output("journal", "u-2", ENTRY)),
        ],
        outputs=[
            (0, Output("pod-status", "u-1", version)),
            (0, Output("pod-status-history", "u-1", version)),
            (0, Output("pod-status", "u-1", None)),
            (0, Output("dead-letter", "u-1", LETTER)),
            (0, Output("pod-status-history", "u-1", version)),
        ],
    )
    start = bytes(31) + b"\x07"
    heads = {("journal", 0): start, ("journal", 1): GENESIS, ("pod-status-history", 0): GENESIS}
    seal(batch, heads, "prod.")
    j0, j1 = (dict(out.headers or []) for _, out in batch.journal)
    assert j0["origin"] == b"x"  # the proof of origin stays
    assert j0["podledger-prev"] == start.hex().encode()
    assert heads[("journal", 0)] == link_hash(start, b"u-1", batch.journal[0][1].wire_value())
    assert j1["podledger-prev"] == b"0" * 64
    status, h1, tombstone, letter, h2 = (out.headers for _, out in batch.outputs)
    assert tombstone is None and letter is None
    assert status is not None and not any(name.startswith("podledger-") for name, _ in status)
    assert dict(status)["ce_id"] == f"{version.uid}/{version.version}".encode()
    assert dict(h1 or [])["ce_type"] == b"io.podledger.pod.status.v1"
    # The two history records are linked in the order they will be published.
    assert dict(h2 or [])["podledger-prev"] == dict(h1 or [])["podledger-hash"]
    assert heads[("pod-status-history", 0)].hex().encode() == dict(h2 or [])["podledger-hash"]


def test_seal_refuses_a_partition_whose_head_was_never_read() -> None:
    batch = Batch(journal=[(3, Output("journal", "u-1", ENTRY))])
    with pytest.raises(KeyError, match="partition 3"):
        seal(batch, {}, "p.")
