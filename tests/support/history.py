"""The fold's pod-status history, checked: one status per (uid, version), versions without gaps,
and the history `podledger fold` makes of the same journal offline.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from podledger.schemas import decode, encode


def history_by_version(messages: list[tuple[int, bytes, bytes]]) -> dict[tuple[str, int], bytes]:
    """(uid, version) -> status; fails if one (uid, version) carries two different statuses."""
    out: dict[tuple[str, int], bytes] = {}
    for _, _, value in messages:
        vs = decode("pod-status-history", value)
        key = (vs.uid, vs.version)
        body = encode(vs.status)
        assert out.setdefault(key, body) == body, f"two statuses for {key}"
    return out


def assert_versions_have_no_gaps(history: dict[tuple[str, int], bytes]) -> dict[str, int]:
    """Every pod's versions run 1..n; returns each pod's newest version."""
    last: dict[str, list[int]] = {}
    for uid, version in history:
        last.setdefault(uid, []).append(version)
    for uid, versions in last.items():
        assert sorted(versions) == list(range(1, len(versions) + 1)), uid
    return {uid: max(v) for uid, v in last.items()}


def offline_fold(journal: list[tuple[int, bytes, bytes]], tmp_path: Path) -> list[bytes]:
    """`podledger fold` over the journal messages: the history it prints, line by line."""
    journal_file = tmp_path / "journal.jsonl"
    journal_file.write_bytes(b"\n".join(v for _, _, v in journal) + b"\n")
    offline = subprocess.run(
        [sys.executable, "-m", "podledger.cli", "fold", str(journal_file)], capture_output=True, timeout=300
    )
    assert offline.returncode == 0, offline.stderr
    return offline.stdout.splitlines()
