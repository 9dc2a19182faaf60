"""Secrets stay secret: no password, token or key appears in the repr of what holds it, so no log
line or error message that formats such an object can show it."""

from __future__ import annotations

from podledger.config import Settings
from podledger.keys import Signer
from podledger.local.apiserver import KubeHandle
from podledger.schemas.origin import derive_keys

SECRET = "s3cret-value-never-shown"


def test_settings_hide_the_kafka_password() -> None:
    settings = Settings(node="n", kafka_sasl_password=SECRET)
    assert SECRET not in repr(settings) and SECRET not in str(settings)


def test_node_keys_and_signers_hide_their_keys() -> None:
    keys = derive_keys("node-a", SECRET.encode() * 2)
    for shown in (repr(keys), str(keys), repr(Signer(keys).keys)):
        assert keys.status.hex() not in shown and keys.self_.hex() not in shown and SECRET not in shown


def test_the_local_apiserver_handle_hides_its_admin_token() -> None:
    handle = KubeHandle("kubeconfig", "https://127.0.0.1:1", SECRET, [1], "workdir", [])
    assert SECRET not in repr(handle)
