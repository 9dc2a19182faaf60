"""Node secrets and the fold's keyring on disk, and the signer every node-side producer uses.

File formats (both written by `podledger keys new`):

- a node secret file: the node's 32-byte secret in hex, one line, mode 0600, readable only by
  that node's agent (in Kubernetes: a Secret mounted into that node's agent alone);
- the keyring: a JSON object from node name to that node's *status* key in hex, readable only
  by the fold (a Secret mounted into the fold).

The proof itself (headers, MACs, checks) is the contract's: podledger.schemas.origin.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from podledger.config import Settings
from podledger.errors import UserError
from podledger.schemas.origin import SECRET_BYTES, NodeKeys, derive_keys, sign

__all__ = [
    "Signer",
    "load_keyring",
    "load_node_keys",
    "new_secret",
    "write_keyring_entry",
    "write_secret",
]


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def write_secret(path: Path, secret: bytes) -> None:
    """Write a node secret file, readable by its owner only (created so; never world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secret.hex() + "\n")
    path.chmod(0o600)


def _read_secret(path: str) -> bytes:
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise UserError(f"cannot read the node secret file {path}: {exc.strerror}") from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise UserError(f"the node secret file {path} does not hold a hex secret") from None
    if len(secret) < SECRET_BYTES:
        raise UserError(f"the node secret in {path} is shorter than {SECRET_BYTES} bytes")
    return secret


def load_node_keys(settings: Settings) -> NodeKeys | None:
    """This node's keys from PODLEDGER_NODE_SECRET_FILE; None when unset (records go unsigned)."""
    if not settings.node_secret_file:
        return None
    return derive_keys(settings.node, _read_secret(settings.node_secret_file))


def load_keyring(settings: Settings) -> dict[str, bytes] | None:
    """Node name -> status key, from PODLEDGER_KEYRING_FILE; None when unset (origin unchecked)."""
    if not settings.keyring_file:
        return None
    try:
        raw = orjson.loads(Path(settings.keyring_file).read_bytes())
    except OSError as exc:
        raise UserError(f"cannot read the keyring {settings.keyring_file}: {exc.strerror}") from None
    except orjson.JSONDecodeError:
        raise UserError(f"the keyring {settings.keyring_file} is not JSON") from None
    if not isinstance(raw, dict):
        raise UserError(f"the keyring {settings.keyring_file} must be a JSON object of node -> hex key")
    keyring: dict[str, bytes] = {}
    for node, hex_key in raw.items():
        try:
            keyring[str(node)] = bytes.fromhex(str(hex_key))
        except ValueError:
            raise UserError(f"the keyring entry for node {node!r} is not hex") from None
    return keyring


def write_keyring_entry(path: Path, keys: NodeKeys) -> bool:
    """Add or replace `keys.node`'s status key in the keyring file; True if it changed."""
    current: dict[str, str] = orjson.loads(path.read_bytes()) if path.exists() else {}
    wanted = keys.status.hex()
    if current.get(keys.node) == wanted:
        return False
    current[keys.node] = wanted
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(orjson.dumps(current, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    return True


class Signer:
    """Stamps each record a node writes with its proof of origin (schemas/origin.py).

    The sequence number is the wall clock in nanoseconds, forced to rise by at least one per
    record; `floor` raises it past what an earlier agent of this node wrote (seen in the replay),
    so a restarted agent whose clock stepped back is not mistaken for a replay.
    """

    def __init__(self, keys: NodeKeys, clock: Callable[[], int] = time.time_ns) -> None:
        self.keys = keys
        self.clock = clock
        self._last = 0
        self._lock = threading.Lock()  # the prober's threads and the event loop may both sign

    def floor(self, seq: int) -> None:
        with self._lock:
            self._last = max(self._last, seq)

    def next_seq(self) -> int:
        with self._lock:
            self._last = max(self.clock(), self._last + 1)
            return self._last

    def headers(self, topic: str, key: bytes | None, value: bytes | None) -> list[tuple[str, bytes]]:
        return sign(self.keys, topic, self.next_seq(), key, value)
