"""Settings from the environment: defaults, typed values, and one clear error for a bad one."""

from __future__ import annotations

import pytest

from podledger.config import Settings
from podledger.errors import UserError
from tests.support.processes import run_podledger


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("1", True),
        ("yes", True),
        ("on", True),
        ("false", False),
        ("False", False),
        ("0", False),
        ("no", False),
        ("off", False),
    ],
)
def test_booleans_accept_the_usual_spellings(raw: str, expected: bool) -> None:
    assert Settings.from_env(env={"PODLEDGER_API_SOURCE": raw}).api_source is expected


def test_api_source_is_on_by_default() -> None:
    assert Settings.from_env(env={}).api_source is True


@pytest.mark.parametrize("raw", ["maybe", "2", "enabled", "tru"])
def test_a_boolean_that_is_neither_is_an_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(UserError, match=f"PODLEDGER_API_SOURCE='{raw}' is not a boolean"):
        Settings.from_env(env={"PODLEDGER_API_SOURCE": raw})


def test_a_bad_number_is_an_error_naming_the_variable() -> None:
    with pytest.raises(UserError, match="PODLEDGER_PARTITIONS='many' is not a number"):
        Settings.from_env(env={"PODLEDGER_PARTITIONS": "many"})


def test_overrides_win_over_the_environment() -> None:
    settings = Settings.from_env(env={"PODLEDGER_API_SOURCE": "true"}, api_source=False)
    assert settings.api_source is False


@pytest.mark.parametrize(
    ("variable", "value", "accepted"),
    [
        ("PODLEDGER_SINK_WORKERS", "0", "from 1 to 1024"),
        ("PODLEDGER_SINK_RECONCILE_MS", "-5", "from 100 to 86400000"),
        ("PODLEDGER_HEALTH_PORT", "70000", "from 0 to 65535"),
        ("PODLEDGER_PARTITIONS", "0", "from 1 to 10000"),
        ("PODLEDGER_RELIST_PERIOD_S", "nan", "from 0.05 to 60"),
        ("PODLEDGER_RUNTIME_DEFAULT_UID", "0", "from 1 to"),
        ("PODLEDGER_SESSION_TIMEOUT_MS", "100", "from 6000 to 1800000"),
        ("PODLEDGER_RUNTIME", "docker", "not one of process, sim"),
        ("PODLEDGER_LOG_LEVEL", "loud", "not one of debug, info, warning, error, critical"),
    ],
)
def test_a_setting_out_of_range_exits_2_with_one_line_naming_it(
    variable: str, value: str, accepted: str
) -> None:
    result = run_podledger("topics", "describe", env={"PODLEDGER_BOOTSTRAP": "127.0.0.1:1", variable: value})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert variable in lines[0] and accepted in lines[0]


def test_every_numeric_setting_has_a_range_and_its_default_is_in_it() -> None:
    import dataclasses

    from podledger.config import RANGES

    numeric = {f.name for f in dataclasses.fields(Settings) if str(f.type) in ("int", "float")}
    assert numeric == set(RANGES)
    defaults = Settings()
    for name, (low, high) in RANGES.items():
        assert low <= getattr(defaults, name) <= high, name
