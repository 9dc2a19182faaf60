"""`podledger ui` refuses what it must not do, in one line: listening beyond loopback without
--allow-remote, a malformed address, an index that is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.processes import run_podledger


def one_line_error(*args: str, env: dict[str, str] | None = None) -> str:
    result = run_podledger("ui", *args, env=env, timeout=60)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stdout + result.stderr
    assert lines[0].startswith("podledger: error:")
    return lines[0]


@pytest.mark.parametrize("listen", ["0.0.0.0:8080", "10.1.2.3:0", "[::]:8080", "ui.example:8080"])
def test_beyond_loopback_only_when_asked(listen: str, tmp_path: Path) -> None:
    error = one_line_error("--listen", listen, "--no-refresh", env={"PODLEDGER_INDEX": str(tmp_path / "x")})
    assert "beyond loopback" in error and "--allow-remote" in error


def test_a_malformed_address(tmp_path: Path) -> None:
    error = one_line_error("--listen", "localhost", "--no-refresh")
    assert "--listen: 'localhost' is not HOST:PORT" in error


def test_no_index_yet(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    error = one_line_error("--listen", "127.0.0.1:0", "--no-refresh", env={"PODLEDGER_INDEX": str(missing)})
    assert f"no audit index at {missing}" in error and "podledger index --once" in error
