"""Who may talk to the UI: the listen address it accepts and the Host headers it answers. Pure.

The UI shows every indexed pod's statuses and answers without credentials, so it listens on
loopback unless told otherwise, and there it answers only requests addressed to a loopback name:
a web page elsewhere that points its own host name at 127.0.0.1 (DNS rebinding) gets no data.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

DEFAULT_LISTEN = "127.0.0.1:8080"
LOOPBACK_NAMES = frozenset({"localhost"})


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int
    loopback: bool


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> Listen:
    """`HOST:PORT` (`[::1]:8080` for IPv6); HOST a name or address, PORT 0 for any free port."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65_535:
        raise ValueError(f"{text!r} is not HOST:PORT (e.g. {DEFAULT_LISTEN})")
    return Listen(host, int(port_text), is_loopback(host))


def host_allowed(header: str | None, loopback_only: bool) -> bool:
    """Whether a request's Host header may be answered: any when listening beyond loopback (the
    operator chose who reaches it), else only a loopback name or address."""
    if not loopback_only:
        return True
    if not header:
        return False
    host = header.strip()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return is_loopback(host)
