"""Static pod manifests (agents/sources/manifests.py, the decoding in agents/sources/manifest_decoding.py,
the sources in agents/sources/file_source.py and http_source.py): what a file or URL body becomes, every
way one is refused, and what the file source keeps across rescans (docs/kubelet-rules.md, "The file
source" and "The http source"; upstream config/common.go, file.go, http.go and their tests).

The vectors are bytes in, pods or a reason out. The last sections run the file source over a real
directory and the http source against a local HTTP server.
"""

from __future__ import annotations

import asyncio
import http.server
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest

from podledger.agents.sources.file_source import FileSource, read_manifest_result, scan_manifest_path
from podledger.agents.sources.http_source import HttpSource
from podledger.agents.sources.manifest_decoding import parse_manifest
from podledger.agents.sources.manifests import (
    MAX_MANIFEST_BYTES,
    MAX_POD_BYTES,
    FileReport,
    FileResult,
    ManifestDirState,
    ManifestError,
)
from podledger.agents.sources.pod_config import HASH_ANNOTATION, PodStorage
from podledger.types import JSONDict
from tests import pods

NODE = "node-a"

GOOD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
    - name: main
      image: app:1
"""


def file_pods(data: str | bytes, path: str = "/etc/manifests/web.yaml") -> list[JSONDict]:
    raw = data.encode() if isinstance(data, str) else data
    return parse_manifest(raw, node=NODE, source="file", path_or_url=path)


def url_pods(data: str | bytes, url: str = "http://config/pods") -> list[JSONDict]:
    raw = data.encode() if isinstance(data, str) else data
    return parse_manifest(raw, node=NODE, source="http", path_or_url=url)


def refusal(parse: Callable[[bytes], Any], data: str | bytes) -> str:
    with pytest.raises(ManifestError) as caught:
        parse(data.encode() if isinstance(data, str) else data)
    reason = str(caught.value)
    assert "\n" not in reason  # one line, for one log line
    return reason


def as_json(pod: JSONDict) -> bytes:
    return orjson.dumps(pod)


# ---------------------------------------------------------------------------------------------------
# Good manifests
# ---------------------------------------------------------------------------------------------------


def test_yaml_and_json_manifests_give_the_same_defaulted_pod() -> None:
    built = pods.pod([pods.container("main", "app:1")], name="web", uid=None)
    del built["metadata"]["namespace"]
    from_yaml, from_json = file_pods(GOOD), file_pods(as_json(built))
    assert from_yaml == from_json
    [pod] = from_yaml
    assert pod["metadata"]["name"] == f"web-{NODE}" and pod["metadata"]["namespace"] == "default"
    assert pod["metadata"]["annotations"][HASH_ANNOTATION] == pod["metadata"]["uid"]
    assert pod["spec"]["nodeName"] == NODE and pod["status"] == {"phase": "Pending"}


def test_a_url_body_may_hold_a_pod_list() -> None:
    items = [pods.pod(name=n, uid=None) for n in ("a", "b")]
    for item in items:  # items of a PodList need no type of their own
        del item["apiVersion"], item["kind"]
    got = url_pods(as_json({"apiVersion": "v1", "kind": "PodList", "items": items}))
    assert [p["metadata"]["name"] for p in got] == [f"a-{NODE}", f"b-{NODE}"]
    assert url_pods(as_json({"apiVersion": "v1", "kind": "PodList", "items": []})) == []


def test_aliases_within_the_bounds_are_expanded() -> None:
    manifest = GOOD.replace("    - name: main\n", "    - name: main\n      env: &env [{name: A, value: b}]\n")
    manifest += "    - name: side\n      env: *env\n"
    [pod] = file_pods(manifest)
    assert [c["env"] for c in pod["spec"]["containers"]] == [[{"name": "A", "value": "b"}]] * 2


def test_timestamps_and_yaml_11_scalars_stay_as_the_kubelet_reads_them() -> None:
    manifest = GOOD.replace("  name: web\n", "  name: web\n  creationTimestamp: 2026-01-01T00:00:00Z\n")
    [pod] = file_pods(manifest)
    assert pod["metadata"]["creationTimestamp"] == "2026-01-01T00:00:00Z"  # a string, not a datetime


# ---------------------------------------------------------------------------------------------------
# Refused manifests: upstream's table, then every other way a manifest fails
# ---------------------------------------------------------------------------------------------------


def _pod_with(**changes: Any) -> bytes:
    pod = pods.pod([pods.container("main", "app:1")], name="web", uid=None)
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = pod
        for part in parents:
            target = target[part]
        target[last] = value
    return as_json(pod)


# TestExtractInvalidPods (http_test.go): each of these must be refused.
EXTRACT_INVALID_PODS = [
    pytest.param(_pod_with(apiVersion=""), "apiVersion must be v1", id="No version"),
    pytest.param(_pod_with(apiVersion="v1betta2"), "apiVersion must be v1", id="Invalid version"),
    pytest.param(
        _pod_with(spec__volumes=[{"name": "_INVALID_"}]), "is not a DNS-1123 label", id="Invalid volume name"
    ),
    pytest.param(
        _pod_with(spec__volumes=[{"name": "repeated"}, {"name": "repeated"}]),
        "repeats the volume name",
        id="Duplicate volume names",
    ),
    pytest.param(
        _pod_with(spec__containers=[{"name": "", "image": "x"}]),
        "spec.containers[0].name is missing",
        id="Unspecified container name",
    ),
    pytest.param(
        _pod_with(spec__containers=[{"name": "_INVALID_", "image": "x"}]),
        "spec.containers[0].name '_INVALID_' is not a DNS-1123 label",
        id="Invalid container name",
    ),
]


@pytest.mark.parametrize(("data", "reason"), EXTRACT_INVALID_PODS)
def test_TestExtractInvalidPods(data: bytes, reason: str) -> None:
    assert reason in refusal(url_pods, data)
    assert reason in refusal(file_pods, data)


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


BOMB = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
    - name: main
      args: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
      i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""
# 375 bytes that expand to a pod of megabytes: under the expansion bound, over the pod bound.
SMALL_BOMB = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
    - name: main
      args: &a ["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "y"]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
"""

