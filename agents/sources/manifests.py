"""Static pod manifests, pure: a decoded manifest to validated, defaulted pods or a one-line reason, and
what the file source remembers between rescans.

Upstream pkg/kubelet/config/common.go (tryDecodeSinglePod, tryDecodePodList, applyDefaults and the
validation that follows), file.go and http.go; docs/kubelet-rules.md#pod-config-sources states the rules
and where podledger differs. Decoding the YAML text is the edge's job
(agents/sources/manifest_decoding.py): it hands over the document as plain Python data, and nothing
here does I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from podledger.agents.sources.pod_config import FILE_SOURCE, HTTP_SOURCE, apply_static_defaults
from podledger.types import JSONDict

# Upstream maxConfigLength: a manifest file, or a manifest URL's body, is read up to 10 MiB. The same
# bound applies to a YAML document with every alias expanded (see expanded_size in manifest_decoding.py).
MAX_MANIFEST_BYTES = 10 * 1024 * 1024
# A defaulted pod as JSON. It travels whole in one pod-updates message and becomes a mirror pod, so it
# must stay well under Kafka's default 1 MiB message and the apiserver's object limit.
MAX_POD_BYTES = 512 * 1024
# Nesting levels of a manifest; a real Pod needs about a dozen.
MAX_DEPTH = 64
MAX_INT = 2**63 - 1  # JSON numbers the apiserver (int64) and orjson accept

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class ManifestError(ValueError):
    """A manifest was refused; the message says why, in one line."""


def describe(value: Any) -> str:
    """What a value is, in a user's words ("a string", "a list", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def check_json_shape(doc: Any, path: str = "", depth: int = 0) -> None:
    """The document is plain JSON: string keys only; values strings, int64 integers, finite numbers,
    booleans, null, lists and objects; nested at most MAX_DEPTH levels."""
    where = path or "the manifest"
    if depth > MAX_DEPTH:
        raise ManifestError(f"the manifest is nested deeper than {MAX_DEPTH} levels")
    if isinstance(doc, dict):
        for key, value in doc.items():
            if not isinstance(key, str):
                raise ManifestError(f"{where}: key {key!r} is {describe(key)}; keys must be strings")
            check_json_shape(value, _at(path, key), depth + 1)
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            check_json_shape(value, _at(path, i), depth + 1)
    elif isinstance(doc, bool) or doc is None or isinstance(doc, str):
        return
    elif isinstance(doc, int):
        if not -MAX_INT - 1 <= doc <= MAX_INT:
            raise ManifestError(f"{where}: {doc} does not fit a 64-bit integer")
    elif isinstance(doc, float):
        if not math.isfinite(doc):
            raise ManifestError(f"{where}: {doc} is not a JSON number")
    else:
        raise ManifestError(f"{where} is {describe(doc)}, which JSON cannot hold")


def _object(value: Any, path: str, *, required: bool = False) -> JSONDict:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise ManifestError(f"{path} must be an object, not {describe(value)}")
    return value


def _name(value: Any, path: str, *, subdomain: bool) -> str:
    """A DNS-1123 label (63 characters at most) or subdomain (253)."""
    kind, pattern, limit = ("subdomain", _SUBDOMAIN, 253) if subdomain else ("label", _LABEL, 63)
    if value is None or value == "":
        raise ManifestError(f"{path} is missing")
    if not isinstance(value, str):
        raise ManifestError(f"{path} must be a string, not {describe(value)}")
    if len(value) > limit or not pattern.fullmatch(value):
        raise ManifestError(
            f"{path} {value[:80]!r} is not a DNS-1123 {kind}: at most {limit} lowercase letters, digits"
            + (", '-' and '.'" if subdomain else " and '-'")
            + ", starting and ending with a letter or digit"
        )
    return value


def _string_map(value: Any, path: str) -> None:
    for key, item in _object(value, path).items():
        if not isinstance(item, str):
            raise ManifestError(f"{path}.{key} must be a string, not {describe(item)}")


