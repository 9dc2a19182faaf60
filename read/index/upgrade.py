"""An index file of the first layout (values raw, rows by UID) rewritten in the current one.

The old tables are renamed, their rows go through the index's own insert path (`add`) in topic
order, and the old tables are dropped. A row already copied is ignored when added again, so an
upgrade that was interrupted is finished on the next open for writing. The offsets stay as
they were: the file resumes reading the topics where it stopped.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from podledger.read.index.base import RawRecord
from podledger.read.index.schema import SCHEMA_VERSION, position
from podledger.types import Topic

if TYPE_CHECKING:
    from podledger.read.index.sqlite import SqliteIndex

log = logging.getLogger(__name__)

BATCH_ROWS = 20_000
_OLD_TABLES = ("versions", "journal")  # `pods` keeps its layout
_OLD_INDEXES = ("versions_uid", "journal_uid")


def upgrade_v1(index: SqliteIndex, schema: str) -> None:
    db = index.db
    log.info("rewriting %s in the current layout (values compressed) ...", index.path)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    with db:
        if "v1_versions" not in tables:
            for name in _OLD_INDEXES:
                db.execute(f"DROP INDEX IF EXISTS {name}")
            for table in _OLD_TABLES:
                db.execute(f"ALTER TABLE {table} RENAME TO v1_{table}")
    db.executescript(schema)
    for table, topic in (("v1_versions", Topic.POD_STATUS_HISTORY), ("v1_journal", Topic.JOURNAL)):
        last = -1
        while rows := db.execute(
            f"SELECT id, uid, value FROM {table} WHERE id > ? ORDER BY id LIMIT ?", (last, BATCH_ROWS)
        ).fetchall():
            index.add([RawRecord(topic, *position(i), uid.encode(), bytes(value)) for i, uid, value in rows])
            last = rows[-1][0]
    with db:
        for table in _OLD_TABLES:
            db.execute(f"DROP TABLE v1_{table}")
        db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
