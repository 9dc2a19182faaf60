"""The human forms of the audit answers: kubectl-style tables, changes under each version, the
`why` report; and where the index lives (PODLEDGER_INDEX)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from podledger.config import Settings
from podledger.errors import UserError
from podledger.read.audit.render import history_lines, table, why_lines


def row(version: int, phase: str, state: str, cause: str, **extra: Any) -> dict[str, Any]:
    return {
        "version": version,
        "time": f"2024-05-01T14:02:0{version}.000Z",
        "phase": phase,
        "ready": "False",
        "containers": [{"name": "worker", "state": state, "reason": "", "ready": False, "restarts": 0}],
        "cause": {
            "type": cause,
            "topic": cause.split(":")[0],
            "partition": 1,
            "offset": 40 + version,
            "ts_ms": 9,
        },
        **extra,
    }


LIFE = {"uid": "u1", "namespace": "default", "name": "crashloop", "node": "node-a"}


def test_table_pads_columns_like_kubectl() -> None:
    assert table(["A", "LONGER"], [["xyz", "1"], ["q", "22"]]) == ["A     LONGER", "xyz   1", "q     22"]


def test_history_lines_table_wide_and_diff() -> None:
    versions = [
        row(1, "Pending", "waiting", "pod-updates:ADD"),
        row(2, "Running", "running", "pleg:ContainerStarted"),
    ]
    lines = history_lines([{**LIFE, "versions": versions}])
    assert lines[0] == "pod default/crashloop  uid u1  node node-a"
    assert lines[1].split() == ["VERSION", "TIME", "PHASE", "READY", "CONTAINERS", "CAUSE"]
    assert lines[3].split() == [
        "v2",
        "2024-05-01T14:02:02.000Z",
        "Running",
        "False",
        "worker=running,restarts=0",
        "pleg:ContainerStarted",
    ]
    wide = history_lines([{**LIFE, "versions": versions}], wide=True)
    assert wide[3].split()[-3:] == ["pleg:ContainerStarted", "pleg/1@42", "1970-01-01T00:00:00.009Z"]
    changes = [{"path": "phase", "before": "Pending", "after": "Running"}]
    diffed = history_lines([{**LIFE, "versions": [{**versions[1], "changes": changes}]}], with_diff=True)
    assert diffed[1].startswith("VERSION") and diffed[2].startswith("v2 ")
    assert diffed[3] == "    phase: Pending -> Running"


def test_two_lives_get_a_title_each() -> None:
    lives = [
        {**LIFE, "versions": [row(1, "Pending", "waiting", "pod-updates:ADD")]},
        {**LIFE, "uid": "u2", "versions": [row(1, "Pending", "waiting", "pod-updates:ADD")]},
    ]
    lines = history_lines(lives)
    assert [ln for ln in lines if ln.startswith("pod ")] == [
        "pod default/crashloop  uid u1  node node-a",
        "pod default/crashloop  uid u2  node node-a",
    ]


def test_why_lines_name_the_chain_rules_and_the_quiet_inputs() -> None:
    def inp(summary: str, effect: str, offset: int) -> dict[str, Any]:
        return {
            "time": "T",
            "input": {"topic": "pleg", "partition": 1, "offset": offset},
            "summary": summary,
            "effect": effect,
        }

    result = {
        **LIFE,
        "version": row(3, "Failed", "terminated", "pleg:ContainerDied"),
        "previous_version": 2,
        "next_version": None,
        "changes": [{"path": "phase", "before": "Running", "after": "Failed"}],
        "chain": [inp("pleg ContainerDied worker exit 1", "new version 3", 7)],
        "rules": ["phase rule (getPhase): Running -> Failed, restartPolicy Never: ..."],
        "unchanged_after": [inp("pleg ContainerStarted worker", "illegal transition dropped (...)", 8)],
        "replayed": True,
        "notes": [],
    }
    text = "\n".join(why_lines(result))
    assert "version 3 at 2024-05-01T14:02:03.000Z: phase Failed" in text
    assert "caused by pleg:ContainerDied pleg/1@43" in text
    assert "changes since version 2:\n  phase: Running -> Failed" in text
    assert "pleg/1@7   pleg ContainerDied worker exit 1   new version 3" in text
    assert "rules that decided it:\n  phase rule (getPhase): Running -> Failed" in text
    assert "(it is the latest version)" in text and "illegal transition dropped" in text
    quiet = why_lines({**result, "rules": [], "unchanged_after": [], "notes": ["journal incomplete"]})
    assert "  (no rule beyond the status generation itself)" in quiet and quiet[-2:] == [
        "  (none)",
        "note: journal incomplete",
    ]


def test_the_index_path_defaults_under_the_cache_per_topic_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PODLEDGER_CACHE", str(tmp_path))
    assert Settings.from_env(env={}, topic_prefix="team-a.").index_path() == str(
        tmp_path / "audit" / "team-a.sqlite"
    )
    assert Settings.from_env(env={"PODLEDGER_INDEX": str(tmp_path / "x.db")}).index_path() == str(
        tmp_path / "x.db"
    )
    with pytest.raises(UserError, match=r"PODLEDGER_INDEX=.* is a directory"):
        Settings.from_env(env={"PODLEDGER_INDEX": str(tmp_path)})
