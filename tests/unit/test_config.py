"""Settings from the environment: defaults, typed values, and one clear error for a bad one."""

from __future__ import annotations

import pytest

from podledger.config import Settings
from podledger.errors import UserError


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
