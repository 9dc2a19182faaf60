"""Paths, content negotiation and documents of the read-only API (read/kubeapi/objects.py)."""

from __future__ import annotations

import pytest

from podledger.read.kubeapi import objects

PATHS = [
    ("/api", (None, "api", None, None, False)),
    ("/api/v1", (None, "v1", None, None, False)),
    ("/apis", (None, "apis", None, None, False)),
    ("/version", (None, "version", None, None, False)),
    ("/readyz", (None, "health", None, None, False)),
    ("/api/v1/pods", (None, "pods", None, None, False)),
    ("/api/v1/watch/pods", (None, "pods", None, None, True)),
    ("/api/v1/namespaces/shop/pods", (None, "pods", "shop", None, False)),
    ("/api/v1/namespaces/shop/pods/web", (None, "pods", "shop", "web", False)),
    ("/api/v1/namespaces/shop/pods/web/status", (None, "pods", "shop", "web", False)),
    ("/api/v1/watch/namespaces/shop/pods/web", (None, "pods", "shop", "web", True)),
    ("/at/2026-01-01T00:00:00Z/api/v1/pods", ("2026-01-01T00:00:00Z", "pods", None, None, False)),
    ("/at/2026-01-01T00:00:00Z/api", ("2026-01-01T00:00:00Z", "api", None, None, False)),
]


@pytest.mark.parametrize(("path", "expected"), PATHS, ids=[p for p, _ in PATHS])
def test_parse_path(path: str, expected: tuple) -> None:
    assert objects.parse_path(path) == expected


@pytest.mark.parametrize(
    "path",
    ["/", "/api/v2", "/api/v1/services", "/api/v1/namespaces/a/pods/b/log", "/apis/apps/v1", "/at/x"],
)
def test_other_paths_are_not_served(path: str) -> None:
    with pytest.raises(objects.PathError):
        objects.parse_path(path)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json", "meta.k8s.io/v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "meta.k8s.io/v1beta1"),
        ("application/json", None),
        ("", None),
        ("application/json;as=Table;v=v2;g=meta.k8s.io", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", None),
    ],
)  # fmt: skip
def test_table_version(accept: str, expected: str | None) -> None:
    assert objects.table_version(accept) == expected


def test_parse_moment() -> None:
    assert objects.parse_moment("2026-01-01T00:00:00Z") == 1_767_225_600_000
    assert objects.parse_moment("2026-01-01T01:00:00+01:00") == 1_767_225_600_000
    assert objects.parse_moment("2026-01-01t00:00:00.5z") == 1_767_225_600_500
    for bad in ("2026-01-01", "2026-01-01T00:00:00", "yesterday"):
        with pytest.raises(ValueError):
            objects.parse_moment(bad)


def test_errors_are_status_objects() -> None:
    gone = objects.expired("partition 0 starts at 5")
    assert (gone["kind"], gone["code"], gone["reason"]) == ("Status", 410, "Expired")
    assert objects.not_found("web")["details"] == {"name": "web", "kind": "pods"}
    assert objects.method_not_allowed("DELETE")["code"] == 405
    assert objects.too_large("x")["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_discovery_offers_pods_read_only() -> None:
    [pods_resource, _] = objects.api_resources()["resources"]
    assert pods_resource["verbs"] == ["get", "list", "watch"]
    assert objects.api_groups()["groups"] == []
    assert objects.bookmark("rv", initial_events_end=True)["metadata"]["annotations"] == {
        objects.INITIAL_EVENTS_END: "true"
    }


def test_include_object() -> None:
    assert [objects.include_object(v) for v in (None, "Metadata", "Object", "None")] == [
        "Metadata", "Metadata", "Object", "None"
    ]  # fmt: skip
    with pytest.raises(ValueError):
        objects.include_object("All")
