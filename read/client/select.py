"""Which pods a reader wants: namespace, node, label selector and field selector, as the Kubernetes
API spells them (`app=web,tier!=db`, `env in (a,b)`, `!canary`; `spec.nodeName=n1`).

Pure: selectors are parsed once and matched against Pod objects (read/client/pods.py builds them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from podledger.types import JSONDict


class SelectorError(ValueError):
    """A selector that does not parse, or names a field pods cannot be selected by."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector: `key op values`."""

    key: str
    op: str  # exists, !exists, =, !=, in, notin, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        try:  # gt / lt compare integers, as the apiserver does
            number, bound = int(value or ""), int(self.values[0])
        except ValueError:
            return False
        return number > bound if self.op == "gt" else number < bound


_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_CMP = re.compile(rf"^\s*({_KEY})\s*(==|!=|=|>|<)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_terms(text: str) -> list[str]:
    """Split at the commas outside parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in {text!r}")
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError(f"unbalanced '(' in {text!r}")
    return [*terms, text[start:]]


def parse_labels(text: str | None) -> tuple[Requirement, ...]:
    """A label selector; empty or None selects everything."""
    if not text or not text.strip():
        return ()
    out = []
    for term in _split_terms(text):
        if m := _SET.match(term):
            values = tuple(v.strip() for v in m.group(3).split(","))
            if any(not re.fullmatch(_VALUE, v) for v in values):
                raise SelectorError(f"invalid value in {term.strip()!r}")
            out.append(Requirement(m.group(1), m.group(2), values))
        elif m := _CMP.match(term):
            op = {"==": "=", ">": "gt", "<": "lt"}.get(m.group(2), m.group(2))
            if op in ("gt", "lt") and not re.fullmatch(r"-?\d+", m.group(3)):
                raise SelectorError(f"{term.strip()!r}: '{m.group(2)}' needs an integer")
            out.append(Requirement(m.group(1), op, (m.group(3),)))
        elif m := _EXISTS.match(term):
            out.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"cannot parse label selector term {term.strip()!r}")
    return tuple(out)


def _path(*keys: str) -> Callable[[JSONDict], str]:
    def get(pod: JSONDict) -> str:
        value: Any = pod
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    return get


def _pod_ips(pod: JSONDict) -> str:
    return ",".join(ip.get("ip", "") for ip in (pod.get("status") or {}).get("podIPs") or [])


# The pod fields the apiserver accepts in a field selector (pkg/registry/core/pod/strategy.go).
POD_FIELDS: dict[str, Callable[[JSONDict], str]] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
    "spec.nodeName": _path("spec", "nodeName"),
    "spec.restartPolicy": _path("spec", "restartPolicy"),
    "spec.schedulerName": _path("spec", "schedulerName"),
    "spec.serviceAccountName": _path("spec", "serviceAccountName"),
    "spec.hostNetwork": _path("spec", "hostNetwork"),
    "status.phase": _path("status", "phase"),
    "status.podIP": _path("status", "podIP"),
    "status.podIPs": _pod_ips,
    "status.nominatedNodeName": _path("status", "nominatedNodeName"),
}


# What of a Pod any selector reads (namespace, node, labels, POD_FIELDS), by section.
_SELECTED = {
    "metadata": ("name", "namespace", "labels"),
    "spec": ("nodeName", "restartPolicy", "schedulerName", "serviceAccountName", "hostNetwork"),
    "status": ("phase", "podIP", "nominatedNodeName"),
}


def selectable(pod: JSONDict) -> JSONDict:
    """The part of a Pod that selectors read: PodFilter.matches answers the same for it as for the
    whole pod, and a server that keeps many pods keeps only this of each for matching."""
    out: JSONDict = {}
    for section, keys in _SELECTED.items():
        given = pod.get(section)
        given = given if isinstance(given, dict) else {}
        out[section] = {k: given[k] for k in keys if given.get(k) is not None}
    ips = (pod.get("status") or {}).get("podIPs")
    if ips:
        out["status"]["podIPs"] = [{"ip": ip.get("ip", "")} for ip in ips]
    return out


@dataclass(frozen=True, slots=True)
class FieldTerm:
    field: str
    equal: bool
    value: str

    def matches(self, pod: JSONDict) -> bool:
        return (POD_FIELDS[self.field](pod) == self.value) == self.equal


def parse_fields(text: str | None) -> tuple[FieldTerm, ...]:
    """A field selector over POD_FIELDS (`=`, `==`, `!=`); empty or None selects everything."""
    if not text or not text.strip():
        return ()
    out = []
    for term in text.split(","):
        m = re.fullmatch(r"\s*([A-Za-z.]+)\s*(==|!=|=)\s*(\S*)\s*", term)
        if not m:
            raise SelectorError(f"cannot parse field selector term {term.strip()!r}")
        if m.group(1) not in POD_FIELDS:
            raise SelectorError(f"field label not supported: {m.group(1)}; known: {', '.join(POD_FIELDS)}")
        out.append(FieldTerm(m.group(1), m.group(2) != "!=", m.group(3)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PodFilter:
    """Everything a reader may narrow the pods by; the default selects every pod."""

    namespace: str | None = None
    node: str | None = None
    labels: tuple[Requirement, ...] = field(default=())
    fields: tuple[FieldTerm, ...] = field(default=())

    @classmethod
    def parse(
        cls,
        namespace: str | None = None,
        node: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> PodFilter:
        return cls(namespace or None, node or None, parse_labels(labels), parse_fields(fields))

    @property
    def needs_labels(self) -> bool:
        return bool(self.labels)

    def matches(self, pod: JSONDict) -> bool:
        meta = pod.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.node is not None and (pod.get("spec") or {}).get("nodeName") != self.node:
            return False
        if self.labels:
            labels = meta.get("labels") or {}
            if not all(r.matches(labels) for r in self.labels):
                return False
        return all(term.matches(pod) for term in self.fields)
