"""The documents of the read-only Kubernetes API: discovery, lists, watch events, errors.

Pure: plain dicts and strings in, plain dicts out; the server (read/kubeapi/server.py) encodes
them. Shapes follow the Kubernetes API (core/v1 and meta.k8s.io/v1).
"""

from __future__ import annotations

from datetime import datetime

from podledger.types import JSONDict

# The Kubernetes version whose pod read paths serve answers like (its /version); kubectl warns
# only beyond one minor version of skew.
KUBE_MAJOR, KUBE_MINOR = "1", "34"
TABLE_VERSIONS = ("v1", "v1beta1")
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def api_versions(server_address: str) -> JSONDict:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_resources() -> JSONDict:
    """/api/v1: pods only, and only the read verbs."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "v1",
        "resources": [
            {
                "name": "pods",
                "singularName": "pod",
                "namespaced": True,
                "kind": "Pod",
                "verbs": ["get", "list", "watch"],
                "shortNames": ["po"],
                "categories": ["all"],
            },
            {"name": "pods/status", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
        ],
    }


def api_groups() -> JSONDict:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}


def version_info(podledger_version: str) -> JSONDict:
    return {
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": f"v{KUBE_MAJOR}.{KUBE_MINOR}.0+podledger-{podledger_version}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "podledger",
        "platform": "linux/amd64",
    }


def status(code: int, reason: str, message: str, **details: object) -> JSONDict:
    """A meta/v1 Status: what the apiserver answers instead of an object."""
    out: JSONDict = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        out["details"] = dict(details)
    return out


def not_found(name: str) -> JSONDict:
    return status(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")


def expired(message: str) -> JSONDict:
    """410 Gone: the resourceVersion asked for is older than what the topics hold."""
    return status(410, "Expired", f"too old resource version: {message}")


def bad_request(message: str) -> JSONDict:
    return status(400, "BadRequest", message)


def too_large(message: str) -> JSONDict:
    return status(
        504,
        "Timeout",
        f"Too large resource version: {message}",
        causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        retryAfterSeconds=1,
    )


def method_not_allowed(method: str) -> JSONDict:
    return status(405, "MethodNotAllowed", f"the server is read-only: {method} is not allowed")


def unauthorized() -> JSONDict:
    return status(401, "Unauthorized", "Unauthorized")


def table_version(accept: str) -> str | None:
    """The meta.k8s.io group version of the Table the client accepts (kubectl's
    `application/json;as=Table;v=v1;g=meta.k8s.io`), or None for plain objects."""
    for media in accept.split(","):
        parts = [p.strip() for p in media.split(";")]
        params = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        if (
            parts[0] in ("application/json", "*/*")
            and params.get("as") == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in TABLE_VERSIONS
        ):
            return f"meta.k8s.io/{params['v']}"
    return None


def pod_list(items: list[JSONDict], resource_version: str) -> JSONDict:
    return {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": resource_version},
        "items": items,
    }


def bookmark(resource_version: str, *, initial_events_end: bool = False) -> JSONDict:
    """A BOOKMARK's object: a Pod with nothing but its resourceVersion."""
    meta: JSONDict = {"resourceVersion": resource_version}
    if initial_events_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta}


def parse_moment(text: str) -> int:
    """An RFC 3339 time (`2026-01-01T12:00:00Z`) as epoch milliseconds; ValueError otherwise."""
    if "T" not in text.upper():
        raise ValueError(f"{text!r} is not an RFC 3339 time (like 2026-01-01T12:00:00Z)")
    moment = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (end it with Z or an offset)")
    return int(moment.timestamp() * 1000)


def parse_bool(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true")


def include_object(value: str | None) -> str:
    """A Table row's object: Metadata (the default), Object or None."""
    if value in (None, "", "Metadata"):
        return "Metadata"
    if value in ("Object", "None"):
        return value
    raise ValueError(f"unrecognized includeObject value: {value!r}")


class PathError(ValueError):
    """A path this API does not serve."""


def parse_path(path: str) -> tuple[str | None, str, str | None, str | None, bool]:
    """(moment, what, namespace, name, legacy watch path) of a request path; `what` is one of
    api, apis, v1, version, health, pods (with a name: one pod, or its status subresource).
    `/at/<RFC 3339 time>/...` names a past moment; `/api/v1/watch/...` is the old watch spelling."""
    parts = [p for p in path.split("/") if p]
    moment = None
    if len(parts) >= 2 and parts[0] == "at":
        moment, parts = parts[1], parts[2:]
    if parts in (["healthz"], ["livez"], ["readyz"]):
        return moment, "health", None, None, False
    if parts == ["version"]:
        return moment, "version", None, None, False
    if parts == ["apis"]:
        return moment, "apis", None, None, False
    if parts == ["api"]:
        return moment, "api", None, None, False
    if parts[:2] != ["api", "v1"]:
        raise PathError(path)
    rest, legacy_watch = parts[2:], False
    if rest[:1] == ["watch"]:
        rest, legacy_watch = rest[1:], True
    if not rest and not legacy_watch:
        return moment, "v1", None, None, False
    if rest == ["pods"]:
        return moment, "pods", None, None, legacy_watch
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] == "pods":
        namespace, tail = rest[1], rest[3:]
        if not tail:
            return moment, "pods", namespace, None, legacy_watch
        if len(tail) == 1:
            return moment, "pods", namespace, tail[0], legacy_watch
        if len(tail) == 2 and tail[1] == "status" and not legacy_watch:
            return moment, "pods", namespace, tail[0], False
    raise PathError(path)
