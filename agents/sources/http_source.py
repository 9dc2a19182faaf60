"""The http pod source (config/http.go): static pods from a manifest URL, polled every period.

Each body that changed is decoded (agents/sources/manifest_decoding.py) into a whole snapshot (SET) of
its pods and handed to the kubelet's podStorage merge (agents/sources/pod_config.py), whose
incremental ops go to pod-updates. Nothing a server sends stops the source: a failed request, a status
other than 200, an oversized or invalid body is logged (quieter after a few in a row) and the last
good pods stay.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from podledger.agents.sources.manifest_decoding import one_line, parse_manifest
from podledger.agents.sources.manifests import MAX_MANIFEST_BYTES, ManifestError
from podledger.agents.sources.pod_config import HTTP_SOURCE, PodStorage
from podledger.agents.sources.publish import publish_merge
from podledger.types import JSONDict, PublishUpdate

__all__ = ["LOUD_URL_FAILURES", "MAX_REDIRECTS", "URL_DEADLINE_S", "HttpSource"]

log = logging.getLogger(__name__)

URL_DEADLINE_S = 10.0  # upstream's http.Client Timeout: the whole request, redirects and body included
MAX_REDIRECTS = 10  # Go's http.Client follows at most 10 redirects
LOUD_URL_FAILURES = 3  # as upstream, later consecutive failures of the URL are logged at debug level


class HttpSource:
    """Polls a manifest URL every `period_s` (config/http.go): each request, redirects and body
    included, must finish within `deadline_s` (10 s); the body may hold at most `max_bytes` (10 MiB);
    at most 10 redirects are followed, to http or https only.

    A status other than 200, a failed request, an oversized or invalid body changes nothing: the last
    good pods stay. An empty body is an empty SET. A body identical to the last one is not decoded
    again, so an invalid body is reported once.
    """

    name = HTTP_SOURCE  # the pod-updates source tag

    def __init__(
        self,
        url: str,
        node: str,
        publish: PublishUpdate,
        storage: PodStorage,
        period_s: float = 20.0,
        *,
        deadline_s: float = URL_DEADLINE_S,
        max_bytes: int = MAX_MANIFEST_BYTES,
    ) -> None:
        self.url, self.node, self.publish, self.storage, self.period_s = url, node, publish, storage, period_s
        self.deadline_s, self.max_bytes = deadline_s, max_bytes
        self._last: bytes | None = None
        self._failures = 0  # consecutive failures, for upstream's log throttling

    async def get(self) -> tuple[int, bytes]:
        """(status, body) of one GET; the body only for a 200. ManifestError when it is too large,
        TimeoutError past the deadline, aiohttp.ClientError or OSError when the request fails."""
        timeout = aiohttp.ClientTimeout(total=self.deadline_s)
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=True) as session,
            session.get(self.url, max_redirects=MAX_REDIRECTS) as response,
        ):
            if response.status != 200:
                return response.status, b""
            if response.content_length is not None and response.content_length > self.max_bytes:
                length = response.content_length
                raise ManifestError(f"the body is {length} bytes, more than {self.max_bytes}")
            body = bytearray()
            async for chunk in response.content.iter_chunked(65536):
                body += chunk
                if len(body) > self.max_bytes:
                    raise ManifestError(f"the body is larger than {self.max_bytes} bytes")
            return 200, bytes(body)

    def _failed(self, reason: str) -> None:
        self._failures += 1
        if self._failures <= LOUD_URL_FAILURES:
            quiet = " (further failures in a row are logged at debug level)" * (
                self._failures == LOUD_URL_FAILURES
            )
            log.warning("manifest URL %s: %s%s", self.url, reason, quiet)
        else:
            log.debug("manifest URL %s: %s", self.url, reason)

    def _succeeded(self) -> None:
        if self._failures:
            log.info("manifest URL %s read again", self.url)
        self._failures = 0

    async def fetch(self) -> list[JSONDict] | None:
        """The defaulted pods, or None when nothing changed or the fetch failed."""
        try:
            status, body = await self.get()
        except ManifestError as exc:
            self._failed(str(exc))
            return None
        except TimeoutError:
            self._failed(f"no complete answer within {self.deadline_s:g}s")
            return None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            self._failed(f"request failed: {type(exc).__name__}: {one_line(exc)}")
            return None
        if status != 200:
            self._failed(f"answered {status}")
            return None
        if body == self._last:
            return None
        self._last = body
        if not body.strip():
            self._failed("returned an empty body")
            return []
        try:
            pods = await asyncio.to_thread(
                parse_manifest, body, node=self.node, source=HTTP_SOURCE, path_or_url=self.url
            )
        except ManifestError as exc:
            self._failed(str(exc))
            return None
        self._succeeded()
        return pods

    async def run(self) -> None:
        while True:
            try:
                pods = await self.fetch()
            except Exception:  # nothing a server sends may stop the source
                log.exception("manifest URL %s: unexpected failure", self.url)
                pods = None
            if pods is not None:
                await publish_merge(self.storage, self.name, pods, self.node, self.publish)
            await asyncio.sleep(self.period_s)
