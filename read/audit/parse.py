"""What a user types to the audit commands: a pod, a moment, a duration. Pure: `now` is passed in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod as named on the command line: `namespace/name`, or one word that is either a UID or a
    name in the default namespace (a UID is tried first)."""

    uid: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        return self.uid if self.uid and not self.name else f"{self.namespace}/{self.name}"


def parse_pod(text: str) -> PodRef:
    text = text.strip()
    if not text or text.count("/") > 1 or any(c.isspace() for c in text):
        raise ValueError(f"{text!r} is not a pod: use namespace/name or a pod UID")
    if "/" in text:
        namespace, name = text.split("/")
        if not name:
            raise ValueError(f"{text!r} names no pod: use namespace/name")
        return PodRef(namespace=namespace or "default", name=name)
    return PodRef(uid=text, namespace="default", name=text)


def parse_duration_ms(text: str) -> int | None:
    """`2h`, `90m`, `1h30m`, `45s`, `3d`, `500ms` in milliseconds; None when `text` is no duration."""
    text = text.strip()
    if not text:
        return None
    pos, total = 0, 0.0
    while pos < len(text):
        part = _DURATION_PART.match(text, pos)
        if part is None:
            return None
        total += float(part.group(1)) * _UNIT_MS[part.group(2)]
        pos = part.end()
    return int(total)


def parse_time_ms(text: str, now_ms: int) -> int:
    """A moment as epoch milliseconds: RFC 3339 (a time without offset is UTC), or a duration
    meaning that long before `now_ms`."""
    ago = parse_duration_ms(text)
    if ago is not None:
        return now_ms - ago
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is neither an RFC 3339 time (2024-05-01T14:02:00Z) nor a duration (2h, 30m, 1h30m)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def format_time(ts_ms: int) -> str:
    """Epoch milliseconds as RFC 3339 UTC with milliseconds (the order of events within a second shows)."""
    moment = datetime.fromtimestamp(ts_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts_ms % 1000:03d}Z"
