"""The audit index (SQLite) and the queries over it, filled with real fold output, no Kafka:
history per pod and per life, why a version is what it is, copies dropped, offsets resumed,
exports that fold back into the same history, a catch-up without the pod indexes, and values
a hostile producer shaped."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from podledger.read.audit import queries
from podledger.read.audit.parse import PodRef
from podledger.read.index import IndexMismatch, RawRecord, SqliteIndex, codec, schema, writes
from podledger.schemas import encode
from podledger.streams.replay import replay
from podledger.types import Topic
from podledger.workload import workload
from tests.support.audit import audit_records, fill_audit_index


@pytest.fixture
def ingress() -> list[Any]:
    return list(workload(6, 240, nodes=2, seed=5, start_ms=1_714_572_000_000))


@pytest.fixture
def index(tmp_path: Path, ingress: list[Any]) -> SqliteIndex:
    idx = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    fill_audit_index(idx, ingress)
    return idx


def folded_versions(ingress: list[Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for o in replay([encode(e.value) for e in ingress]):
        if o.topic == Topic.POD_STATUS_HISTORY:
            out.setdefault(o.key, []).append(orjson.loads(o.wire_value()))
    return out


def test_history_lists_every_version_of_each_pod_in_order(index: SqliteIndex, ingress: list[Any]) -> None:
    expected = folded_versions(ingress)
    assert len(expected) == 6
    for uid, versions in expected.items():
        [life] = queries.history(index, PodRef(uid=uid), with_status=True)
        assert [r["version"] for r in life["versions"]] == [v["version"] for v in versions]
        assert [r["status"] for r in life["versions"]] == [v["status"] for v in versions]
        assert [r["cause"] for r in life["versions"]] == [v["cause"] for v in versions]


def test_a_pod_is_found_by_name_and_by_uid_and_missing_ones_are_named(index: SqliteIndex) -> None:
    [life] = queries.history(index, PodRef(namespace="default", name="pod-000002"))
    by_uid = queries.history(index, PodRef(uid=life["uid"], namespace="default", name=life["uid"]))
    assert by_uid == [life]
    with pytest.raises(queries.NotFound, match="no pod default/nope"):
        queries.history(index, PodRef(namespace="default", name="nope"))


def test_since_until_and_diff(index: SqliteIndex, ingress: list[Any]) -> None:
    uid, versions = next(iter(folded_versions(ingress).items()))
    middle = versions[len(versions) // 2]["ts_ms"]
    [life] = queries.history(index, PodRef(uid=uid), since_ms=middle, with_diff=True)
    assert life["versions"][0]["ts_ms"] == middle
    assert all(r["ts_ms"] >= middle for r in life["versions"])
    assert all(r["changes"] for r in life["versions"])  # a version exists only when something changed
    assert (
        queries.history(index, PodRef(uid=uid), until_ms=versions[0]["ts_ms"])[0]["versions"][0]["version"]
        == 1
    )


def test_copies_of_records_are_dropped_and_offsets_only_advance(tmp_path: Path, ingress: list[Any]) -> None:
    idx = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    records = audit_records(ingress)
    idx.add(records)
    ends = idx.offsets()
    # Stored twice (two writers), and resent by the fold at later offsets (a lost acknowledgement).
    resent = [dataclasses.replace(r, offset=r.offset + 10_000) for r in records[:40]]
    idx.add(records[:40])
    assert idx.offsets() == ends  # an older batch never moves the offsets back
    idx.add(resent)
    assert idx.offsets()[(Topic.JOURNAL, 0)] > ends[(Topic.JOURNAL, 0)]
    for uid, versions in folded_versions(ingress).items():
        assert [v.version for v in idx.versions(uid)] == [v["version"] for v in versions]
        inputs = [e.input for e in idx.journal(uid)]
        assert len(inputs) == len(set(inputs))


def test_values_it_cannot_read_are_skipped_and_new_fields_kept(tmp_path: Path, ingress: list[Any]) -> None:
    idx = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    records = audit_records(ingress[:10])
    first = records[0] if records[0].topic == Topic.POD_STATUS_HISTORY else records[1]
    extended = orjson.dumps({**orjson.loads(first.value or b""), "rules": "v1", "chain": {"prev": "00"}})
    odd = [
        RawRecord(Topic.POD_STATUS_HISTORY, 1, 0, b"k", b"not json"),
        RawRecord(Topic.POD_STATUS_HISTORY, 1, 1, b"k", None),
        RawRecord(Topic.JOURNAL, 1, 0, b"k", b'{"topic": 5}'),
        dataclasses.replace(first, partition=2, value=extended),
    ]
    assert idx.add(odd) == 1
    assert idx.offsets()[(Topic.POD_STATUS_HISTORY, 1)] == 2 and idx.offsets()[(Topic.JOURNAL, 1)] == 1
    [stored] = idx.versions(orjson.loads(extended)["uid"])
    assert stored.value["rules"] == "v1"


def test_a_name_carried_by_two_pods_and_a_uid_with_two_lives(tmp_path: Path, ingress: list[Any]) -> None:
    first = [e for e in ingress if e.key == ingress[0].key][:4]
    second_pod = {**first[0].value.pod, "metadata": {**first[0].value.pod["metadata"], "uid": "uid-two"}}
    again = dataclasses.replace(first[0].value, pod=second_pod, ts_ms=first[-1].ts_ms + 1000)
    removed = dataclasses.replace(first[0].value, op="REMOVE", ts_ms=first[-1].ts_ms + 2000)
    readded = dataclasses.replace(first[0].value, ts_ms=first[-1].ts_ms + 3000)
    later = [dataclasses.replace(first[0], value=v) for v in (again, removed, readded)]
    idx = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    fill_audit_index(idx, first + later)
    lives = queries.history(idx, PodRef(namespace="default", name=first[0].value.pod["metadata"]["name"]))
    assert [life["uid"] for life in lives] == [first[0].key, "uid-two", first[0].key]  # in time order
    assert [life["versions"][0]["version"] for life in lives] == [1, 1, 1]


def test_why_names_the_chain_the_rules_and_what_changed_nothing(
    index: SqliteIndex, ingress: list[Any]
) -> None:
    uid, versions = max(folded_versions(ingress).items(), key=lambda kv: len(kv[1]))
    target = versions[3]
    result = queries.why(index, PodRef(uid=uid), version=target["version"])
    assert result["version"]["version"] == target["version"] and result["replayed"]
    assert result["version"]["status"] == target["status"]
    assert (
        result["previous_version"] == target["version"] - 1
        and result["next_version"] == target["version"] + 1
    )
    # The chain ends with the cause; it holds exactly the journal entries between the two causes.
    last = result["chain"][-1]
    assert last["input"] == {k: target["cause"][k] for k in ("topic", "partition", "offset")}
    assert last["effect"] == f"new version {target['version']}"
    assert all(i["effect"] != last["effect"] for i in result["chain"][:-1])
    journal = index.journal(uid)
    inputs = [e.input for e in journal]
    before = inputs.index(tuple(versions[2]["cause"][k] for k in ("topic", "partition", "offset")))
    cause = inputs.index(tuple(target["cause"][k] for k in ("topic", "partition", "offset")))
    assert [tuple(i["input"].values()) for i in result["chain"]] == inputs[before + 1 : cause + 1]
    assert result["changes"] and all(i["effect"].startswith("no change") for i in result["unchanged_after"])


def test_why_at_a_moment_finds_the_version_in_force(index: SqliteIndex, ingress: list[Any]) -> None:
    uid, versions = next(iter(folded_versions(ingress).items()))
    at = versions[2]["ts_ms"] + (versions[3]["ts_ms"] - versions[2]["ts_ms"]) // 2
    assert queries.why(index, PodRef(uid=uid), at_ms=at)["version"]["version"] == versions[2]["version"]
    assert queries.why(index, PodRef(uid=uid))["version"]["version"] == versions[-1]["version"]
    with pytest.raises(queries.NotFound, match="no status yet"):
        queries.why(index, PodRef(uid=uid), at_ms=versions[0]["ts_ms"] - 1)
    with pytest.raises(queries.NotFound, match="no version 999"):
        queries.why(index, PodRef(uid=uid), version=999)


def test_an_exported_journal_folds_back_into_the_exported_history(index: SqliteIndex) -> None:
    journal = list(queries.export(index, Topic.JOURNAL))
    history = list(queries.export(index, Topic.POD_STATUS_HISTORY))
    again = [o.wire_value() for o in replay(journal) if o.topic == Topic.POD_STATUS_HISTORY]
    assert sorted(again) == sorted(history) and len(history) > 6
    [one] = queries.history(index, PodRef(namespace="default", name="pod-000001"))
    only = list(queries.export(index, Topic.JOURNAL, ref=PodRef(uid=one["uid"])))
    assert only and all(orjson.loads(v)["event"].get("uid", one["uid"]) == one["uid"] for v in only)


def test_values_are_stored_compressed_with_dictionaries_learnt_from_them_and_read_back_whole(
    tmp_path: Path, ingress: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codec, "TRAIN_SAMPLES", 40)  # small tables learn (and learn again) too
    monkeypatch.setattr(writes, "SERVES_ROWS", (60, 60))
    idx = SqliteIndex(tmp_path / "audit.sqlite", topics="test")
    records = audit_records(ingress)
    for start in range(0, len(records), 30):
        idx.add(records[start : start + 30])
    rows = idx.db.execute("SELECT codec, length(value), id FROM versions ORDER BY id").fetchall()
    assert rows[0][0] == codec.RAW and len({c for c, _, _ in rows}) >= 3  # raw, then two
    raw = {
        (r.partition << 40) | r.offset: len(r.value or b"")
        for r in records
        if r.topic == Topic.POD_STATUS_HISTORY
    }
    packed = [(size, raw[i]) for c, size, i in rows if c != codec.RAW]
    assert sum(s for s, _ in packed) * 4 < sum(r for _, r in packed)
    for topic in (Topic.POD_STATUS_HISTORY, Topic.JOURNAL):
        assert list(idx.scan(topic)) == [r.value for r in records if r.topic == topic]
    idx.close()
    reader = SqliteIndex(tmp_path / "audit.sqlite", read_only=True)
    for uid, versions in folded_versions(ingress).items():
        assert [v.value for v in reader.versions(uid)] == versions


_FIRST_LAYOUT = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE offsets(topic TEXT NOT NULL, partition INTEGER NOT NULL, next INTEGER NOT NULL,
  PRIMARY KEY(topic, partition));
CREATE TABLE pods(uid TEXT PRIMARY KEY, namespace TEXT NOT NULL, name TEXT NOT NULL, node TEXT NOT NULL,
  first_ts_ms INTEGER NOT NULL, last_ts_ms INTEGER NOT NULL);
CREATE INDEX pods_name ON pods(namespace, name);
CREATE TABLE versions(id INTEGER PRIMARY KEY, uid TEXT NOT NULL, ts_ms INTEGER NOT NULL, value BLOB NOT NULL);
CREATE INDEX versions_uid ON versions(uid);
CREATE TABLE journal(id INTEGER PRIMARY KEY, uid TEXT NOT NULL, ts_ms INTEGER NOT NULL, value BLOB NOT NULL);
CREATE INDEX journal_uid ON journal(uid);
INSERT INTO meta VALUES ('topics', 'test'), ('schema', '1');
"""


