"""`podledger run --roles fold --workers N` (podledger/workers.py): the restart back-off, what each
worker is given, which roles may run as several processes, and the supervisor itself over stand-in
children (tests/integration/test_fold_workers.py runs real fold workers on the broker)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from podledger.config import Settings
from podledger.errors import UserError
from podledger.workers import Backoff, check_workers, restart_delay, worker_env
from tests.support import wait_for
from tests.support.processes import run_podledger

BACKOFF = Backoff(first_s=1.0, max_s=30.0, healthy_after_s=60.0)

# (previous delay, how long the child ran, expected delay)
RESTART_DELAYS = [
    pytest.param(0.0, 0.5, 1.0, id="first_exit_waits_first_s"),
    pytest.param(1.0, 0.5, 2.0, id="failing_again_doubles"),
    pytest.param(8.0, 3.0, 16.0, id="still_failing_doubles_again"),
    pytest.param(16.0, 1.0, 30.0, id="capped_at_max_s"),
    pytest.param(30.0, 1.0, 30.0, id="stays_at_max_s"),
    pytest.param(30.0, 60.0, 1.0, id="a_healthy_run_starts_over"),
    pytest.param(0.0, 3600.0, 1.0, id="a_long_run_then_first_exit"),
]


@pytest.mark.parametrize(("previous", "ran", "expected"), RESTART_DELAYS)
def test_restart_delay(previous: float, ran: float, expected: float) -> None:
    assert restart_delay(previous, ran, BACKOFF) == expected


@pytest.mark.parametrize(
    ("roles", "workers", "allowed"),
    [
        ({"fold"}, 1, True),
        ({"fold"}, 8, True),
        ({"fold", "source", "sink"}, 1, True),
        ({"fold", "sink"}, 2, False),
        ({"node"}, 2, False),
        ({"sink"}, 3, False),
    ],
)
def test_only_the_fold_runs_as_several_workers(roles: set[str], workers: int, allowed: bool) -> None:
    if allowed:
        check_workers(roles, workers)
    else:
        with pytest.raises(UserError, match="--roles fold alone"):
            check_workers(roles, workers)


def test_each_worker_gets_the_settings_one_worker_its_own_data_dir_and_health_port(tmp_path: Path) -> None:
    settings = Settings.from_env(
        env={},
        bootstrap="broker:9092",
        topic_prefix="p.",
        partitions=12,
        fold_workers=4,
        health_port=9100,
        data_dir=str(tmp_path),
        api_source=False,
    )
    envs = [worker_env(settings, i) for i in range(4)]
    children = [Settings.from_env(env=env) for env in envs]
    for i, child in enumerate(children):
        assert child.fold_workers == 1  # a child never supervises children of its own
        assert child.data_dir == str(tmp_path / f"worker-{i}")
        assert child.health_port == 9100 + i
        # everything else as the supervisor has it
        assert child == replace(settings, fold_workers=1, data_dir=child.data_dir, health_port=9100 + i)
    assert not Settings.from_env(env=worker_env(Settings.from_env(env={}, fold_workers=2), 1)).health_port


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--roles", "fold,sink", "--workers", "2"], {}, "--roles fold alone"),
        (["--roles", "fold", "--workers", "65"], {}, "PODLEDGER_FOLD_WORKERS=65 is out of range"),
        (["--roles", "fold"], {"PODLEDGER_FOLD_WORKERS": "0"}, "PODLEDGER_FOLD_WORKERS=0 is out of range"),
        (["--roles", "node"], {"PODLEDGER_FOLD_WORKERS": "3"}, "not node"),
        (["--roles", "fold", "--workers", "2"], {}, "no Kafka broker configured"),
    ],
)
def test_run_refuses_workers_it_cannot_run(args: list[str], env: dict[str, str], needle: str) -> None:
    result = run_podledger("run", *args, env=env, timeout=60)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("podledger: error:") and needle in lines[0], result.stderr


# A stand-in fold worker: says hello with its data directory, counts its starts in a file, and
# ends as the test's EXIT_PLAN says for that start (a number: exit with it; "N@ready": exit with N
# once every other worker is waiting; "wait": until SIGTERM or SIGINT).
CHILD = textwrap.dedent(
    """
    import os, pathlib, signal, sys, time
    data = os.environ["PODLEDGER_DATA_DIR"]
    index = int(data.rsplit("-", 1)[1])
    starts_dir = pathlib.Path(os.environ["STARTS_DIR"])
    starts = starts_dir / f"worker-{index}"
    with starts.open("a") as f:
        f.write("start\\n")
    start = len(starts.read_text().splitlines())
    plans = os.environ["EXIT_PLAN"].split(";")
    plan = plans[index].split(",")
    step = plan[min(start, len(plan)) - 1]
    def bye(signum, frame):
        print(f"bye on {signal.Signals(signum).name}", flush=True)
        sys.exit(0)
    if step == "wait":  # able to say bye before its hello, which the tests wait for to signal
        signal.signal(signal.SIGTERM, bye)
        signal.signal(signal.SIGINT, bye)
    print(f"hello from {data} start {start}", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if step == "wait":
        (starts_dir / f"ready-{index}").touch()
        while True:
            time.sleep(0.1)
    code, _, when = step.partition("@")
    if when == "ready":  # exit only once every other worker can take a signal
        others = [starts_dir / f"ready-{i}" for i in range(len(plans)) if i != index]
        deadline = time.monotonic() + 20
        while not all(p.exists() for p in others) and time.monotonic() < deadline:
            time.sleep(0.01)
    sys.exit(int(code))
    """
)

DRIVER = textwrap.dedent(
    """
    import asyncio, sys
    from podledger.config import Settings
    from podledger.logs import setup_logging
    from podledger.workers import Backoff, Supervisor
    setup_logging("info")
    settings = Settings.from_env(env={}, data_dir=sys.argv[1], bootstrap="unused:9092")
    command = (sys.executable, "-c", sys.argv[3])
    backoff = Backoff(first_s=0.2, max_s=0.4, healthy_after_s=60)
    sys.exit(asyncio.run(Supervisor(settings, int(sys.argv[2]), backoff, command).run()))
    """
)


class Supervised:
    """The supervisor as a real process over stand-in children; its output kept in a file."""

    def __init__(self, tmp_path: Path, workers: int, plan: str) -> None:
        self.starts = tmp_path / "starts"
        self.starts.mkdir()
        self.log = tmp_path / "supervisor.log"
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(tmp_path / "data"), str(workers), CHILD],
            env={"STARTS_DIR": str(self.starts), "EXIT_PLAN": plan, "PATH": "/usr/bin:/bin"},
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def output(self) -> str:
        return self.log.read_text()

    def started(self, index: int) -> int:
        path = self.starts / f"worker-{index}"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def finish(self, timeout: float = 30) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._out.close()


def test_supervisor_prefixes_output_and_stops_every_worker_on_sigterm(tmp_path: Path) -> None:
    sup = Supervised(tmp_path, 2, "wait;wait")
    wait_for(lambda: "worker=1 hello" in sup.output() and "worker=0 hello" in sup.output(), 30)
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.finish() == 0, sup.output()
    out = sup.output()
    for i in (0, 1):
        assert f"worker={i} hello from {tmp_path / 'data' / f'worker-{i}'} start 1" in out
        assert f"worker={i} to stderr" in out
        assert f"worker={i} bye on SIGTERM" in out
    assert (sup.started(0), sup.started(1)) == (1, 1)


def test_supervisor_passes_sigint_on_once(tmp_path: Path) -> None:
    sup = Supervised(tmp_path, 2, "wait;wait")
    wait_for(lambda: sup.output().count("hello") == 2, 30)
    sup.proc.send_signal(signal.SIGINT)
    assert sup.finish() == 0, sup.output()
    assert sup.output().count("bye on SIGINT") == 2


def test_a_worker_that_exits_is_started_again_with_back_off(tmp_path: Path) -> None:
    # Worker 1 crashes twice (exit 1, then killed-like 137), then stays up; worker 0 never exits.
    sup = Supervised(tmp_path, 2, "wait;1,137,wait")
    wait_for(lambda: sup.started(1) == 3 and "worker=1 hello from" in sup.output(), 30)
    time.sleep(0.5)
    assert sup.started(0) == 1  # the others are left alone
    out = sup.output()
    assert "fold worker 1" in out and "exited with 1; starting it again in 0s" in out
    assert "exited with 137" in out
    sup.proc.send_signal(signal.SIGTERM)
    assert sup.finish() == 0, out
    assert sup.started(1) == 3


def test_a_configuration_error_stops_every_worker_and_exits_2(tmp_path: Path) -> None:
    sup = Supervised(tmp_path, 2, "wait;2@ready")
    assert sup.finish() == 2, sup.output()
    out = sup.output()
    assert "worker=0 bye on SIGTERM" in out
    assert sup.started(1) == 1  # not restarted
