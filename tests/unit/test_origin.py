"""Proof of origin (schemas/origin.py, podledger/keys.py): who wrote an ingress record, and when.

Each attack here is one a node with write access to the ingress topics could try against another
node: sign as someone else, alter a signed record, move it to another topic, or use the fold's
keyring to make a node act."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from podledger.config import Settings
from podledger.errors import UserError
from podledger.keys import Signer, load_keyring, load_node_keys, new_secret, write_keyring_entry, write_secret
from podledger.schemas.origin import (
    HEADER_MAC,
    HEADER_NODE,
    HEADER_SEQ,
    Forged,
    Proof,
    claimed,
    derive_keys,
    proof_headers,
    sign,
    verify,
    verify_self,
)

A = derive_keys("node-a", b"a" * 32)
B = derive_keys("node-b", b"b" * 32)
KEYRING = {"node-a": A.status, "node-b": B.status}
KEY, VALUE = b"uid-1", b'{"uid":"uid-1"}'


def test_a_signed_record_proves_its_writer_and_sequence() -> None:
    headers = sign(B, "pleg", 42, KEY, VALUE)
    assert verify(KEYRING, "pleg", KEY, VALUE, headers) == Proof("node-b", 42)
    assert verify_self(B, "pleg", KEY, VALUE, headers) == Proof("node-b", 42)
    assert verify(KEYRING, "pleg", KEY, VALUE, dict(headers)) == Proof("node-b", 42)  # a mapping too


@pytest.mark.parametrize(
    "change",
    ["value", "key", "topic", "sequence", "node header", "mac", "no headers", "unknown node"],
)
def test_any_change_to_a_signed_record_is_forged(change: str) -> None:
    topic, key, value = "pod-lifecycle", KEY, VALUE
    headers = dict(sign(B, topic, 7, key, value))
    if change == "value":
        value = b'{"uid":"uid-2"}'
    elif change == "key":
        key = b"uid-2"
    elif change == "topic":
        topic = "pleg"
    elif change == "sequence":
        headers[HEADER_SEQ] = (8).to_bytes(8, "big")
    elif change == "node header":
        headers[HEADER_NODE] = b"node-a"  # claims A wrote what B signed
    elif change == "mac":
        headers[HEADER_MAC] = bytes(32)
    elif change == "no headers":
        headers = {}
    else:
        headers[HEADER_NODE] = b"node-z"
    with pytest.raises(Forged):
        verify(KEYRING, topic, key, value, headers)


def test_one_node_cannot_sign_for_another() -> None:
    """node-a signs with its own key but puts node-b in the header: the MAC is checked under B's key."""
    headers = dict(sign(A, "pleg", 1, KEY, VALUE))
    headers[HEADER_NODE] = b"node-b"
    with pytest.raises(Forged):
        verify(KEYRING, "pleg", KEY, VALUE, headers)


def test_the_keyring_cannot_make_a_node_act() -> None:
    """Whoever holds the fold's keyring can produce status MACs for node-b, but not the self MAC that
    node-b requires before it acts on a record."""
    forged = dict(sign(B, "pod-updates", 9, KEY, VALUE))
    import hmac as hmac_module

    from podledger.schemas.origin import HEADER_SELF, _message

    forged[HEADER_SELF] = hmac_module.digest(
        KEYRING["node-b"], _message("pod-updates", "node-b", 9, KEY, VALUE), "sha256"
    )
    verify(KEYRING, "pod-updates", KEY, VALUE, forged)  # the fold accepts it ...
    with pytest.raises(Forged):
        verify_self(B, "pod-updates", KEY, VALUE, forged)  # ... node-b does not


def test_a_node_accepts_only_its_own_records() -> None:
    with pytest.raises(Forged):
        verify_self(B, "pleg", KEY, VALUE, sign(A, "pleg", 1, KEY, VALUE))


def test_keys_differ_per_node_and_purpose_and_never_print() -> None:
    same_secret = derive_keys("node-c", b"a" * 32)
    assert len({A.status, A.self_, B.status, B.self_, same_secret.status}) == 5
    assert A.status.hex() not in repr(A) and A.self_.hex() not in repr(A)
    with pytest.raises(ValueError):
        derive_keys("node-a", b"short")


def test_claimed_reads_the_journal_headers_without_keys() -> None:
    assert claimed(proof_headers(Proof("node-b", 5))) == Proof("node-b", 5)
    assert claimed([]) is None


def test_signer_sequence_rises_even_when_the_clock_steps_back() -> None:
    ticks = iter([100, 50, 50, 400])
    signer = Signer(A, clock=lambda: next(ticks))
    assert [signer.next_seq() for _ in range(3)] == [100, 101, 102]
    signer.floor(1000)  # an earlier agent of this node got this far
    assert signer.next_seq() == 1001


def test_key_files_round_trip_and_are_private(tmp_path: Path) -> None:
    secret_file, keyring_file = tmp_path / "node-a.key", tmp_path / "keyring.json"
    write_secret(secret_file, new_secret())
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    settings = Settings(node="node-a", node_secret_file=str(secret_file), keyring_file=str(keyring_file))
    keys = load_node_keys(settings)
    assert keys is not None
    assert write_keyring_entry(keyring_file, keys) is True
    assert write_keyring_entry(keyring_file, keys) is False  # idempotent
    assert stat.S_IMODE(keyring_file.stat().st_mode) == 0o600
    assert load_keyring(settings) == {"node-a": keys.status}
    headers = sign(keys, "pleg", 3, KEY, VALUE)
    assert verify(load_keyring(settings) or {}, "pleg", KEY, VALUE, headers).node == "node-a"


@pytest.mark.parametrize(
    ("content", "message"),
    [("not hex", "hex secret"), ("abcd", "shorter than")],
)
def test_bad_secret_files_are_user_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.key"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_node_keys(Settings(node="n", node_secret_file=str(path)))
    with pytest.raises(UserError, match="cannot read"):
        load_node_keys(Settings(node="n", node_secret_file=str(tmp_path / "missing")))


def test_bad_keyrings_are_user_errors(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    for content, message in [("[1]", "JSON object"), ("{", "not JSON"), (json.dumps({"n": "zz"}), "not hex")]:
        path.write_text(content)
        with pytest.raises(UserError, match=message):
            load_keyring(Settings(node="n", keyring_file=str(path)))
