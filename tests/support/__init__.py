"""Plain helpers the tests share, one module per family:

- `processes`: podledger as a child process (run it, start `podledger serve`) and polling until
  something holds (`wait_for`, `wait_for_async`).
- `kafka`: topics on the real broker: size them, read them, publish onto them, make them refuse writes.
- `history`: the fold's pod-status history checked (no version gaps) and folded offline.
- `metrics`: a running podledger's HTTP pages: GET one, read a Prometheus page.
- `node`: a node agent's pods, seen from outside.
- `rbac`: identities on the apiserver: manifests, service-account tokens, access reviews.
- `audit`: an audit index filled without Kafka.

Fixtures live in each folder's conftest.py; everything here is an ordinary function or class,
imported explicitly from its module where it is used. `wait_for`, which most integration tests
import, is also importable from the package itself.
"""

from tests.support.processes import wait_for

__all__ = ["wait_for"]
