"""Label and field selectors (read/client/select.py), with the apiserver's syntax and meaning."""

from __future__ import annotations

import pytest

from podledger.read.client.select import (
    POD_FIELDS,
    PodFilter,
    SelectorError,
    parse_fields,
    parse_labels,
    selectable,
)


def pod(labels: dict[str, str] | None = None, **status: str) -> dict:
    return {
        "metadata": {"name": "web-1", "namespace": "shop", "labels": labels or {}},
        "spec": {"nodeName": "n1", "restartPolicy": "Always", "hostNetwork": False},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}], **status},
    }


LABELS = {"app": "web", "tier": "front", "gen": "7"}

# (selector, matches LABELS)
LABEL_CASES = [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=db", False),
    ("app!=db", True),
    ("missing!=x", True),
    ("app", True),
    ("!app", False),
    ("!missing", True),
    ("app in (web, api)", True),
    ("app notin (web,api)", False),
    ("missing notin (a)", True),
    ("app=web,tier in (front),!canary", True),
    ("app=web,tier=back", False),
    ("gen>5", True),
    ("gen<5", False),
    ("app>5", False),
    ("example.com/role", False),
]


@pytest.mark.parametrize(("selector", "expected"), LABEL_CASES, ids=[c[0] or "empty" for c in LABEL_CASES])
def test_label_selectors(selector: str, expected: bool) -> None:
    assert PodFilter.parse(labels=selector).matches(pod(LABELS)) is expected


@pytest.mark.parametrize("bad", ["app in (web", "app)", "app=we b", "=x", "a in (b c)", "gen>x", "a,,b"])
def test_bad_label_selectors_are_refused(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse_labels(bad)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("status.phase=Running", True),
        ("status.phase!=Running", False),
        ("spec.nodeName=n1,metadata.namespace=shop", True),
        ("metadata.name==web-2", False),
        ("spec.hostNetwork=false", True),
        ("status.podIPs=10.0.0.1", True),
    ],
)
def test_field_selectors(selector: str, expected: bool) -> None:
    assert PodFilter.parse(fields=selector).matches(pod()) is expected


def test_a_field_pods_cannot_be_selected_by_is_refused() -> None:
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.containers"):
        parse_fields("spec.containers=x")


def test_namespace_and_node() -> None:
    assert PodFilter.parse(namespace="shop", node="n1").matches(pod())
    assert not PodFilter.parse(namespace="default").matches(pod())
    assert not PodFilter.parse(node="n2").matches(pod())
    assert PodFilter.parse() == PodFilter()


def test_a_selector_reads_the_same_of_the_selectable_part_as_of_the_whole_pod() -> None:
    full = pod(LABELS, nominatedNodeName="n9", podIPs=[{"ip": "10.0.0.1"}, {"ip": "fd00::1"}])
    full["spec"] |= {"schedulerName": "s", "serviceAccountName": "sa", "containers": [{"name": "c"}]}
    full["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    full["metadata"]["annotations"] = {"a": "b"}
    part = selectable(full)
    assert {name: get(part) for name, get in POD_FIELDS.items()} == {
        name: get(full) for name, get in POD_FIELDS.items()
    }
    assert part["metadata"]["labels"] == LABELS
    assert "containers" not in part["spec"] and "conditions" not in part["status"]
    for selector, expected in LABEL_CASES:
        assert PodFilter.parse(labels=selector).matches(part) is expected, selector
    assert PodFilter.parse(namespace="shop", node="n1").matches(part)
    assert selectable({"metadata": {"name": "x"}, "spec": None}) == {
        "metadata": {"name": "x"}, "spec": {}, "status": {}
    }  # fmt: skip
