"""What `podledger serve` keeps of one pod version, and the answers made of it.

A PodDoc holds the Pod object as JSON, built once per version and shared by every list, get and
watch event; its Table row's fixed cells; and the few fields selectors read. No parsed pod is
kept: a server of 100,000 pods holds bytes, not a tree of dicts per pod. A list is written as a
stream of these bytes, joined in chunks.

Pure: documents and times in, bytes out; the server (read/kubeapi/server.py) writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import orjson

from podledger.read.client.pods import StatusVersion, pod_object
from podledger.read.client.select import PodFilter, selectable
from podledger.read.kubeapi.table import (
    TABLE_CLOSE,
    Clock,
    RowParts,
    partial_metadata,
    row_basis,
    row_json,
    row_parts,
    table_open,
)
from podledger.types import JSONDict

_HEAD = b'{"kind":"Pod","apiVersion":"v1","metadata":'
_RV_KEY = b'{"resourceVersion":'  # first in the metadata, so another one can be put in its place
CHUNK_BYTES = 1 << 20  # watch events waiting together are written in chunks of about this size
ROWS_PER_CHUNK = 1000  # a list is written in chunks of this many pods


@dataclass(frozen=True, slots=True)
class PodDoc:
    """One version of one pod as it is served, at resourceVersion `rv`."""

    uid: str
    namespace: str
    name: str
    rv: str
    json: bytes  # the Pod object; its metadata is json[len(_HEAD):meta_end]
    meta_end: int
    row: RowParts
    view: JSONDict  # what selectors read (select.selectable)


def pod_doc(vs: StatusVersion, desired: JSONDict | None, rv: str) -> PodDoc:
    """The PodDoc of a status version joined with its desired pod (read/client/pods.pod_object)."""
    pod = pod_object(vs, desired, rv)
    meta = orjson.dumps({"resourceVersion": rv, **pod["metadata"]})
    spec, status = orjson.dumps(pod["spec"]), orjson.dumps(pod["status"])
    json = b"".join((_HEAD, meta, b',"spec":', spec, b',"status":', status, b"}"))
    return PodDoc(
        vs.uid,
        vs.namespace,
        vs.name,
        rv,
        json,
        len(_HEAD) + len(meta),
        row_parts(row_basis(pod)),
        selectable(pod),
    )


def pod_json(doc: PodDoc, rv: str | None = None) -> bytes:
    """The Pod; with `rv`, at that resourceVersion instead of its own (a DELETED event, or the
    current pods of a watch, carry the event's)."""
    if rv is None or rv == doc.rv:
        return doc.json
    cut = len(_HEAD) + len(_RV_KEY) + len(orjson.dumps(doc.rv))
    return b"".join((_HEAD, _RV_KEY, orjson.dumps(rv), doc.json[cut:]))


def metadata_json(doc: PodDoc, rv: str | None = None) -> bytes:
    json = pod_json(doc, rv)
    return json[len(_HEAD) : doc.meta_end + len(json) - len(doc.json)]


def metadata(doc: PodDoc) -> JSONDict:
    """The Pod's metadata, parsed (for tests and logs; answers use the bytes)."""
    parsed: JSONDict = orjson.loads(metadata_json(doc))
    return parsed


def table_row_json(doc: PodDoc, rv: str | None, include: str, group_version: str, clock: Clock) -> bytes:
    """The pod's Table row; its object as the request's includeObject asks: the pod's metadata
    (the default), the whole pod, or nothing."""
    if include == "None":
        obj = b"null"
    elif include == "Object":
        obj = pod_json(doc, rv)
    else:
        obj = partial_metadata(metadata_json(doc, rv), group_version)
    return row_json(doc.row, obj, clock)


def selected(docs: Iterable[PodDoc], pod_filter: PodFilter) -> list[PodDoc]:
    if pod_filter == PodFilter():
        return list(docs)
    return [d for d in docs if pod_filter.matches(d.view)]


_LIST_OPEN = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":'


def pod_list_chunks(docs: list[PodDoc], rv: str, per_chunk: int = ROWS_PER_CHUNK) -> Iterator[bytes]:
    """A PodList, in chunks of `per_chunk` pods."""
    yield _LIST_OPEN + orjson.dumps(rv) + b'},"items":['
    for at in range(0, len(docs), per_chunk):
        yield (b"," if at else b"") + b",".join([d.json for d in docs[at : at + per_chunk]])
    yield b"]}"


def table_chunks(
    docs: list[PodDoc],
    rv: str,
    group_version: str,
    include: str,
    clock: Clock,
    per_chunk: int = ROWS_PER_CHUNK,
) -> Iterator[bytes]:
    """A Table of pods, in chunks of `per_chunk` rows."""
    row: Callable[[PodDoc], bytes]
    if include == "Metadata":  # what kubectl asks for: made here from the ready pieces alone
        obj = (
            b',"object":{"kind":"PartialObjectMetadata","apiVersion":'
            + orjson.dumps(group_version)
            + b',"metadata":'
        )

        def row(d: PodDoc) -> bytes:
            meta = memoryview(d.json)[len(_HEAD) : d.meta_end]
            return b"".join((d.row.head, clock.cells(d.row), d.row.tail, obj, meta, b"}}"))
    else:

        def row(d: PodDoc) -> bytes:
            return table_row_json(d, None, include, group_version, clock)

    yield table_open(rv, group_version)
    for at in range(0, len(docs), per_chunk):
        yield (b"," if at else b"") + b",".join([row(d) for d in docs[at : at + per_chunk]])
    yield TABLE_CLOSE


def chunks(pieces: Iterable[bytes], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The pieces joined into chunks of about `size` bytes, for one write each."""
    buffer: list[bytes] = []
    held = 0
    for piece in pieces:
        buffer.append(piece)
        held += len(piece)
        if held >= size:
            yield b"".join(buffer)
            buffer.clear()
            held = 0
    if buffer:
        yield b"".join(buffer)


def event_json(kind: str, obj: bytes) -> bytes:
    """One line of a watch: `{"type": kind, "object": obj}`."""
    return b'{"type":"' + kind.encode() + b'","object":' + obj + b"}\n"


def watch_object(
    doc: PodDoc, rv: str, group_version: str | None, include: str, clock: Clock, *, headers: bool
) -> bytes:
    """A watch event's object: the Pod, or a Table of its one row."""
    if group_version is None:
        return pod_json(doc, rv)
    row = table_row_json(doc, rv, include, group_version, clock)
    return table_open(rv, group_version, headers=headers) + row + TABLE_CLOSE
