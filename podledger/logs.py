"""Logging as a reader wants it: one key=value line per record, and one way to name a pod.

Every module logs through `logging.getLogger(__name__)`. A line about a pod names it through
`pod_logger` (or `pod_ref`), always as `pod=namespace/name uid=UID`, so one grep finds a pod's
whole story whichever component wrote the line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping, MutableMapping
from typing import Any


class KeyValueFormatter(logging.Formatter):
    """One line per record: time, level, logger, message — easy to grep and to parse."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = (
            f"ts={ts}.{int(record.msecs):03d}Z level={record.levelname.lower()} logger={record.name}"
            f" msg={json.dumps(record.getMessage())}"
        )
        if record.exc_info:
            line += " exc=" + json.dumps(self.formatException(record.exc_info))
        return line


def setup_logging(level: str) -> None:
    """Send every record to stderr as key=value lines at `level` (quiet by default: warning)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if root.level > logging.DEBUG:
        # urllib3 warns on every retry; podledger logs the failure that matters once.
        logging.getLogger("urllib3").setLevel(logging.ERROR)


def pod_ref(namespace: str | None, name: str | None, uid: str | None) -> str:
    """A pod as every log line names it: `pod=namespace/name uid=UID`."""
    return f"pod={namespace or '?'}/{name or '?'} uid={uid or '?'}"


def pod_ref_of(pod: Mapping[str, Any]) -> str:
    """`pod_ref` for a pod object (its metadata)."""
    meta = pod.get("metadata") or {}
    return pod_ref(meta.get("namespace"), meta.get("name"), meta.get("uid"))


class PodLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose every line starts with the pod it is about."""

    def __init__(self, logger: logging.Logger, ref: str) -> None:
        super().__init__(logger, {"pod": ref})
        self.ref = ref

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return f"{self.ref} {msg}", kwargs


def pod_logger(logger: logging.Logger, namespace: str | None, name: str | None, uid: str | None) -> PodLogger:
    """`logger` for lines about one pod."""
    return PodLogger(logger, pod_ref(namespace, name, uid))
