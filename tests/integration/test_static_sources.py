"""The file and http sources for real: a temp manifest directory and a local HTTP server, through
the real broker. The rules checked are docs/kubelet-rules.md's "The file source", "The http source"
and "Static pod defaults" (upstream config/file.go, config/http.go and config/common.go)."""

from __future__ import annotations

import asyncio
import http.server
import threading
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest

from podledger.config import Settings
from podledger.schemas import decode
from podledger.streams.topics import ensure_topics
from tests import pods
from tests.support import wait_for
from tests.support.kafka import read_topic

pytestmark = pytest.mark.kafka

MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
    - name: main
      image: {image}
"""


def source_env(settings: Settings, **extra: str) -> dict[str, str]:
    return {
        "PODLEDGER_BOOTSTRAP": settings.bootstrap,
        "PODLEDGER_NODE": settings.node,
        "PODLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "PODLEDGER_PARTITIONS": str(settings.partitions),
        "PODLEDGER_API_SOURCE": "false",
        **extra,
    }


def updates(settings: Settings) -> list[Any]:
    return [
        decode("pod-updates", v) for _, _, v in asyncio.run(read_topic(settings, "pod-updates", 0, idle=0.5))
    ]


def test_file_source_adds_restarts_on_edit_and_removes(
    settings: Settings, tmp_path: Path, podledger_process
) -> None:
    asyncio.run(ensure_topics(settings))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / ".hidden.yaml").write_text(MANIFEST.format(image="ignored:1"))
    (manifests / "broken.yaml").write_text("kind: Pod\nmetadata: {}\n")  # skipped, logged
    # A long poll period: only inotify can make the source notice changes within the test.
    proc = podledger_process(
        ["run", "--roles", "source"],
        env=source_env(settings, PODLEDGER_MANIFEST_DIR=str(manifests), PODLEDGER_FILE_CHECK_S="300"),
    )
    (manifests / "web.yaml").write_text(MANIFEST.format(image="app:1"))
    first = wait_for(lambda: (u := updates(settings)) and u, timeout=60, what="ADD", alive=proc)
    [add] = first
    assert (add.op, add.source) == ("ADD", "file")
    meta = add.pod["metadata"]
    assert meta["name"] == f"web-{settings.node}" and meta["namespace"] == "default"
    assert meta["annotations"]["kubernetes.io/config.source"] == "file"
    assert meta["annotations"]["kubernetes.io/config.hash"] == meta["uid"]
    assert add.pod["spec"]["nodeName"] == settings.node
    assert {"operator": "Exists", "effect": "NoExecute"} in add.pod["spec"]["tolerations"]

    # Editing the manifest changes the UID: the kubelet sees REMOVE + ADD, a restart.
    (manifests / "web.yaml").write_text(MANIFEST.format(image="app:2"))
    seen = wait_for(
        lambda: (u := updates(settings)) and len(u) >= 3 and u, timeout=30, what="REMOVE+ADD", alive=proc
    )
    assert [u.op for u in seen] == ["ADD", "REMOVE", "ADD"]
    assert seen[1].uid == add.uid and seen[2].uid != add.uid
    assert seen[2].pod["spec"]["containers"][0]["image"] == "app:2"

    (manifests / "web.yaml").unlink()
    final = wait_for(
        lambda: (u := updates(settings)) and len(u) >= 4 and u, timeout=30, what="REMOVE", alive=proc
    )
    assert [u.op for u in final] == ["ADD", "REMOVE", "ADD", "REMOVE"] and final[3].uid == seen[2].uid
    assert "skipping manifest" in proc.output() and "broken.yaml" in proc.output()
    assert proc.stop() == 0


class _Manifests(http.server.BaseHTTPRequestHandler):
    body = b""
    status = 200

    def do_GET(self) -> None:
        self.send_response(type(self).status)
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args: Any) -> None:
        pass


def test_http_source_follows_the_url(settings: Settings, podledger_process) -> None:
    asyncio.run(ensure_topics(settings))
    handler = type("Handler", (_Manifests,), {})
    # No uid: the http source derives one from the pod and the URL.
    make_pod = partial(pods.pod, ("main",), uid=None, image="app:1")
    pod = make_pod(name="api")
    handler.body = orjson.dumps(pod)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/pods"
    try:
        proc = podledger_process(
            ["run", "--roles", "source"],
            env=source_env(settings, PODLEDGER_MANIFEST_URL=url, PODLEDGER_HTTP_CHECK_S="0.5"),
        )
        [add] = wait_for(lambda: (u := updates(settings)) and u, timeout=60, what="ADD", alive=proc)
        assert (add.op, add.source, add.pod["metadata"]["name"]) == ("ADD", "http", f"api-{settings.node}")
        assert "tolerations" not in add.pod["spec"]  # only file pods get the NoExecute toleration
        # An error answer changes nothing; a PodList replaces the set; an empty body empties it.
        handler.status = 500
        handler.body = b"oops"
        asyncio.run(asyncio.sleep(2))
        assert len(updates(settings)) == 1
        handler.status = 200
        second = make_pod(name="worker")
        handler.body = orjson.dumps({"apiVersion": "v1", "kind": "PodList", "items": [pod, second]})
        got = wait_for(
            lambda: (u := updates(settings)) and len(u) >= 2 and u, timeout=30, what="ADD worker", alive=proc
        )
        assert [(u.op, u.pod["metadata"]["name"]) for u in got] == [
            ("ADD", f"api-{settings.node}"),
            ("ADD", f"worker-{settings.node}"),
        ]
        handler.body = b""
        got = wait_for(
            lambda: (u := updates(settings)) and len(u) >= 4 and u, timeout=30, what="REMOVEs", alive=proc
        )
        assert sorted(u.op for u in got[2:]) == ["REMOVE", "REMOVE"]
        assert proc.stop() == 0
    finally:
        server.shutdown()


BAD_MANIFESTS = {
    "set.yaml": MANIFEST.format(image="app:1") + "  extra: !!set {a, b}\n",
    "intkey.yaml": MANIFEST.format(image="app:1").replace("  name: web\n", "  name: web\n  labels: {1: a}\n"),
    "spec.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: spec}\nspec: abc\n",
    "bomb.yaml": (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bomb}\nspec:\n  containers:\n    - name: main\n"
        '      args: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
        + "".join(
            f"      {b}: &{b} [{', '.join(['*' + a] * 9)}]\n"
            for a, b in zip("abcdefgh", "bcdefghi", strict=True)
        )
    ),
    "list.yaml": "apiVersion: v1\nkind: PodList\nitems: []\n",
}


def test_bad_manifests_never_stop_the_file_source_and_a_broken_edit_keeps_the_pod(
    settings: Settings, tmp_path: Path, podledger_process
) -> None:
    """docs/kubelet-rules.md, "The file source": every bad file is reported once with its path and
    reason, however often the directory is rescanned; a good file edited into a bad one (here: caught
    half-written) keeps its pod; the other files keep working."""
    asyncio.run(ensure_topics(settings))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name, text in BAD_MANIFESTS.items():
        (manifests / name).write_text(text)
    good = MANIFEST.format(image="app:1")
    (manifests / "web.yaml").write_text(good)
    proc = podledger_process(
        ["run", "--roles", "source"],
        env=source_env(settings, PODLEDGER_MANIFEST_DIR=str(manifests), PODLEDGER_FILE_CHECK_S="0.5"),
    )
    [add] = wait_for(lambda: (u := updates(settings)) and u, timeout=60, what="ADD web", alive=proc)
    assert (add.op, add.pod["metadata"]["name"]) == ("ADD", f"web-{settings.node}")

    (manifests / "web.yaml").write_text(good[: good.index("  containers:")])  # caught mid-write
    asyncio.run(asyncio.sleep(3))  # several rescans
    assert [u.op for u in updates(settings)] == ["ADD"]  # no REMOVE: the pod keeps running
    (manifests / "web.yaml").write_text(good)  # the write completes: the same pod, nothing to do
    (manifests / "other.yaml").write_text(MANIFEST.format(image="app:1").replace("name: web", "name: other"))
    got = wait_for(
        lambda: (u := updates(settings)) and len(u) >= 2 and u, timeout=30, what="ADD other", alive=proc
    )
    asyncio.run(asyncio.sleep(1))
    assert (
        [(u.op, u.pod["metadata"]["name"]) for u in updates(settings)]
        == [
            ("ADD", f"web-{settings.node}"),
            ("ADD", f"other-{settings.node}"),
        ]
        == [(u.op, u.pod["metadata"]["name"]) for u in got]
    )

    output = proc.output()
    for name in BAD_MANIFESTS:
        assert output.count(f"skipping manifest {manifests / name}:") == 1, (name, output)
    # The edit may be seen empty (truncated) and then cut short: each content is reported once.
    kept = [
        line.split(" msg=", 1)[1]
        for line in output.splitlines()
        if f"manifest {manifests / 'web.yaml'} is refused; its last good pod keeps running" in line
    ]
    assert kept and len(kept) == len(set(kept)), kept
    assert "tag !!set is not allowed" in output and "with its aliases expanded" in output
    assert proc.stop() == 0