def _strings(value: Any, path: str) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ManifestError(f"{path} must be a list of strings")


def _named_list(value: Any, path: str, seen: dict[str, str], what: str) -> list[JSONDict]:
    """A list of objects whose `name` is a DNS-1123 label, unique among `seen` (name -> where)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ManifestError(f"{path} must be a list, not {describe(value)}")
    items: list[JSONDict] = []
    for i, item in enumerate(value):
        item_path = _at(path, i)
        item = _object(item, item_path, required=True)
        name = _name(item.get("name"), f"{item_path}.name", subdomain=False)
        if name in seen:
            raise ManifestError(f"{item_path}.name {name!r} repeats the {what} name of {seen[name]}")
        seen[name] = item_path
        items.append(item)
    return items


def validate_pod(pod: Any, path: str = "", *, typed: bool = True) -> JSONDict:
    """A Pod the kubelet would accept from a file or a URL, or a ManifestError saying what is wrong.

    `typed`: the document must say `apiVersion: v1` and `kind: Pod` (an item of a PodList need not).
    The checks are those of upstream's decoding and pod validation that podledger depends on:
    names, the container list and the types of the fields the runtime reads.
    """
    where = path or "the manifest"
    if not isinstance(pod, dict):
        raise ManifestError(f"{where} is {describe(pod)}, not a Pod")
    if typed:
        if pod.get("kind") != "Pod":
            kind = pod.get("kind")
            raise ManifestError(f"{where} is not a Pod (kind {kind!r})" if kind else f"{where} has no kind")
        if pod.get("apiVersion") != "v1":
            raise ManifestError(f"{_at(path, 'apiVersion')} must be v1, not {pod.get('apiVersion')!r}")
    meta = _object(pod.get("metadata"), _at(path, "metadata"), required=True)
    _name(meta.get("name"), _at(path, "metadata.name"), subdomain=True)
    if meta.get("namespace") not in (None, ""):
        _name(meta["namespace"], _at(path, "metadata.namespace"), subdomain=False)
    if meta.get("uid") not in (None, ""):
        _name(meta["uid"], _at(path, "metadata.uid"), subdomain=True)
    _string_map(meta.get("labels"), _at(path, "metadata.labels"))
    _string_map(meta.get("annotations"), _at(path, "metadata.annotations"))

    spec_path = _at(path, "spec")
    if pod.get("spec") is None:
        raise ManifestError(f"{spec_path} is missing")
    spec = _object(pod["spec"], spec_path, required=True)
    if not spec.get("containers"):
        raise ManifestError(f"{spec_path}.containers is missing: a pod needs at least one container")
    names: dict[str, str] = {}
    containers = _named_list(spec.get("initContainers"), f"{spec_path}.initContainers", names, "container")
    containers += _named_list(spec["containers"], f"{spec_path}.containers", names, "container")
    if spec.get("ephemeralContainers"):
        raise ManifestError(f"{spec_path}.ephemeralContainers cannot be set on a new pod")
    for container in containers:
        cpath = names[container["name"]]
        if not isinstance(container.get("image", ""), str):
            raise ManifestError(f"{cpath}.image must be a string, not {describe(container['image'])}")
        _strings(container.get("command"), f"{cpath}.command")
        _strings(container.get("args"), f"{cpath}.args")
    _named_list(spec.get("volumes"), f"{spec_path}.volumes", {}, "volume")
    return pod


def pods_of_document(doc: Any, *, allow_list: bool) -> list[JSONDict]:
    """The pods a decoded manifest holds: one Pod, or (`allow_list`, the URL source) a PodList.

    As upstream, any invalid pod refuses the whole document; a file holds exactly one Pod.
    """
    if doc is None:
        raise ManifestError("the manifest is empty")
    if not isinstance(doc, dict):
        raise ManifestError(f"the manifest is {describe(doc)}, not a Pod")
    check_json_shape(doc)
    if doc.get("kind") == "PodList":
        if not allow_list:
            raise ManifestError("a manifest file holds one Pod, not a PodList")
        if doc.get("apiVersion") != "v1":
            raise ManifestError(f"apiVersion must be v1, not {doc.get('apiVersion')!r}")
        items = doc.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise ManifestError(f"items must be a list, not {describe(items)}")
        return [validate_pod(item, f"items[{i}]", typed=False) for i, item in enumerate(items)]
    return [validate_pod(doc)]


def check_defaulted(pod: JSONDict, path: str = "") -> JSONDict:
    """The last step of applyDefaults: the pod, named `<name>-<node>` now, is still valid and fits."""
    _name(pod["metadata"]["name"], _at(path, "metadata.name") + " with the node name added", subdomain=True)
    size = len(orjson.dumps(pod))
    if size > MAX_POD_BYTES:
        raise ManifestError(
            f"{path or 'the pod'} is {size} bytes as JSON, more than a static pod's {MAX_POD_BYTES}"
        )
    return pod


def static_pods(doc: Any, *, node: str, source: str, path_or_url: str) -> list[JSONDict]:
    """Decoded manifest -> the defaulted pods the file (one Pod) or http source (Pod or PodList)
    publishes; a ManifestError with the first reason otherwise."""
    if source not in (FILE_SOURCE, HTTP_SOURCE):
        raise ValueError(f"static pods come from file or http, not {source!r}")
    pods = pods_of_document(doc, allow_list=source == HTTP_SOURCE)
    listed = doc.get("kind") == "PodList"  # a dict: pods_of_document checked it
    return [
        check_defaulted(
            apply_static_defaults(pod, node, source=source, path_or_url=path_or_url),
            f"items[{i}]" if listed else "",
        )
        for i, pod in enumerate(pods)
    ]


# ---------------------------------------------------------------------------------------------------
# The file source across rescans
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileResult:
    """One manifest file as a rescan found it: its pods, or why it was refused.

    `content` identifies what was read (a digest of the bytes, or the read error), so a refusal is
    reported once per content and not on every rescan.
    """

    path: str
    pods: tuple[JSONDict, ...] | None
    reason: str = ""
    content: str = ""


@dataclass(frozen=True)
class FileReport:
    """Something to tell the operator about one file: `kind` is "skipped" (refused, no pod from it),
    "kept" (refused, its last good pods keep running) or "valid" (valid again after a refusal)."""

    path: str
    kind: str
    reason: str = ""


class ManifestDirState:
    """What the file source remembers between rescans: the last good pods of every file, and the
    refusals already reported.

    podledger keeps a modified file's last good pods while the file fails to parse or validate
    (a half-written file, a typo), until it is fixed or removed. Upstream does so only until its next
    periodic relist (docs/kubelet-rules.md, "The file source").
    """

    def __init__(self) -> None:
        self.last_good: dict[str, tuple[JSONDict, ...]] = {}
        self.reported: dict[str, str] = {}  # path -> content of the refusal last reported

    def apply(self, results: Sequence[FileResult]) -> tuple[list[JSONDict], list[FileReport]]:
        """One rescan's results (every file present, in order) -> the pods to SET and what to report."""
        pods: list[JSONDict] = []
        reports: list[FileReport] = []
        present = set()
        for result in results:
            present.add(result.path)
            if result.pods is not None:
                self.last_good[result.path] = result.pods
                if self.reported.pop(result.path, None) is not None:
                    reports.append(FileReport(result.path, "valid"))
                pods.extend(result.pods)
                continue
            kept = self.last_good.get(result.path)
            if self.reported.get(result.path) != result.content:
                self.reported[result.path] = result.content
                reports.append(FileReport(result.path, "skipped" if kept is None else "kept", result.reason))
            if kept is not None:
                pods.extend(kept)
        # A file that is gone takes its pods with it, and is forgotten.
        for gone in [path for path in self.last_good if path not in present]:
            del self.last_good[gone]
        for gone in [path for path in self.reported if path not in present]:
            del self.reported[gone]
        return pods, reports
