"""The load of `podledger bench fold`'s latency phase: ingress events produced at a fixed rate.

The producer stands for the node agents, which run on other machines; on the benchmark's machine
it shares the cores with the fold worker, its native core and the broker. So it runs in a process
of its own at a lower priority (PACER_NICENESS), and sends what is due every PACE_TICK_S as one
record batch per topic-partition, one send at a time. Sending a record at a time from the
benchmark's own process cost it a third to a half of a core at 4,000-5,000 events/s on the
2-core test machine, which left the worker a saturated machine (docs/capacity.md). The latency is
timed from the broker's append, so when within a tick an event was made does not count.

The child runs `main(FILE)`: FILE holds the pickled (settings, events, rate) that `produce_apart`
wrote for it in a private temporary directory. It imports the function rather than running this
module with `-m`, which the package (its `__init__` imports this module) would load twice.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from podledger.config import Settings
from podledger.delivery import OutRecord, ProducerSlot, deliver_batched
from podledger.errors import UserError
from podledger.logs import setup_logging
from podledger.partitioner import partition_for_node
from podledger.schemas import encode
from podledger.workload import IngressEvent

PACE_TICK_S = 0.005
PACER_NICENESS = 10
_CHILD = "import sys; from podledger.bench.pacer import main; main(sys.argv[1])"


def produce_apart(settings: Settings, events: list[IngressEvent], rate: int) -> None:
    """Produce `events` at `rate` per second from a child process at PACER_NICENESS; returns when
    every one is acknowledged."""
    with tempfile.TemporaryDirectory(prefix="podledger-bench-pacer-") as folder:
        load = Path(folder) / "load.pickle"
        load.write_bytes(pickle.dumps((settings, events, rate)))
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(load)], stdin=subprocess.DEVNULL, check=False
        )
    if done.returncode != 0:
        raise UserError(f"the latency phase's producer exited with {done.returncode}")


async def paced_produce(settings: Settings, events: list[IngressEvent], rate: int) -> None:
    """Send `events` to their topics at `rate` per second through the producer the node roles
    publish with (ProducerSlot): every PACE_TICK_S, what has come due goes out as one send, or,
    while the send before is unacknowledged, waits to go with the next. One send at a time is how
    a producer batches behind a slow acknowledgement; a send per tick regardless queued a waiter
    per tick and topic-partition in aiokafka whenever acknowledgements fell behind, and aiokafka
    refused some of them (KafkaTimeoutError), sent again later in a burst."""
    slot = ProducerSlot(settings, linger_ms=0)
    in_flight: asyncio.Task[list[int]] | None = None
    try:
        start, sent = time.monotonic(), 0
        while sent < len(events):
            due = min(len(events), int((time.monotonic() - start) * rate) + 1)
            if due > sent and (in_flight is None or in_flight.done()):
                if in_flight is not None:
                    in_flight.result()  # deliver_batched never gives up; this re-raises a bug
                now_ms = int(time.time() * 1000)
                records = [
                    OutRecord(
                        settings.topic(e.topic),
                        partition_for_node(e.node, settings.partitions),
                        e.key.encode(),
                        encode(replace(e.value, ts_ms=now_ms)),
                    )
                    for e in events[sent:due]
                ]
                in_flight = asyncio.ensure_future(deliver_batched(records, slot.get, slot.health))
                sent = due
            await asyncio.sleep(PACE_TICK_S)
        if in_flight is not None:
            await in_flight
    finally:
        await slot.reset()


def main(path: str) -> None:
    os.nice(PACER_NICENESS)
    setup_logging("warning")  # a refused send is said as the services say it
    settings, events, rate = pickle.loads(Path(path).read_bytes())
    asyncio.run(paced_produce(settings, events, rate))
