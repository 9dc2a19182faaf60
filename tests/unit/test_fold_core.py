"""The native fold core (streams/foldcore/, built by `make install`) against the Python fold: over
workloads, journals and the rules-version input, `podledger fold` prints the same history bytes
whichever folds; what the core does not cover it refuses, naming the line, and `podledger fold`
then folds in Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from podledger.schemas import encode
from podledger.streams.native_replay import CoreStats, GaveUp, find_core, fold_file
from podledger.streams.replay import replay
from podledger.types import Topic
from podledger.workload import workload
from tests.unit.test_rules_version import T0, fixed_input


@pytest.fixture(scope="module")
def core() -> str:
    found = find_core("auto")
    assert found, "the native fold core is not built: `make install` builds it (it needs Go)"
    return found


def python_history(lines: list[bytes]) -> bytes:
    return b"".join(
        encode(o.value) + b"\n" for o in replay(lines) if o.topic == Topic.POD_STATUS_HISTORY and o.value
    )


def journal_of(lines: list[bytes]) -> list[bytes]:
    """The journal the live fold would write for these inputs: what it applied, in its order."""
    return [encode(o.value) for o in replay(lines) if o.topic == Topic.JOURNAL]


def core_fold(core: str, tmp_path: Path, lines: list[bytes]) -> tuple[bytes, CoreStats | GaveUp]:
    source, out = tmp_path / "input.jsonl", tmp_path / "history.jsonl"
    source.write_bytes(b"".join(line + b"\n" for line in lines))
    with open(out, "wb") as history:
        result = fold_file(core, source, history)
    return out.read_bytes(), result


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_core_folds_a_workload_as_the_python_fold_does(core: str, tmp_path: Path, seed: int) -> None:
    lines = [encode(e.value) for e in workload(300, 6000, nodes=6, seed=seed, start_ms=T0)]
    expected = python_history(lines)
    history, result = core_fold(core, tmp_path, lines)
    assert isinstance(result, CoreStats), result
    assert result.events == 6000 and result.pods == 300 and result.versions == expected.count(b"\n")
    assert history == expected


def test_the_core_folds_the_journal_of_the_rules_version_input_as_the_python_fold_does(
    core: str, tmp_path: Path
) -> None:
    """The rules-version input (tests/unit/test_rules_version.py) has deletions, terminations,
    static pods and held events; its journal has them in the order the fold applied them."""
    journal = journal_of(fixed_input())
    expected = python_history(journal)
    history, result = core_fold(core, tmp_path, journal)
    assert isinstance(result, CoreStats), result
    assert expected.count(b"\n") > 500
    assert history == expected


def test_the_core_refuses_what_it_does_not_cover_and_names_the_line(core: str, tmp_path: Path) -> None:
    lines = [encode(e.value) for e in workload(5, 40, nodes=1, seed=5, start_ms=T0)]
    cases = {
        "not JSON": ([*lines[:2], b"{not json", *lines[2:]], 3),
        # Valid (the pod is free JSON), but the core keeps integers only: Python folds it.
        "a float": ([lines[0].replace(b'"pod":{', b'"pod":{"weight":0.5,', 1), *lines[1:]], 1),
        "held": ([lines[i] for i in range(len(lines)) if b'"op":"ADD"' not in lines[i]], 1),
    }
    for name, (case, line) in cases.items():
        _, result = core_fold(core, tmp_path, case)
        assert isinstance(result, GaveUp), name
        assert result.line == line, (name, result)


def _podledger_fold(path: Path, core_setting: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PODLEDGER_FOLD_CORE": core_setting}
    return subprocess.run(
        [sys.executable, "-m", "podledger.cli", "fold", *extra, str(path)],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_podledger_fold_runs_the_core_or_falls_back_to_python_with_the_same_output(
    core: str, tmp_path: Path
) -> None:
    lines = [encode(e.value) for e in workload(20, 400, nodes=2, seed=7, start_ms=T0)]
    covered, uncovered = tmp_path / "covered.jsonl", tmp_path / "uncovered.jsonl"
    covered.write_bytes(b"".join(line + b"\n" for line in lines))
    uncovered.write_bytes(b"".join(line + b"\n" for line in [*lines[:10], b"[1, 2]", *lines[10:]]))

    native = _podledger_fold(covered, core)
    python = _podledger_fold(covered, "off")
    assert native.returncode == python.returncode == 0, native.stderr + python.stderr
    assert b"(native core)" in native.stderr and b"(native core)" not in python.stderr
    assert native.stdout == python.stdout and native.stdout.count(b"\n") > 100

    fallback = _podledger_fold(uncovered, core, "--strict")
    assert fallback.returncode == 1  # the Python fold rejected the line, and --strict says so
    assert b"does not cover line 11" in fallback.stderr and b"folding in Python" in fallback.stderr
    assert b"rejected: line 11: not a JSON object" in fallback.stderr
    # (Bare ingress values take their line numbers as offsets, which the extra line moved.)
    assert fallback.stdout == _podledger_fold(uncovered, "off").stdout
    assert fallback.stdout.count(b"\n") == python.stdout.count(b"\n")


def test_podledger_fold_spools_standard_input_for_the_core_and_for_python(core: str, tmp_path: Path) -> None:
    lines = [encode(e.value) for e in workload(10, 200, nodes=1, seed=8, start_ms=T0)]
    covered = b"".join(line + b"\n" for line in lines)
    uncovered = covered + b"{oops\n"
    for data, marker in ((covered, b"(native core)"), (uncovered, b"folding in Python")):
        done = subprocess.run(
            [sys.executable, "-m", "podledger.cli", "fold", "-"],
            input=data,
            capture_output=True,
            env={**os.environ, "PODLEDGER_FOLD_CORE": core},
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and marker in done.stderr, done.stderr
        assert done.stdout == python_history(data.splitlines())


def test_podledger_fold_reports_the_cores_progress(core: str, tmp_path: Path) -> None:
    path = tmp_path / "blank.jsonl"
    path.write_bytes(b"\n" * 100_000 + b"".join(encode(e.value) + b"\n" for e in workload(2, 10, nodes=1)))
    done = _podledger_fold(path, core, "--progress")
    assert done.returncode == 0, done.stderr
    assert b"podledger fold: 100000 lines ..." in done.stderr and b"(native core)" in done.stderr


def test_a_core_setting_that_names_no_executable_is_a_clear_error(tmp_path: Path) -> None:
    done = _podledger_fold(tmp_path / "none.jsonl", str(tmp_path / "missing-core"))
    assert done.returncode != 0
    assert b"PODLEDGER_FOLD_CORE=" in done.stderr and b"not an executable" in done.stderr


def test_podledger_fold_takes_the_window_and_refuses_one_out_of_range(core: str, tmp_path: Path) -> None:
    """The core folds a window of input at a time, pod by pod: over windows of 1 MB (this input
    is 2.5 MB of 6,000 events) the history is still the Python fold's, in input order."""
    lines = [encode(e.value) for e in workload(400, 6000, nodes=4, seed=9, start_ms=T0)]
    source = tmp_path / "input.jsonl"
    source.write_bytes(b"".join(line + b"\n" for line in lines))
    assert source.stat().st_size > 2 << 20

    windowed = _podledger_fold(source, core, "--window-mb", "1")
    assert windowed.returncode == 0 and b"(native core)" in windowed.stderr, windowed.stderr
    assert windowed.stdout == python_history(lines)

    for bad in ("0", "1025", "many"):
        refused = _podledger_fold(source, core, "--window-mb", bad)
        assert refused.returncode == 2 and b"--window-mb" in refused.stderr, refused.stderr
        assert refused.stdout == b""
