"""The health server's answers and counters, and how services wait for an unreachable broker."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from aiokafka.errors import KafkaConnectionError

from podledger import local
from podledger.config import Settings
from podledger.delivery import DeliveryHealth
from podledger.health import HealthServer, prometheus_text
from podledger.kafka import new_consumer, started


def test_healthz_answers_for_all_checks_or_one() -> None:
    state = {"kafka": (True, "ok"), "apiserver": (False, "watch down for 90s")}
    server = HealthServer("test", {name: (lambda name=name: state[name]) for name in state})
    assert server.answer("/healthz") == ("500 Internal Server Error", "text/plain", "watch down for 90s\n")
    assert server.answer("/healthz/kafka") == ("200 OK", "text/plain", "ok\n")
    assert server.answer("/healthz/apiserver?verbose")[0].startswith("500")
    assert server.answer("/healthz/nope")[0] == "404 Not Found"
    assert server.answer("/metrics")[0] == "404 Not Found"  # none configured
    state["apiserver"] = (True, "ok")
    assert server.answer("/healthz")[0] == "200 OK"


def test_metrics_are_prometheus_text() -> None:
    text = prometheus_text(
        {
            "podledger_fold_dead_letters_total": {(("reason", 'a"b'),): 2.0},
            "podledger_fold_events_total": {(): 7},
        },
        {"podledger_sink_pods_retrying": {(): 1}},
    )
    assert text.splitlines() == [
        "# TYPE podledger_fold_dead_letters_total counter",
        'podledger_fold_dead_letters_total{reason="a\\"b"} 2',
        "# TYPE podledger_fold_events_total counter",
        "podledger_fold_events_total 7",
        "# TYPE podledger_sink_pods_retrying gauge",
        "podledger_sink_pods_retrying 1",
    ]
    server = HealthServer("test", {}, lambda: text)
    assert server.answer("/metrics") == ("200 OK", "text/plain; version=0.0.4", text)


def test_delivery_turns_unhealthy_only_after_failing_for_a_while() -> None:
    now = [100.0]
    health = DeliveryHealth(clock=lambda: now[0])
    health.failed(KafkaConnectionError("down"))
    assert health.healthy()[0]
    now[0] += 31
    ok, why = health.healthy()
    assert not ok and "failing for 31s" in why and "down" in why
    health.delivered()
    assert health.healthy() == (True, "ok")


@pytest.mark.parametrize("wait_s", [0.0, 3.0])
def test_a_service_waits_for_an_unreachable_broker_then_gives_up(wait_s: float) -> None:
    settings = Settings(bootstrap=f"127.0.0.1:{local.free_port()}")
    begun = time.monotonic()
    with pytest.raises(KafkaConnectionError):
        asyncio.run(started(lambda: new_consumer(settings), "test", wait_s, settings.bootstrap))
    waited = time.monotonic() - begun
    assert (waited >= 2.5) if wait_s else (waited < 2.5)


def test_a_broker_that_answers_but_refuses_us_is_an_error_at_once() -> None:
    """Something listens and hangs up on us (as a TLS or SASL listener refusing our credentials
    does): waiting cannot help, so the service does not wait."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def hang_up() -> None:
        with contextlib.suppress(OSError):
            while True:
                server.accept()[0].close()

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        settings = Settings(bootstrap=f"127.0.0.1:{server.getsockname()[1]}")
        begun = time.monotonic()
        with pytest.raises(KafkaConnectionError):
            asyncio.run(started(lambda: new_consumer(settings), "test", 60.0, settings.bootstrap))
        assert time.monotonic() - begun < 15
    finally:
        server.close()
