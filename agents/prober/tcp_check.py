"""The tcpSocket probe handler (pkg/probe/tcp): one connection, bounded by timeoutSeconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket

from podledger.agents.prober.results import CheckOutcome, CheckResult
from podledger.agents.prober.specs import DEFAULT_TIMEOUT_S, join_host_port


async def tcp_check(host: str, port: int, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> CheckOutcome:
    """Open a TCP connection and close it at once: connected is Success, anything else Failure."""
    address = join_host_port(host, port)
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except TimeoutError:
        return CheckOutcome.failed(f"dial tcp {address}: i/o timeout")
    except OSError as e:
        if e.errno and not isinstance(e, socket.gaierror):  # Go's wording: "connect: connection refused"
            return CheckOutcome.failed(f"dial tcp {address}: connect: {os.strerror(e.errno).lower()}")
        return CheckOutcome.failed(f"dial tcp {address}: {e}")
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return CheckOutcome(CheckResult.SUCCESS)
