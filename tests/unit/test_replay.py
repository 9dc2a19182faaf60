"""One fold, two drivers (pure side): `podledger fold` over ingress lines and over the journal
they produce give the same history; bad lines are rejected and the good ones still fold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from podledger.schemas import encode
from podledger.streams.replay import ReplayStats, replay
from podledger.workload import workload


def ingress_lines(pods: int = 20, events: int = 400) -> list[bytes]:
    return [encode(e.value) for e in workload(pods, events, nodes=3, seed=7)]


def test_fold_over_ingress_then_over_its_journal_gives_the_same_history() -> None:
    outputs = list(replay(ingress_lines()))
    history = [encode(o.value) for o in outputs if o.topic == "pod-status-history"]
    journal = [encode(o.value) for o in outputs if o.topic == "journal"]
    assert len(journal) == 400 and len(history) > 20
    again = [encode(o.value) for o in replay(journal) if o.topic == "pod-status-history"]
    assert again == history


def test_versions_rise_by_one_per_pod() -> None:
    seen: dict[str, int] = {}
    for out in replay(ingress_lines()):
        if out.topic == "pod-status-history":
            assert out.value.version == seen.get(out.value.uid, 0) + 1
            seen[out.value.uid] = out.value.version
    assert len(seen) == 20


def test_bad_lines_are_rejected_and_good_ones_around_them_fold() -> None:
    good = ingress_lines(pods=2, events=10)
    bad = [
        b"{not json",
        b"[1, 2]",
        b'{"op": "EXPLODE", "source": "api", "node": "n", "pod": {}, "ts_ms": 1}',
        b'{"hello": 1}',
    ]
    lines = good[:2] + bad + good[2:]
    stats = ReplayStats()
    outputs = list(replay(lines, stats=stats))
    letters = [o.value for o in outputs if o.topic == "dead-letter"]
    assert [d.reason for d in letters] == ["malformed", "schema", "unknown_op", "schema"]
    assert [d.offset for d in letters] == [3, 4, 5, 6]  # the line numbers
    assert stats.events == 10 and stats.rejected == 4
    # The rejected lines shift the line numbers (the offsets), not the statuses.
    statuses = [
        (o.value.uid, o.value.version, o.value.status) for o in outputs if o.topic == "pod-status-history"
    ]
    clean_statuses = [
        (o.value.uid, o.value.version, o.value.status)
        for o in replay(good)
        if o.topic == "pod-status-history"
    ]
    assert statuses == clean_statuses


def test_cli_fold_reads_a_file_and_reports(tmp_path: Path) -> None:
    path = tmp_path / "ingress.jsonl"
    path.write_bytes(b"\n".join(ingress_lines(pods=5, events=60)) + b"\n{oops\n")
    result = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "fold", str(path)], capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    versions = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert versions and all(v["version"] >= 1 and v["cause"]["type"] for v in versions)
    err = result.stderr.decode()
    assert "rejected: line 61: not JSON" in err and "60 events of 5 pods" in err and "1 rejected" in err
    strict = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "fold", "--strict", str(path)],
        capture_output=True,
        timeout=60,
    )
    assert strict.returncode == 1
    piped = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "fold", "-"],
        input=path.read_bytes(),
        capture_output=True,
        timeout=60,
    )
    assert piped.stdout == result.stdout
