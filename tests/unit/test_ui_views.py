"""The UI's pure edges: the listen address and the Host headers it answers (read/ui/guard.py),
the pod a request names and the detail pane's data (read/ui/views.py), and the pod catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from podledger.read.audit import queries
from podledger.read.audit.parse import PodRef
from podledger.read.index import PodIdentity, SqliteIndex
from podledger.read.ui import catalog, views
from podledger.read.ui.guard import Listen, host_allowed, parse_listen
from tests.support.audit import fill_audit_index, pod_stories

T0 = 1_780_000_000_000


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8080", Listen("127.0.0.1", 8080, True)),
        ("127.3.2.1:0", Listen("127.3.2.1", 0, True)),
        ("localhost:80", Listen("localhost", 80, True)),
        ("[::1]:8080", Listen("::1", 8080, True)),
        ("0.0.0.0:8080", Listen("0.0.0.0", 8080, False)),
        ("10.1.2.3:8080", Listen("10.1.2.3", 8080, False)),
        ("[::]:8080", Listen("::", 8080, False)),
        ("ui.example:8080", Listen("ui.example", 8080, False)),
    ],
)
def test_listen_addresses(text: str, expected: Listen) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize(
    "text", ["", "8080", "127.0.0.1", "127.0.0.1:", ":8080", "127.0.0.1:http", "h:70000"]
)
def test_malformed_listen_addresses_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(text)


@pytest.mark.parametrize(
    ("header", "loopback_only", "allowed"),
    [
        ("127.0.0.1:8080", True, True),
        ("localhost:8080", True, True),
        ("LOCALHOST", True, True),
        ("[::1]:8080", True, True),
        # DNS rebinding: a name the attacker controls, resolving to 127.0.0.1, is not answered
        ("evil.example:8080", True, False),
        ("evil.example", True, False),
        ("localhost.evil.example:8080", True, False),
        ("127.0.0.1.nip.example:8080", True, False),
        ("10.0.0.5:8080", True, False),
        ("", True, False),
        (None, True, False),
        # beyond loopback the operator chose who reaches it: any name
        ("ui.example:8080", False, True),
        (None, False, True),
    ],
)
def test_host_headers_answered(header: str | None, loopback_only: bool, allowed: bool) -> None:
    assert host_allowed(header, loopback_only) is allowed


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"uid": "abc-123"}, PodRef(uid="abc-123")),
        ({"pod": "shop/web"}, PodRef(namespace="shop", name="web")),
        ({"pod": "/web"}, PodRef(namespace="default", name="web")),
        ({"uid": " ", "pod": "shop/web"}, PodRef(namespace="shop", name="web")),
    ],
)
def test_the_pod_a_request_names(query: dict[str, str], expected: PodRef) -> None:
    assert views.pod_ref(query) == expected


@pytest.mark.parametrize("query", [{}, {"pod": ""}, {"pod": "a/b/c"}, {"pod": "shop/"}])
def test_a_request_naming_no_pod_is_a_bad_request(query: dict[str, str]) -> None:
    with pytest.raises(views.BadRequest, match=r"\?uid=UID or \?pod=namespace/name"):
        views.pod_ref(query)


@pytest.mark.parametrize(
    ("text", "ok"), [("3", True), ("", False), ("-1", False), ("v3", False), ("1e3", False)]
)
def test_version_numbers(text: str, ok: bool) -> None:
    if ok:
        assert views.version_number({"version": text}) == int(text)
    else:
        with pytest.raises(views.BadRequest):
            views.version_number({"version": text})


@pytest.fixture
def index(tmp_path: Path) -> SqliteIndex:
    idx = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    stories = [("shop", "web", 12), ("shop", "cart", 4), ("shop", "web-2", 3), ("default", "batch", 6)]
    fill_audit_index(idx, pod_stories(T0, stories))
    return idx


def test_detail_of_a_version_is_the_why_data_with_its_lines(index: SqliteIndex) -> None:
    why = queries.why(index, PodRef(namespace="shop", name="web"), version=6)
    d = views.detail(why)
    assert (d["name"], d["version"], d["previous_version"], d["next_version"]) == ("web", 6, 5, 7)
    assert d["cause"] == f"pod-lifecycle:sync_result pod-lifecycle/0@{why['version']['cause']['offset']}"
    assert d["containers"][0] == "app=waiting:CrashLoopBackOff,restarts=0"
    assert d["changes_title"] == "changes since version 5"
    assert any(c.startswith("containerStatuses[app].state: terminated") for c in d["changes"])
    assert [(i["event"], i["effect"]) for i in d["chain"]] == [
        ("pod-lifecycle sync_result CrashLoopBackOff back-off 10s", "new version 6")
    ]
    assert d["status"] == why["version"]["status"] and d["replayed"] is True
    first = views.detail(queries.why(index, PodRef(namespace="shop", name="web"), version=1))
    assert first["changes_title"] == "changes (first version)" and first["previous_version"] is None


def test_catalog_lists_namespaces_and_finds_pods(index: SqliteIndex) -> None:
    idx = index
    assert catalog.namespaces(idx) == [{"namespace": "default", "pods": 1}, {"namespace": "shop", "pods": 3}]
    shop = catalog.pods(idx, namespace="shop")
    assert sorted(p.name for p in shop) == ["cart", "web", "web-2"]
    assert [p.last_ts_ms for p in shop] == sorted((p.last_ts_ms for p in shop), reverse=True)
    assert all(isinstance(p, PodIdentity) and p.namespace == "shop" for p in shop)
    assert sorted(p.name for p in catalog.pods(idx, contains="WEB")) == ["web", "web-2"]
    assert [p.name for p in catalog.pods(idx, contains="b-2")] == ["web-2"]
    # the search text is literal: % and _ are no wildcards
    assert catalog.pods(idx, contains="w_b") == [] and catalog.pods(idx, contains="%") == []
    uid = shop[0].uid
    assert [p.uid for p in catalog.pods(idx, contains=uid[:13])] == [uid]
    assert len(catalog.pods(idx, limit=2)) == 2
    assert catalog.pods(idx, namespace="nope") == []
