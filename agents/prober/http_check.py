"""The httpGet probe handler (pkg/probe/http): one GET, its redirects and the start of its body, bounded by
timeoutSeconds."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from podledger.agents.prober.handler_constants import MAX_OUTPUT_BYTES, USER_AGENT
from podledger.agents.prober.results import CheckOutcome, CheckResult
from podledger.agents.prober.specs import DEFAULT_TIMEOUT_S

MAX_REDIRECTS = 10
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
REDIRECT_WARNING = "Probe terminated redirects"


def _request_headers(
    http_headers: Sequence[Mapping[str, Any]] | None,
) -> tuple[list[tuple[str, str]], set[str]]:
    """The probe's headers with upstream's defaults: User-Agent kube-probe/..., Accept */* unless given.

    An Accept header given with an empty value removes Accept altogether. Returns (headers, names aiohttp
    must not add by itself).
    """
    headers = [(str(h["name"]), str(h.get("value") or "")) for h in http_headers or []]
    names = {name.lower() for name, _ in headers}
    if "user-agent" not in names:
        headers.append(("User-Agent", USER_AGENT))
    skip = {"Accept-Encoding", "User-Agent"}  # no compression negotiation, like the kubelet's transport
    if "accept" not in names:
        headers.append(("Accept", "*/*"))
    elif not any(value for name, value in headers if name.lower() == "accept"):
        headers = [(name, value) for name, value in headers if name.lower() != "accept"]
        skip.add("Accept")
    return headers, skip


async def http_get_check(
    url: str,
    *,
    headers: Sequence[Mapping[str, Any]] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CheckOutcome:
    """GET the URL: 2xx is Success, 3xx Warning, anything else (or no answer in time) Failure.

    Certificates are not verified. Redirects to the same host name are followed (at most 10, counting
    as in Go's client); a redirect elsewhere is not followed, and the 3xx itself answers as a Warning.
    The timeout covers the whole exchange, redirects and the first 10 KiB of body included.
    """
    request_headers, skip = _request_headers(headers)
    host_header = next((v for n, v in request_headers if n.lower() == "host"), "")
    first_host = urlsplit(url).hostname
    connector = aiohttp.TCPConnector(ssl=False, force_close=True)
    try:
        async with (
            asyncio.timeout(timeout_s),
            aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=False) as session,
        ):
            current, followed = url, 0
            while True:
                async with session.get(
                    current,
                    headers=request_headers,
                    skip_auto_headers=skip,
                    allow_redirects=False,
                ) as response:
                    status = response.status
                    location = response.headers.get("Location")
                    if status in _REDIRECT_CODES and location:
                        target = urljoin(current, location)
                        if urlsplit(target).hostname == first_host:
                            followed += 1
                            if followed >= MAX_REDIRECTS:
                                return CheckOutcome.failed(
                                    f'Get "{target}": stopped after {MAX_REDIRECTS} redirects'
                                )
                            if host_header and urlsplit(location).scheme:
                                # like Go: a custom Host header survives relative redirects only
                                request_headers = [(n, v) for n, v in request_headers if n.lower() != "host"]
                                host_header = ""
                            current = target
                            continue
                    try:
                        body = (await _read_at_most(response.content, MAX_OUTPUT_BYTES)).decode(
                            errors="replace"
                        )
                    except (aiohttp.ClientError, OSError) as e:
                        error = f"reading the response body of {current}: {e}"
                        return CheckOutcome(CheckResult.FAILURE, "", error)
                    if 200 <= status < 300:
                        return CheckOutcome(CheckResult.SUCCESS, body)
                    if 300 <= status < 400:
                        warning = f"{REDIRECT_WARNING}, Response body: {body}"
                        return CheckOutcome(CheckResult.WARNING, warning)
                    # never put the body in a failure message (upstream issue 99425)
                    return CheckOutcome.failed(f"HTTP probe failed with statuscode: {status}")
    except TimeoutError:
        return CheckOutcome.failed(
            f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
        )
    except (aiohttp.ClientError, OSError, ValueError) as e:
        return CheckOutcome.failed(f'Get "{url}": {e}')


async def _read_at_most(stream: aiohttp.StreamReader, limit: int) -> bytes:
    data = bytearray()
    while len(data) < limit:
        chunk = await stream.read(limit - len(data))
        if not chunk:
            break
        data.extend(chunk)
    return bytes(data)
