"""What the probe handlers share: the User-Agent they present to a target and how much of its answer
they keep."""

from __future__ import annotations

MAX_OUTPUT_BYTES = 10 * 1024  # exec output and HTTP bodies are cut at 10 KiB, as upstream
USER_AGENT = "kube-probe/podledger"  # applications match the "kube-probe/" prefix
