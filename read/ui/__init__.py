"""The audit timeline UI (`podledger ui`): one static page over JSON endpoints that answer from
the audit index through podledger.read.audit.queries; timeline.py computes what the page draws."""
