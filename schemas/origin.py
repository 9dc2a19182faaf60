"""Proof of origin for ingress records: which node wrote a record, and in what order.

Kafka ACLs say which *principal* may write a topic, not which node's pods a record may speak
for; every node agent needs write access to the same ingress topics. So each record a node
writes carries headers that prove its writer (the threat model: docs/architecture.md, "Node
isolation on shared topics"):

    podledger-node   the writing node's name
    podledger-seq    a number that rises with every record the node writes (8 bytes, big endian)
    podledger-mac    HMAC-SHA256 under the node's *status key* over topic, node, seq, key, value
    podledger-self   HMAC-SHA256 under the node's *self key* over the same bytes

Both keys derive from one per-node secret that only that node holds. The fold holds every
node's status key (the keyring) and checks `podledger-mac`: it already decides every pod's
status, so being able to forge a node's status reports gives it nothing new. Only the node
itself holds its self key, and it acts (runs containers) only on records whose
`podledger-self` it can check: a fold, or anyone holding the keyring, still cannot make a node
run anything. HMAC costs a few microseconds per record; a public-key signature costs about a
hundred on the machines podledger is benchmarked on, which the fold would pay for every event.

Pure: plain bytes in, plain data out.
"""

from __future__ import annotations

import hmac
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

HEADER_NODE = "podledger-node"
HEADER_SEQ = "podledger-seq"
HEADER_MAC = "podledger-mac"
HEADER_SELF = "podledger-self"

Headers = Iterable[tuple[str, bytes]] | Mapping[str, bytes]
"""Kafka record headers: (name, value) pairs as aiokafka hands them over, or a mapping."""

_DOMAIN = b"podledger origin v1\x00"
SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class NodeKeys:
    """The two keys one node derives from its secret. `status` goes on the fold's keyring;
    `self_` never leaves the node."""

    node: str
    status: bytes
    self_: bytes

    def __repr__(self) -> str:  # keys never reach a log line
        return f"NodeKeys(node={self.node!r})"


def derive_keys(node: str, secret: bytes) -> NodeKeys:
    """Both keys of `node` from its secret (HMAC-SHA256 as a key derivation function)."""
    if len(secret) < SECRET_BYTES:
        raise ValueError(f"a node secret has at least {SECRET_BYTES} bytes, got {len(secret)}")
    label = node.encode()

    def derive(purpose: bytes) -> bytes:
        return hmac.digest(secret, _DOMAIN + purpose + b"\x00" + label, "sha256")

    return NodeKeys(node, derive(b"status"), derive(b"self"))


def _message(topic: str, node: str, seq: int, key: bytes | None, value: bytes | None) -> bytes:
    """The bytes a MAC covers; every field is length-prefixed so no two inputs collide."""
    parts = [topic.encode(), node.encode(), struct.pack(">Q", seq), key or b"", value or b""]
    return _DOMAIN + b"".join(struct.pack(">I", len(p)) + p for p in parts)


def sign(
    keys: NodeKeys, topic: str, seq: int, key: bytes | None, value: bytes | None
) -> list[tuple[str, bytes]]:
    """The headers that prove `keys.node` wrote this record of logical topic `topic`."""
    message = _message(topic, keys.node, seq, key, value)
    return [
        (HEADER_NODE, keys.node.encode()),
        (HEADER_SEQ, struct.pack(">Q", seq)),
        (HEADER_MAC, hmac.digest(keys.status, message, "sha256")),
        (HEADER_SELF, hmac.digest(keys.self_, message, "sha256")),
    ]


@dataclass(frozen=True, slots=True)
class Proof:
    """A record's proven writer and its sequence number."""

    node: str
    seq: int


class Forged(Exception):
    """A record whose origin cannot be proven; the message says why."""


def _claim(headers: Headers) -> tuple[str, int, dict[str, bytes]]:
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    # A header may have a null value (the consumer gives None): such a header proves nothing.
    found = {
        name: value for name, value in pairs if name.startswith("podledger-") and isinstance(value, bytes)
    }
    raw_node, raw_seq = found.get(HEADER_NODE), found.get(HEADER_SEQ)
    if raw_node is None or raw_seq is None or len(raw_seq) != 8:
        raise Forged("the record carries no proof of origin (podledger-node/-seq/-mac headers)")
    try:
        node = raw_node.decode()
    except UnicodeDecodeError:
        raise Forged("the podledger-node header is not UTF-8") from None
    return node, struct.unpack(">Q", raw_seq)[0], found


def verify(
    keyring: Mapping[str, bytes], topic: str, key: bytes | None, value: bytes | None, headers: Headers
) -> Proof:
    """The proven writer of a record, checked with its node's status key; raises Forged."""
    node, seq, found = _claim(headers)
    status_key = keyring.get(node)
    if status_key is None:
        raise Forged(f"node {node!r} is not on the keyring")
    expected = hmac.digest(status_key, _message(topic, node, seq, key, value), "sha256")
    if not hmac.compare_digest(expected, found.get(HEADER_MAC, b"")):
        raise Forged(f"the record's MAC does not match node {node!r}'s key")
    return Proof(node, seq)


def verify_self(
    keys: NodeKeys, topic: str, key: bytes | None, value: bytes | None, headers: Headers
) -> Proof:
    """Check that `keys.node` itself wrote this record (its self key); raises Forged."""
    node, seq, found = _claim(headers)
    if node != keys.node:
        raise Forged(f"written by node {node!r}, not by {keys.node!r}")
    expected = hmac.digest(keys.self_, _message(topic, node, seq, key, value), "sha256")
    if not hmac.compare_digest(expected, found.get(HEADER_SELF, b"")):
        raise Forged(f"the record's self MAC does not match node {node!r}'s key")
    return Proof(node, seq)


def claimed(headers: Headers) -> Proof | None:
    """The writer and sequence a record's headers claim, unchecked (for records the fold already
    checked, such as its own journal entries); None when it carries none."""
    try:
        node, seq, _ = _claim(headers)
    except Forged:
        return None
    return Proof(node, seq)


def proof_headers(proof: Proof) -> list[tuple[str, bytes]]:
    """The unchecked claim headers the fold copies onto a journal entry."""
    return [(HEADER_NODE, proof.node.encode()), (HEADER_SEQ, struct.pack(">Q", proof.seq))]
