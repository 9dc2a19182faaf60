"""The read side: what users and other services read from the ledger.

Downstream of the fold (streams/) and beside the sink (agents/sink/), everything here only reads
podledger's topics: the audit index and its queries (`index/`, `audit/`), the consumer client,
the read-only Kubernetes API, pod metrics and the timeline UI. Pure functions over plain data
sit apart from the modules that read Kafka or serve HTTP, as in the rest of podledger.
"""
