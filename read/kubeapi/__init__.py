"""The read-only Kubernetes API over the ledger (`podledger serve`): pods listed, got and watched
from pod-status, and listed at a past moment from pod-status-history (docs/consuming.md).

Pure: `objects` (documents), `table` (kubectl's columns), `records` (what is read of the values),
`served` (each pod version as ready JSON, and the answers made of it), `store` (the pods and watch
events).
Edges: `ledger` (following the topics), `watch`, `history` (the past), `server` (HTTP).
"""