def test_a_file_of_the_first_layout_is_rewritten_when_opened_for_writing(
    tmp_path: Path, ingress: list[Any]
) -> None:
    path = tmp_path / "audit.sqlite"
    records = audit_records(ingress)
    with sqlite3.connect(path) as old:
        old.executescript(_FIRST_LAYOUT)
        for r in records:
            value = orjson.loads(r.value or b"")
            table, uid = (
                ("versions", value["uid"])
                if r.topic == Topic.POD_STATUS_HISTORY
                else ("journal", (r.key or b"").decode())
            )
            old.execute(f"INSERT INTO {table} VALUES (?,?,?,?)", (r.offset, uid, value["ts_ms"], r.value))
            if table == "versions":
                old.execute(
                    "INSERT OR IGNORE INTO pods VALUES (?,?,?,?,?,?)",
                    (uid, value["namespace"], value["name"], value["node"], value["ts_ms"], value["ts_ms"]),
                )
        old.execute("INSERT INTO offsets VALUES ('journal', 0, 999), ('pod-status-history', 0, 998)")
    with pytest.raises(IndexMismatch, match="older layout"):
        SqliteIndex(path, read_only=True)
    idx = SqliteIndex(path, topics="test")
    assert idx.offsets() == {(Topic.JOURNAL, 0): 999, (Topic.POD_STATUS_HISTORY, 0): 998}
    for uid, versions in folded_versions(ingress).items():
        assert [v.value for v in idx.versions(uid)] == versions
        assert len(idx.journal(uid)) > 1 and [p.uid for p in idx.identities(uid=uid)] == [uid]
    tables = {row[0] for row in idx.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not {t for t in tables if t.startswith("v1_")}
    assert dict(idx.db.execute("SELECT key, value FROM meta").fetchall())["schema"] == schema.SCHEMA_VERSION


def pod_indexes(idx: SqliteIndex) -> set[str]:
    rows = idx.db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE '%_pod'")
    return {name for (name,) in rows}


def answers(idx: SqliteIndex, uids: list[str]) -> list[Any]:
    """Every version, journal entry and `why` of the last version of each pod."""
    return [
        (
            [v.value for v in idx.versions(uid)],
            [(e.position, e.value) for e in idx.journal(uid)],
            queries.why(idx, PodRef(uid=uid)),
        )
        for uid in uids
    ]


def test_a_catch_up_far_behind_builds_the_pod_indexes_at_the_end_with_the_same_answers(
    tmp_path: Path, ingress: list[Any], index: SqliteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "BULK_RECORDS", 10)
    records = audit_records(ingress)
    bulk = SqliteIndex(tmp_path / "bulk.sqlite", topics="test")
    with bulk.catching_up(len(records)):
        assert pod_indexes(bulk) == set()
        for start in range(0, len(records), 50):
            bulk.add(records[start : start + 50])
    assert pod_indexes(bulk) == set(schema.POD_INDEXES)
    uids = list(folded_versions(ingress))
    assert answers(bulk, uids) == answers(index, uids)  # `index` was filled without a catch-up
    # A catch-up shorter than what the file holds keeps them; so does one that fails.
    with bulk.catching_up(len(records) // 2):
        assert pod_indexes(bulk) == set(schema.POD_INDEXES)
    with pytest.raises(RuntimeError), bulk.catching_up(10 * len(records)):
        assert pod_indexes(bulk) == set()
        raise RuntimeError("the broker went away")
    assert pod_indexes(bulk) == set(schema.POD_INDEXES)


def test_a_writer_stopped_while_catching_up_leaves_a_file_the_next_one_resumes_and_completes(
    tmp_path: Path, ingress: list[Any], index: SqliteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "BULK_RECORDS", 10)
    records = audit_records(ingress)
    path = tmp_path / "stopped.sqlite"
    first = SqliteIndex(path, topics="test")
    first.catching_up(len(records)).__enter__()  # the process dies inside the block: it never ends
    first.add(records[: len(records) // 2])
    first.db.close()
    reader = SqliteIndex(path, read_only=True)  # reads what is there, without the pod indexes
    uid = next(iter(folded_versions(ingress)))
    assert [v.value for v in reader.versions(uid)] == [
        orjson.loads(r.value or b"")
        for r in records[: len(records) // 2]
        if r.topic == Topic.POD_STATUS_HISTORY and r.key == uid.encode()
    ]
    again = SqliteIndex(path, topics="test")
    assert pod_indexes(again) == set(schema.POD_INDEXES)
    stored = again.offsets()  # written with the rows: the next writer resumes right after them
    again.add([r for r in records if r.offset >= stored.get((r.topic, r.partition), 0)])
    uids = list(folded_versions(ingress))
    assert answers(again, uids) == answers(index, uids)
    assert again.count(Topic.JOURNAL) == index.count(Topic.JOURNAL)


def test_values_shaped_to_pass_the_filing_check_but_not_the_reader_are_dropped_when_read(
    index: SqliteIndex, ingress: list[Any]
) -> None:
    """The attack: a producer on the indexed topics writes values the index files (their filing
    fields are fine) but the reader's JSON parser refuses: a number out of a double's range, and
    bytes that are no UTF-8 inside the event. The pod's history and why still answer."""
    uid, versions = max(folded_versions(ingress).items(), key=lambda kv: len(kv[1]))
    clean = answers(index, [uid])
    ends = index.offsets()
    forged = {**versions[-1], "version": versions[-1]["version"] + 1, "status": {"phase": "FORGED"}}
    big_number = orjson.dumps(forged).replace(b'"FORGED"', b"1e400")
    entry = orjson.dumps({**index.journal(uid)[-1].value, "event": {"uid": uid, "note": "FORGED"}})
    not_utf8 = entry.replace(b"FORGED", b"\xff\xfe")
    stored = index.add(
        [
            RawRecord(
                Topic.POD_STATUS_HISTORY, 0, ends[(Topic.POD_STATUS_HISTORY, 0)], uid.encode(), big_number
            ),
            RawRecord(Topic.JOURNAL, 0, ends[(Topic.JOURNAL, 0)], uid.encode(), not_utf8),
        ]
    )
    assert stored == 1 and index.count(Topic.JOURNAL) == ends[(Topic.JOURNAL, 0)] + 1  # both filed
    assert answers(index, [uid]) == clean
    [life] = queries.history(index, PodRef(uid=uid), with_diff=True)
    assert [r["version"] for r in life["versions"]] == [v["version"] for v in versions]


def test_the_index_lists_its_namespaces_and_finds_pods_by_part_of_a_name_or_uid(index: SqliteIndex) -> None:
    assert index.namespaces() == {"default": 6}
    found = index.pods(namespace="default", contains="POD-00000", limit=4)
    assert len(found) == 4 and [p.last_ts_ms for p in found] == sorted(
        (p.last_ts_ms for p in found), reverse=True
    )
    [one] = index.pods(contains=found[0].uid[:12])
    assert one == found[0] == index.identities(uid=one.uid)[0]
    assert index.pods(contains="pod_0") == [] and index.pods(namespace="shop") == []
