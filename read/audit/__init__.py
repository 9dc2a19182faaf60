"""The audit read model's queries and their pure parts: parsing what users type (parse.py),
summaries of versions and input events (summary.py), the diff of kubelet-owned fields (diff.py),
rule attribution by re-folding a pod's journal (rules.py), text rendering (render.py), and the
queries over an AuditIndex that the CLI and a web page share (queries.py)."""
