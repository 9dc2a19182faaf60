"""A child started with die_with_parent does not outlive its parent, even one killed by SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

# The middle process starts a long sleeper the way podledger starts its children, prints its pid,
# and waits: the test kills the middle process hard and watches the sleeper.
_MIDDLE = """
import subprocess, sys, time
from podledger.children import die_with_parent
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], preexec_fn=die_with_parent)
print(child.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (dead, not yet reaped by init) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1].startswith("Z")
    except FileNotFoundError:  # reaped meanwhile
        return True


def test_child_dies_when_its_parent_is_killed() -> None:
    middle = subprocess.Popen([sys.executable, "-c", _MIDDLE], stdout=subprocess.PIPE)
    assert middle.stdout is not None
    child_pid = int(middle.stdout.readline())
    try:
        assert not _gone(child_pid)
        assert os.getsid(child_pid) == child_pid  # a session of its own
        middle.send_signal(signal.SIGKILL)
        middle.wait()
        deadline = time.monotonic() + 10
        while not _gone(child_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(child_pid)
    finally:
        if not _gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)