MANIFEST_FAILURES_EXTRA = [
    pytest.param(GOOD + "  extra: !!set {a, b}\n", "tag !!set is not allowed", id="set_tag"),
    pytest.param(
        GOOD.replace("app:1", "!!python/object/apply:os.system [id]"),
        "tag !!python/object/apply:os.system is not allowed",
        id="python_tag",
    ),
    pytest.param(GOOD + "  extra: !!binary aGVsbG8=\n", "tag !!binary is not allowed", id="binary_tag"),
    pytest.param(GOOD + "  extra: !local x\n", "tag !local is not allowed", id="local_tag"),
    pytest.param(
        GOOD.replace("  name: web\n", "  name: web\n  labels: {1: one}\n"),
        "metadata.labels: key 1 is a number; keys must be strings",
        id="int_key",
    ),
    pytest.param(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: abc\n",
        "spec must be an object, not a string",
        id="spec_not_an_object",
    ),
    pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n", "spec is missing", id="no_spec"),
    pytest.param(GOOD.replace("kind: Pod", "kind: Service"), "not a Pod (kind 'Service')", id="not_a_pod"),
    pytest.param(GOOD.replace("kind: Pod\n", ""), "has no kind", id="no_kind"),
    pytest.param(
        "apiVersion: v1\nkind: PodList\nitems: []\n", "a manifest file holds one Pod", id="pod_list_in_a_file"
    ),
    pytest.param("- a\n- b\n", "the manifest is a list, not a Pod", id="a_list"),
    pytest.param("just words\n", "the manifest is a string, not a Pod", id="a_string"),
    pytest.param("", "the manifest is empty", id="empty"),
    pytest.param("# only a comment\n", "the manifest is empty", id="only_a_comment"),
    pytest.param(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n",
        "spec.containers is missing",
        id="no_containers",
    ),
    pytest.param(
        GOOD.replace("    - name: main\n", "    - image: x\n"),
        "spec.containers[0].name is missing",
        id="container_without_name",
    ),
    pytest.param(
        GOOD + "  initContainers: [{name: main, image: x}]\n",
        "repeats the container name",
        id="duplicate_container_names",
    ),
    pytest.param(
        GOOD.replace("    - name: main\n      image: app:1\n", "    - main\n"),
        "spec.containers[0] must be an object, not a string",
        id="container_string",
    ),
    pytest.param(
        GOOD.replace("name: web", "name: Web_1"), "metadata.name 'Web_1' is not a DNS", id="bad_name"
    ),
    pytest.param(
        GOOD.replace("  name: web\n", "  name: web\n  namespace: a.b\n"),
        "metadata.namespace 'a.b' is not a DNS-1123 label",
        id="bad_namespace",
    ),
    pytest.param(
        GOOD.replace("  name: web\n", "  name: web\n  uid: ../../etc/passwd\n"),
        "metadata.uid '../../etc/passwd' is not a DNS-1123 subdomain",
        id="uid_not_dns_safe",
    ),
    pytest.param(
        GOOD.replace("name: web", "name: " + "w" * 250),
        "with the node name added",
        id="name_too_long_with_the_node",
    ),
    pytest.param(
        GOOD.replace("  name: web\n", "  name: web\n  labels: {tier: 3}\n"),
        "metadata.labels.tier must be a string, not a number",
        id="label_not_a_string",
    ),
    pytest.param(
        GOOD.replace("image: app:1", "image: app:1\n      command: sleep 10"),
        "spec.containers[0].command must be a list of strings",
        id="command_not_a_list",
    ),
    pytest.param(
        GOOD.replace("image: app:1", "image: app:1\n      args: [echo, yes]"),  # YAML 1.1: yes is true
        "spec.containers[0].args must be a list of strings",
        id="yaml_11_boolean_in_args",
    ),
    pytest.param(
        GOOD + "  ephemeralContainers: [{name: debug}]\n",
        "ephemeralContainers cannot be set",
        id="ephemeral_containers",
    ),
    pytest.param(GOOD.replace("app:1", ".nan"), "nan is not a JSON number", id="nan"),
    pytest.param(GOOD.replace("app:1", str(2**64)), "does not fit a 64-bit integer", id="huge_int"),
    pytest.param(BOMB, "more than 10485760 bytes with its aliases expanded", id="alias_bomb"),
    pytest.param(SMALL_BOMB, f"more than a static pod's {MAX_POD_BYTES}", id="alias_bomb_small_file"),
    pytest.param("&a [*a]\n", "an alias refers to a node that contains it", id="alias_to_itself"),
    pytest.param("a: *missing\n", "not valid YAML: found undefined alias", id="undefined_alias"),
    pytest.param(
        GOOD.replace("image: app:1", "image: " + "x" * MAX_POD_BYTES),
        f"more than a static pod's {MAX_POD_BYTES}",
        id="pod_too_large",
    ),
    pytest.param(b"#" * (MAX_MANIFEST_BYTES + 1), f"more than {MAX_MANIFEST_BYTES}", id="manifest_too_large"),
    pytest.param(GOOD[: GOOD.index("  containers:")], "spec is missing", id="half_written_valid_yaml"),
    pytest.param(
        GOOD.replace("    - name: main\n      image: app:1\n", "    - {name: main, image: [app"),
        "not valid YAML: while parsing a flow sequence",
        id="half_written_invalid_yaml",
    ),
    pytest.param(
        '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}, "spec": {"contai',
        "not valid YAML",
        id="half_written_json",
    ),
    pytest.param(GOOD + "---\n" + GOOD, "expected a single document in the stream", id="two_documents"),
    pytest.param(_nested(100), "nested deeper than 64 levels", id="nested_too_deeply"),
    pytest.param(_nested(1_000_000), "nested deeper than 64 levels", id="nested_a_million_deep"),
    pytest.param("- " * 100_000 + "x\n", "nested deeper than 64 levels", id="block_nesting"),
    pytest.param(b"\xff\xfe\xfd garbage", "not valid YAML", id="not_text"),
]


