"""Fixtures for the unit tests: pure functions and single processes, no broker, no apiserver."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def no_users_services(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test never reaches a broker or cluster, even one the environment names: any setting
    it needs, it passes explicitly."""
    for name in list(os.environ):
        if name.startswith("PODLEDGER_") or name == "KUBECONFIG":
            monkeypatch.delenv(name)
