"""The fold never changes a pod record it is given: it returns a new one. The live fold relies on
it to fold a pod again from the record a batch not stored yet holds, without copying it first
(streams/fold_loop.py `_lookup`), while that batch's store has still to write it.

Checked on the random lives of test_fold_canonical: every record the offline fold ever kept
encodes, once the whole life is folded, to the bytes it encoded to when it was made.
"""

from __future__ import annotations

import orjson
from hypothesis import given

from podledger.streams.replay import Replayer
from tests.unit.test_fold_canonical import life_settings, lives


@life_settings
@given(lives())
def test_folding_never_changes_a_record_it_was_given(lines: list[bytes]) -> None:
    replayer = Replayer()
    made: dict[int, tuple[object, bytes]] = {}  # id -> (record, its bytes when the fold made it)
    for line in lines:
        replayer.feed(line)
        for record in replayer.records.values():
            if id(record) not in made:
                made[id(record)] = (record, orjson.dumps(record))
    replayer.finish()
    changed = [before for record, before in made.values() if orjson.dumps(record) != before]
    assert not changed, f"{len(changed)} of {len(made)} records changed after the fold made them"
    assert made, "the life made no record"
