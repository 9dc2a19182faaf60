"""The pods an index knows, by namespace: what the UI's pod list and namespace view start from.

The index answers both through the AuditIndex protocol (`namespaces`, `pods`); this shapes the
answers for the page.
"""

from __future__ import annotations

from typing import Any

from podledger.read.index.base import AuditIndex, PodIdentity


def namespaces(index: AuditIndex) -> list[dict[str, Any]]:
    """Every namespace with the number of pods (UIDs) the index has in it, by name."""
    return [{"namespace": ns, "pods": n} for ns, n in sorted(index.namespaces().items())]


def pods(
    index: AuditIndex, *, namespace: str = "", contains: str = "", limit: int = 200
) -> list[PodIdentity]:
    """The pods of a namespace (every namespace when empty) whose name or UID contains `contains`
    (any case, literally), most recently seen first, at most `limit`."""
    return index.pods(namespace=namespace, contains=contains, limit=limit)
