"""Pod metrics for Prometheus, computed from the status stream (docs/metrics.md).

`series` (kube-state-metrics' pod series of one status), `pods` (the state machine: counters from
every version) and `text` (the exposition format) are pure; `server` reads Kafka and serves HTTP.
"""
