"""Reading probe specs: which workers a pod needs, their timing, ports and exec commands (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podledger.streams.status import is_sidecar
from podledger.types import JSONDict, ProbeType

# The order AddPod creates workers in.
PROBE_TYPES = (ProbeType.STARTUP, ProbeType.READINESS, ProbeType.LIVENESS)

# API defaults for a probe (podledger may see specs that were never defaulted).
DEFAULT_PERIOD_S = 10.0
DEFAULT_SUCCESS_THRESHOLD = 1
DEFAULT_FAILURE_THRESHOLD = 3
DEFAULT_TIMEOUT_S = 1.0


def probe_spec(container: Mapping[str, Any] | None, probe_type: str) -> JSONDict | None:
    """The container's livenessProbe, readinessProbe or startupProbe, or None."""
    return (container or {}).get(f"{probe_type}Probe")


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    """The timing and threshold fields of a probe, with the API's defaults filled in."""

    initial_delay_s: int = 0
    period_s: float = DEFAULT_PERIOD_S
    success_threshold: int = DEFAULT_SUCCESS_THRESHOLD
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD


def probe_settings(spec: Mapping[str, Any] | None) -> ProbeSettings:
    """Settings of one probe spec; zero or missing values take the API defaults.

    periodSeconds may be fractional here (the API allows whole seconds only), which tests use to tick fast.
    """
    spec = spec or {}
    return ProbeSettings(
        initial_delay_s=int(spec.get("initialDelaySeconds") or 0),
        period_s=float(spec.get("periodSeconds") or DEFAULT_PERIOD_S),
        success_threshold=int(spec.get("successThreshold") or DEFAULT_SUCCESS_THRESHOLD),
        failure_threshold=int(spec.get("failureThreshold") or DEFAULT_FAILURE_THRESHOLD),
    )


def workers_for_pod(pod: Mapping[str, Any]) -> list[tuple[str, ProbeType, JSONDict]]:
    """(container name, probe type, container spec) for every worker a pod needs.

    Regular containers and sidecars (restartable init containers) get one worker per probe they define;
    plain init containers never do.
    """
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or [])
    containers += [c for c in spec.get("initContainers") or [] if is_sidecar(c)]
    return [
        (str(c["name"]), probe_type, c)
        for c in containers
        for probe_type in PROBE_TYPES
        if probe_spec(c, probe_type) is not None
    ]


def probe_termination_grace_seconds(
    pod: Mapping[str, Any] | None, container_name: str, probe_type: str
) -> int | None:
    """The probe's own terminationGracePeriodSeconds, which replaces the pod's when its failure kills the
    container (pass it to lifecycle.liveness_kill_grace). None when the probe does not set one."""
    spec = (pod or {}).get("spec") or {}
    for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        if container.get("name") == container_name:
            value = (probe_spec(container, probe_type) or {}).get("terminationGracePeriodSeconds")
            return None if value is None else int(value)
    return None


def resolve_port(port: int | str | None, container: Mapping[str, Any] | None) -> int:
    """A probe's port: a number, or the name of one of the container's ports (then a numeric string).

    Raises ValueError for unknown names and numbers outside 1..65535, which the prober treats as an error.
    """
    if isinstance(port, bool) or port is None:
        raise ValueError(f"port has no value: {port!r}")
    if isinstance(port, int):
        number = port
    else:
        named = [
            p.get("containerPort") for p in (container or {}).get("ports") or [] if p.get("name") == port
        ]
        if named:
            number = int(named[0] or 0)
        else:
            try:
                number = int(port)
            except ValueError:
                raise ValueError(f"port {port} not found") from None
    if 0 < number < 65536:
        return number
    raise ValueError(f"invalid port number: {number}")


def join_host_port(host: str, port: int) -> str:
    """host:port, with an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def expand_command(command: Sequence[str], env: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """Expand $(VAR) in an exec probe's command from the container's literal env values.

    `$$` stands for a literal `$`; references to unknown variables (or valueFrom ones, which have no
    static value) stay as written, like the kubelet's static expansion for probe commands.
    """
    values = {str(e["name"]): str(e["value"]) for e in env or [] if e.get("value") is not None}
    return [_expand(str(arg), values) for arg in command]


def _expand(text: str, values: Mapping[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "$" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append(text[i:])
                break
            name = text[i + 2 : end]
            out.append(values.get(name, text[i : end + 1]) if name else "$()")
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)