@pytest.mark.parametrize(("data", "reason"), MANIFEST_FAILURES_EXTRA)
def test_a_refused_manifest_says_why(data: str | bytes, reason: str) -> None:
    assert reason in refusal(file_pods, data)


def test_a_url_body_refuses_the_whole_list_for_one_bad_pod() -> None:
    good, bad = pods.pod(name="a", uid=None), pods.pod(name="b", uid=None)
    bad["spec"]["containers"][0]["name"] = ""
    reason = refusal(url_pods, as_json({"apiVersion": "v1", "kind": "PodList", "items": [good, bad]}))
    assert reason == "items[1].spec.containers[0].name is missing"


# ---------------------------------------------------------------------------------------------------
# The file source across rescans (ManifestDirState)
# ---------------------------------------------------------------------------------------------------


def result(path: str, data: str | bytes) -> FileResult:
    """What a rescan makes of a file holding `data` (as read_manifest_result does)."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        return FileResult(path, tuple(file_pods(raw, path)), content=str(hash(raw)))
    except ManifestError as exc:
        return FileResult(path, None, str(exc), str(hash(raw)))


def names(pods_: list[JSONDict]) -> list[str]:
    return [p["metadata"]["name"] for p in pods_]


def uids(pods_: list[JSONDict]) -> list[str]:
    return [p["metadata"]["uid"] for p in pods_]


def manifest(name: str, image: str = "app:1") -> str:
    return GOOD.replace("name: web", f"name: {name}").replace("app:1", image)


def test_a_modified_file_that_fails_keeps_its_last_good_pod() -> None:
    state = ManifestDirState()
    good, _ = state.apply([result("/m/web.yaml", manifest("web"))])
    broken = manifest("web").replace("spec:", "spec: [")  # a typo in an edit
    kept, reports = state.apply([result("/m/web.yaml", broken)])
    assert uids(kept) == uids(good)  # the same pod: the merge sees no change, nothing restarts
    assert [(r.path, r.kind) for r in reports] == [("/m/web.yaml", "kept")]
    assert reports[0].reason.startswith("not valid YAML")
    # Fixed with a new content: a new pod (new UID), and the operator hears it is valid again.
    fixed, reports = state.apply([result("/m/web.yaml", manifest("web", "app:2"))])
    assert uids(fixed) != uids(good) and reports == [FileReport("/m/web.yaml", "valid")]


def test_a_half_written_file_keeps_its_last_good_pod() -> None:
    state = ManifestDirState()
    text = manifest("web")
    good, _ = state.apply([result("/m/web.yaml", text)])
    for cut in (len(text) // 3, len(text) // 2, len(text) - 12):  # an editor or copy caught mid-write
        seen, _ = state.apply([result("/m/web.yaml", text[:cut])])
        assert uids(seen) == uids(good), text[:cut]
    again, reports = state.apply([result("/m/web.yaml", text)])
    assert uids(again) == uids(good) and [r.kind for r in reports] == ["valid"]


def test_the_rest_of_the_directory_keeps_working() -> None:
    state = ManifestDirState()
    results = [
        result("/m/a.yaml", manifest("a")),
        result("/m/b.yaml", GOOD + "  x: !!set {a}\n"),
        result("/m/c.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: c}\nspec: abc\n"),
        result("/m/d.yaml", BOMB),
        result("/m/e.yaml", manifest("e")),
    ]
    got, reports = state.apply(results)
    assert names(got) == [f"a-{NODE}", f"e-{NODE}"]
    assert [(r.path, r.kind) for r in reports] == [
        (p, "skipped") for p in ("/m/b.yaml", "/m/c.yaml", "/m/d.yaml")
    ]


def test_a_refusal_is_reported_once_per_content() -> None:
    state = ManifestDirState()
    bad = result("/m/web.yaml", "spec: abc\n")
    assert len(state.apply([bad])[1]) == 1
    assert state.apply([bad])[1] == []  # rescanned, unchanged: nothing new to say
    other = result("/m/web.yaml", "spec: [abc]\n")
    assert [r.kind for r in state.apply([other])[1]] == ["skipped"]  # another content is reported
    assert state.apply([])[1] == []  # removed: forgotten
    assert len(state.apply([bad])[1]) == 1  # back: reported again


def test_a_removed_file_takes_its_pods_and_is_forgotten() -> None:
    state = ManifestDirState()
    state.apply([result("/m/a.yaml", manifest("a")), result("/m/b.yaml", manifest("b"))])
    got, _ = state.apply([result("/m/a.yaml", manifest("a"))])
    assert names(got) == [f"a-{NODE}"]
    # A bad file at the same path later has no last good pod to keep.
    got, reports = state.apply([result("/m/a.yaml", manifest("a")), result("/m/b.yaml", "spec: abc\n")])
    assert names(got) == [f"a-{NODE}"] and [r.kind for r in reports] == ["skipped"]


def test_a_file_refused_from_the_start_gives_no_pod() -> None:
    got, reports = ManifestDirState().apply([result("/m/web.yaml", "kind: Pod\nmetadata: {}\n")])
    assert got == [] and [(r.kind, r.reason) for r in reports] == [
        ("skipped", "apiVersion must be v1, not None")
    ]


# ---------------------------------------------------------------------------------------------------
# The file source on a real directory
# ---------------------------------------------------------------------------------------------------


def test_a_rescan_reads_top_level_regular_files_and_refuses_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(manifest("a"))
    (tmp_path / ".hidden.yaml").write_text(manifest("hidden"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "nested.yaml").write_text(manifest("nested"))
    os.mkfifo(tmp_path / "fifo.yaml")  # must neither block the rescan nor count
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "nowhere")
    with open(tmp_path / "huge.yaml", "wb") as huge:  # sparse: nothing is written
        huge.truncate(MAX_MANIFEST_BYTES + 1)
    results = scan_manifest_path(tmp_path, NODE)
    assert [(Path(r.path).name, r.pods is not None) for r in results] == [
        ("a.yaml", True),
        ("huge.yaml", False),
    ]
    assert results[1].reason == f"the manifest is larger than {MAX_MANIFEST_BYTES} bytes"
    assert scan_manifest_path(tmp_path / "missing", NODE) == []
    assert [len(r.pods or ()) for r in scan_manifest_path(tmp_path / "a.yaml", NODE)] == [1]


def test_an_unreadable_file_is_a_refusal_not_a_stop(tmp_path: Path) -> None:
    path = tmp_path / "locked.yaml"
    path.write_text(manifest("locked"))
    path.chmod(0)
    try:
        got = read_manifest_result(path, NODE)
        if os.geteuid() != 0:  # root reads it anyway
            assert got.pods is None and got.reason.startswith("cannot read it")
    finally:
        path.chmod(0o600)


def test_the_file_source_reports_each_bad_file_once_and_keeps_the_last_good_pod(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = FileSource(tmp_path, NODE, publish=None, storage=PodStorage())  # type: ignore[arg-type]
    (tmp_path / "web.yaml").write_text(manifest("web"))
    (tmp_path / "bad.yaml").write_text("spec: abc\n")
    caplog.set_level(logging.INFO, logger="podledger.agents.sources.file_source")
    first = source.rescan()
    assert first is not None and names(first) == [f"web-{NODE}"]
    (tmp_path / "web.yaml").write_text(manifest("web")[:40])
    for _ in range(3):
        again = source.rescan()
        assert again is not None and uids(again) == uids(first)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"skipping manifest {tmp_path / 'bad.yaml'}: the manifest has no kind",
        f"manifest {tmp_path / 'web.yaml'} is refused; its last good pod keeps running:"
        " metadata must be an object, not a string",
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records)


# ---------------------------------------------------------------------------------------------------
# The http source against a local server
# ---------------------------------------------------------------------------------------------------


class _Server(http.server.BaseHTTPRequestHandler):
    routes: ClassVar[dict[str, Callable[[Any], None]]] = {}  # each server's subclass has its own

    def do_GET(self) -> None:
        self.routes[self.path](self)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, dict[str, Callable[[Any], None]]]]:
    handler = type("Handler", (_Server,), {"routes": {}})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.routes
    finally:
        httpd.shutdown()
        httpd.server_close()


def _answer(body: bytes, status: int = 200, **headers: str) -> Callable[[Any], None]:
    def answer(req: Any) -> None:
        req.send_response(status)
        for key, value in headers.items():
            req.send_header(key, value)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    return answer


def fetch(url: str, **options: Any) -> list[JSONDict] | None:
    source = HttpSource(url, NODE, publish=None, storage=PodStorage(), **options)  # type: ignore[arg-type]
    return asyncio.run(source.fetch())


def test_the_url_source_follows_a_few_redirects_but_not_a_loop(
    server: tuple[str, dict[str, Callable[[Any], None]]], caplog: pytest.LogCaptureFixture
) -> None:
    base, routes = server
    routes["/pod"] = _answer(GOOD.encode())
    routes["/moved"] = _answer(b"", 302, Location="/pod")
    routes["/loop"] = _answer(b"", 302, Location="/loop")
    got = fetch(f"{base}/moved")
    assert got is not None and names(got) == [f"web-{NODE}"]
    caplog.set_level(logging.WARNING)
    assert fetch(f"{base}/loop") is None
    assert "TooManyRedirects" in caplog.text


def test_the_url_source_refuses_a_body_over_the_cap(
    server: tuple[str, dict[str, Callable[[Any], None]]], caplog: pytest.LogCaptureFixture
) -> None:
    base, routes = server
    routes["/big"] = _answer(GOOD.encode() + b"#" * 2000)

    def unannounced(req: Any) -> None:  # no Content-Length: the cap applies while reading
        req.send_response(200)
        req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(GOOD.encode() + b"#" * 2000)

    routes["/stream"] = unannounced
    caplog.set_level(logging.WARNING)
    assert fetch(f"{base}/big", max_bytes=1000) is None
    assert fetch(f"{base}/stream", max_bytes=1000) is None
    assert "more than 1000" in caplog.text and "larger than 1000 bytes" in caplog.text
    assert fetch(f"{base}/big") is not None  # under the default 10 MiB


def test_the_url_source_has_a_total_deadline(
    server: tuple[str, dict[str, Callable[[Any], None]]], caplog: pytest.LogCaptureFixture
) -> None:
    base, routes = server

    def drip(req: Any) -> None:  # every byte arrives in time, the whole body never does
        req.send_response(200)
        req.send_header("Content-Length", "1000")
        req.end_headers()
        for _ in range(1000):
            req.wfile.write(b"#")
            req.wfile.flush()
            time.sleep(0.2)

    routes["/drip"] = drip
    caplog.set_level(logging.WARNING)
    started = time.monotonic()
    assert fetch(f"{base}/drip", deadline_s=1.0) is None
    assert time.monotonic() - started < 3
    assert "no complete answer within 1s" in caplog.text


def test_the_url_source_reports_a_bad_body_once(
    server: tuple[str, dict[str, Callable[[Any], None]]], caplog: pytest.LogCaptureFixture
) -> None:
    base, routes = server
    routes["/bad"] = _answer(b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: abc\n")
    source = HttpSource(f"{base}/bad", NODE, publish=None, storage=PodStorage())  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING)

    async def three_polls() -> list[Any]:
        return [await source.fetch() for _ in range(3)]

    assert asyncio.run(three_polls()) == [None, None, None]
    assert caplog.text.count("spec must be an object") == 1
