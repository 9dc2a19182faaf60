"""`podledger verify`'s pure audit (read/audit/verify.py) over records written as the live fold
writes them (BatchFold + seal, no Kafka): clean as written, and each attack or benign accident
named for what it is."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import orjson
import pytest

from podledger.read.audit.verify import Counts, Divergence, PartitionAudit, differences, divergence_lines
from podledger.schemas import chain, encode
from podledger.schemas.chain import GENESIS, Verdict
from podledger.streams.batch import BatchFold
from podledger.streams.fold import RULES_VERSION, Coordinates, HoldLimits
from podledger.streams.seal import seal
from podledger.workload import workload
from tests.support.processes import run_podledger

T0 = 1_700_000_000_000
Record = tuple[bytes, bytes | None, list[tuple[str, bytes]]]


@dataclass
class Written:
    """One partition of journal and pod-status-history as a live worker leaves them."""

    journal: list[Record] = field(default_factory=list)
    history: list[Record] = field(default_factory=list)
    heads: dict[tuple[str, int], bytes] = field(
        default_factory=lambda: {("journal", 0): GENESIS, ("pod-status-history", 0): GENESIS}
    )

    def audit(self, **options: object) -> PartitionAudit:
        audit = PartitionAudit(0, **options)
        for offset, record in enumerate(self.history):
            audit.history(offset, *record)
        for offset, record in enumerate(self.journal):
            audit.journal(offset, *record)
        audit.finish()
        return audit

    def append_history(self, value: bytes, key: bytes) -> None:
        """Append a record chained on the current head, as the fold (or an attacker) would."""
        where = ("pod-status-history", 0)
        self.heads[where], headers = chain.link(self.heads[where], key, value)
        self.history.append((key, value, headers))


def live(pods: int = 8, events: int = 160, batch: int = 20) -> Written:
    out = Written()
    table: dict[bytes, object] = {}
    per_topic: dict[str, int] = {}
    messages = []
    for e in workload(pods, events, nodes=1, seed=5, start_ms=T0):
        offset = per_topic[e.topic] = per_topic.get(e.topic, -1) + 1
        messages.append((Coordinates(e.topic, 0, offset, e.ts_ms), encode(e.value)))
    for start in range(0, len(messages), batch):
        fold = BatchFold(table.get, HoldLimits(), 1 << 20)
        for at, value in messages[start : start + batch]:
            fold.add_message(at, None, value)
        seal(fold.batch, out.heads, "test.")
        out.journal += [(o.key.encode(), o.wire_value(), o.headers or []) for _, o in fold.batch.journal]
        out.history += [
            (o.key.encode(), o.wire_value(), o.headers or [])
            for _, o in fold.batch.outputs
            if o.topic == "pod-status-history"
        ]
        for key, (_, record) in fold.batch.changed.items():
            if record is None:
                table.pop(key, None)
            else:
                table[key] = record
    return out


def only(counts: Counts, **expected: int) -> None:
    """`expected` counts as given, every other problem count zero."""
    problems = {"mismatches": 0, "broken_links": 0, "duplicates": 0, "pending": 0, "unverifiable": 0}
    seen = {name: getattr(counts, name) for name in problems}
    assert seen == {**problems, **expected}


def test_what_the_fold_writes_verifies_clean() -> None:
    written = live()
    audit = written.audit(marker=len(written.journal) - 1)
    only(audit.counts)
    assert audit.counts.versions == len(written.history) > 20
    assert audit.counts.journal_entries == 160 and audit.problems == [] and audit.divergences == []
    assert all(orjson.loads(v or b"")["rules"] == RULES_VERSION for _, v, _ in written.history)


def test_an_edited_history_record_is_an_altered_link_and_a_mismatch_with_both_statuses() -> None:
    written = live()
    n = 7
    key, value, headers = written.history[n]
    forged = orjson.loads(value or b"")
    forged["status"]["phase"] = "Failed"
    written.history[n] = (key, orjson.dumps(forged), headers)
    audit = written.audit()
    only(audit.counts, mismatches=1, broken_links=1)
    [problem] = audit.problems
    assert (problem.topic, problem.offset, problem.verdict) == ("pod-status-history", n, Verdict.ALTERED)
    [d] = audit.divergences
    assert (d.kind, d.offset, d.uid, d.version) == ("differs", n, forged["uid"], forged["version"])
    d.history_value = forged
    text = "\n".join(divergence_lines(d))
    assert f"offset {n}" in text and f"version {forged['version']}" in text
    rules_phase = (d.rules_value or {})["status"]["phase"]
    assert f'status.phase: "Failed" | "{rules_phase}"' in text
    [on_history] = [line for line in text.splitlines() if line.startswith("  on history:")]
    [by_rules] = [line for line in text.splitlines() if line.startswith("  by the rules:")]
    assert '"phase":"Failed"' in on_history and f'"phase":"{rules_phase}"' in by_rules


def test_a_dropped_journal_entry_breaks_its_successor_and_the_refold_no_longer_agrees() -> None:
    written = live()
    n = 30
    del written.journal[n]
    audit = written.audit()
    assert audit.counts.broken_links == 1 and audit.counts.mismatches >= 1
    [problem] = audit.problems
    assert (problem.topic, problem.offset, problem.verdict) == ("journal", n, Verdict.BROKEN)


def test_a_forged_version_appended_with_a_valid_link_is_caught_by_the_refold() -> None:
    written = live()
    key, value, _ = written.history[5]
    forged = orjson.loads(value or b"")
    forged["status"]["phase"] = "Succeeded"
    written.append_history(orjson.dumps(forged), key)
    audit = written.audit()
    only(audit.counts, mismatches=1)
    [d] = audit.divergences
    assert (d.kind, d.offset) == ("differs", len(written.history) - 1)
    assert d.rules_value is not None and d.rules_value["status"]["phase"] != "Succeeded"


def test_a_version_the_rules_never_give_is_unexplained() -> None:
    written = live()
    key, value, _ = written.history[-1]
    beyond = orjson.loads(value or b"") | {"version": 99}
    written.append_history(orjson.dumps(beyond), key)
    written.append_history(b"not json", b"x")
    audit = written.audit()
    only(audit.counts, mismatches=2)
    assert sorted(d.kind for d in audit.divergences) == ["unexplained", "unreadable"]


def test_resends_and_versions_republished_after_a_crash_are_duplicates_not_tampering() -> None:
    written = live()
    # deliver_batched resent a journal entry and a history record that had landed: exact copies.
    written.journal.insert(11, written.journal[10])
    written.history.insert(4, written.history[3])
    # A successor re-applied the journal tail and published its versions again, chained anew.
    for key, value, _ in written.history[-3:]:
        written.append_history(value or b"", key)
    audit = written.audit(marker=len(written.journal) - 1)
    only(audit.counts, duplicates=5)


def test_a_version_history_lacks_is_missing_once_its_batch_was_stored_and_pending_before() -> None:
    written = live()
    dropped = orjson.loads(written.history[-1][1] or b"")
    del written.history[-1]  # the tail: no successor shows the gap in the chain
    stored = written.audit(marker=len(written.journal) - 1)
    only(stored.counts, mismatches=1)
    [d] = stored.divergences
    assert (d.kind, d.uid, d.version) == ("missing", dropped["uid"], dropped["version"])
    assert "history does not have it" in "\n".join(divergence_lines(d))
    in_flight = written.audit(marker=None)  # no batch stored yet: its versions may be on their way
    only(in_flight.counts, pending=1)


def test_since_compares_only_later_versions_but_still_checks_every_link() -> None:
    written = live()
    values = [orjson.loads(v or b"") for _, v, _ in written.history]
    since = values[len(values) // 2]["ts_ms"]
    key, value, headers = written.history[0]
    written.history[0] = (key, (value or b"").replace(b'"Pending"', b'"Failed"'), headers)
    audit = written.audit(since_ms=since)
    only(audit.counts, broken_links=1)  # the early edit is no version of the window, but is no link
    assert audit.counts.versions == len({(v["uid"], v["version"]) for v in values if v["ts_ms"] >= since})


def test_versions_of_another_rules_version_are_named_as_such() -> None:
    written = live()
    key, value, _ = written.history[2]
    other = orjson.loads(value or b"") | {"rules": RULES_VERSION + 1}
    written.history[2] = (key, orjson.dumps(other), chain.link(GENESIS, key, b"")[1])
    audit = written.audit(history_from_start=False)  # the first record read anchors the chain
    d = next(d for d in audit.divergences if d.offset == 2)
    d.history_value = other
    assert (
        f"written by rules {RULES_VERSION + 1}; this podledger folds with rules {RULES_VERSION}"
        in "\n".join(divergence_lines(d))
    )


def test_an_expired_journal_start_makes_early_pods_unverifiable_not_forged() -> None:
    written = live(pods=4, events=80)
    first_uids = {key.decode() for key, _, _ in written.journal[:4]}  # every pod's ADD
    written.journal = written.journal[40:]  # retention took the pods' announcements
    audit = written.audit(journal_from_start=False)
    assert audit.counts.mismatches == 0 and audit.counts.broken_links == 0
    assert audit.counts.unverifiable == len(
        [v for _, v, _ in written.history if orjson.loads(v or b"")["uid"] in first_uids]
    )


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}}, [("b.c", 2, 3)]),
        ({"l": [1, 2]}, {"l": [1, 5]}, [("l[1]", 2, 5)]),
        ({"l": [1]}, {"l": [1, 2]}, [("l", [1], [1, 2])]),
        ({"a": 1}, {"b": 1}, [("a", 1, None), ("b", None, 1)]),
        ({"a": 1}, {"a": 1}, []),
    ],
)
def test_differences_name_each_differing_leaf(left: object, right: object, expected: object) -> None:
    assert differences(copy.deepcopy(left), right) == expected


def test_divergence_order_is_partition_then_journal_then_history_offset() -> None:
    ds = [
        Divergence("unexplained", 1, "u", 1, offset=3),
        Divergence("differs", 1, "u", 2, offset=9, journal_offset=4),
        Divergence("differs", 0, "u", 3, offset=1, journal_offset=50),
    ]
    assert [d.version for d in sorted(ds, key=Divergence.order)] == [3, 2, 1]


def test_a_moment_verify_cannot_read_is_a_usage_error() -> None:
    done = run_podledger("verify", "--bootstrap", "127.0.0.1:1", "--since", "last tuesday")
    assert done.returncode == 2
    assert "--since: 'last tuesday' is neither an RFC 3339 time" in done.stderr
