"""What `podledger serve` reads of the values of pod-status and pod-updates: only the fields a Pod
object is made of, without building the schema models (validating and building them was most of
the cost of loading a large snapshot). A value without those fields is skipped as undecodable.

Pure: bytes in, small values out (serve's Decoding of read/client/reader.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from podledger.read.client.pods import DROPPED_METADATA
from podledger.schemas import DecodeError
from podledger.types import JSONDict, PodOp, Topic


@dataclass(frozen=True, slots=True)
class StatusFields:
    """The fields of a VersionedPodStatus a Pod object is made of (read/client/pods.StatusVersion)."""

    uid: str
    namespace: str
    name: str
    node: str
    version: int
    status: JSONDict


_TEXT_FIELDS = ("uid", "namespace", "name", "node")


def _object(topic: str, value: bytes) -> JSONDict:
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise DecodeError("malformed", None, f"{topic}: not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise DecodeError("schema", None, f"{topic}: not an object")
    return obj


def _wrong(topic: str, field: str) -> DecodeError:
    return DecodeError("schema", field, f"{topic}: {field} is missing or of the wrong type")


def status_fields(value: bytes) -> tuple[str, StatusFields]:
    """A pod-status value: its uid and StatusFields."""
    obj = _object(Topic.POD_STATUS, value)
    for name in _TEXT_FIELDS:
        if not isinstance(obj.get(name), str):
            raise _wrong(Topic.POD_STATUS, name)
    version, status = obj.get("version"), obj.get("status")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _wrong(Topic.POD_STATUS, "version")
    if not isinstance(status, dict):
        raise _wrong(Topic.POD_STATUS, "status")
    uid = obj["uid"]
    return uid, StatusFields(uid, obj["namespace"], obj["name"], obj["node"], version, status)


def desired_json(value: bytes) -> tuple[str, bytes | None]:
    """A pod-updates value: the pod's uid, and what a Pod object takes of the desired pod (its
    metadata less the apiserver's bookkeeping, and its spec) as JSON; None for a REMOVE. Kept as
    bytes, a third of the memory of the parsed pod."""
    obj = _object(Topic.POD_UPDATES, value)
    pod = obj.get("pod")
    pod = pod if isinstance(pod, dict) else {}
    meta, spec = pod.get("metadata"), pod.get("spec")
    if not isinstance(meta, dict) or not isinstance(meta.get("uid"), str):
        raise _wrong(Topic.POD_UPDATES, "pod.metadata.uid")
    if obj.get("op") == PodOp.REMOVE:
        return meta["uid"], None
    kept = {
        "metadata": {k: v for k, v in meta.items() if k not in DROPPED_METADATA},
        "spec": spec if isinstance(spec, dict) else {},
    }
    # A copy of exactly its size: orjson's result holds an allocation of at least 4 KiB.
    return meta["uid"], memoryview(orjson.dumps(kept)).tobytes()
