"""The grpc probe handler (pkg/probe/grpc): one grpc.health.v1.Health/Check call, bounded by
timeoutSeconds."""

from __future__ import annotations

import asyncio
import json
import time

import grpc
import grpc.aio

from podledger.agents.prober.grpc_health import (
    HEALTH_CHECK_METHOD,
    SERVING,
    SERVING_STATUS_NAMES,
    decode_health_response,
    encode_health_request,
)
from podledger.agents.prober.handler_constants import USER_AGENT
from podledger.agents.prober.results import CheckOutcome, CheckResult
from podledger.agents.prober.specs import DEFAULT_TIMEOUT_S, join_host_port
from podledger.agents.worker.lifecycle import format_go_duration


async def grpc_check(
    host: str, port: int, *, service: str = "", timeout_s: float = DEFAULT_TIMEOUT_S
) -> CheckOutcome:
    """Call grpc.health.v1.Health/Check over plaintext: SERVING is Success, everything else Failure.

    One deadline covers connecting and the call, as upstream's blocking dial plus RPC under one context.
    The messages are encoded by hand, so no generated protobuf code is needed.
    """
    address = join_host_port(host, port)
    timeout_text = format_go_duration(timeout_s)
    deadline = time.monotonic() + timeout_s
    async with grpc.aio.insecure_channel(
        address, options=[("grpc.primary_user_agent", USER_AGENT), ("grpc.enable_http_proxy", 0)]
    ) as channel:
        try:
            await asyncio.wait_for(channel.channel_ready(), timeout_s)
        except TimeoutError:
            return CheckOutcome.failed(
                f"timeout: failed to connect service {json.dumps(address)} within {timeout_text}: "
                "context deadline exceeded"
            )
        check = channel.unary_unary(HEALTH_CHECK_METHOD)
        try:
            reply = await check(
                encode_health_request(service), timeout=max(deadline - time.monotonic(), 0.001)
            )
        except grpc.aio.AioRpcError as e:
            code = e.code()
            if code == grpc.StatusCode.UNIMPLEMENTED:
                return CheckOutcome.failed(
                    "error: this server does not implement the grpc health protocol "
                    f"(grpc.health.v1.Health): {e.details()}"
                )
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                return CheckOutcome.failed(f"timeout: health rpc did not complete within {timeout_text}")
            detail = f"rpc error: code = {_go_code_name(code)} desc = {e.details()}"
            return CheckOutcome.failed(f"error: health rpc probe failed: {detail}")
        try:
            status = decode_health_response(bytes(reply))
        except ValueError as e:
            return CheckOutcome.failed(f"error: health rpc probe failed: {e}")
    if status != SERVING:
        name = SERVING_STATUS_NAMES.get(status, str(status))
        return CheckOutcome.failed(f"service unhealthy (responded with {json.dumps(name)})")
    return CheckOutcome(CheckResult.SUCCESS, "service healthy")


def _go_code_name(code: grpc.StatusCode) -> str:
    """grpc-go's spelling of a status code (NotFound, DeadlineExceeded, ...)."""
    return "".join(part.capitalize() for part in code.name.split("_")).replace("Ok", "OK")
