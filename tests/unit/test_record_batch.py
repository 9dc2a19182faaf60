"""A record batch built elsewhere, given a producer's state and the time it is sent
(podledger.record_batch): its header and checksum are byte for byte what aiokafka's own builder
writes for that state and time, without the records being read again."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c

from podledger.record_batch import HEADER_BYTES, RecordBatch, crc_combine


def x_to_8n(n: int) -> int:
    """x^(8n) mod CRC-32C's polynomial, reflected, the slow way: one byte at a time."""
    shift = 1 << 31  # x^0
    for _ in range(8 * n):
        shift = (shift >> 1) ^ 0x82F63B78 if shift & 1 else shift >> 1
    return shift


def aiokafka_batch(producer_id: int, epoch: int, sequence: int, records: int, stamp_ms: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, producer_id, epoch, sequence, batch_size=1 << 20)
    for n in range(records):
        builder.append(n, timestamp=stamp_ms, key=b"k%d" % n, value=b"v" * n, headers=[("h", b"x")])
    return bytes(builder.build())


@pytest.mark.parametrize("data", [b"", b"a", b"0123456789" * 37])
def test_checksums_combine_as_the_checksum_of_the_whole(data: bytes) -> None:
    head = bytes(range(40))
    assert crc_combine(calc_crc32c(head), calc_crc32c(data), x_to_8n(len(data))) == calc_crc32c(head + data)


@pytest.mark.parametrize(
    ("producer_id", "epoch", "sequence"), [(0, 0, 0), (4242, 3, 17), (2**62, 32767, 2**31 - 1)]
)
def test_a_producers_state_and_stamp_give_the_header_aiokafka_would_have_written(
    producer_id: int, epoch: int, sequence: int
) -> None:
    stateless = aiokafka_batch(-1, -1, -1, 25, stamp_ms=1)  # as built: stamped again when sent
    records = stateless[HEADER_BYTES:]
    batch = RecordBatch("t", 0, 25, stateless, calc_crc32c(records), x_to_8n(len(records)))
    header = batch.header_for(producer_id, epoch, sequence, 1_700_000_000_000, calc_crc32c)
    assert header + records == aiokafka_batch(producer_id, epoch, sequence, 25, 1_700_000_000_000)
    read = DefaultRecordBatch(bytearray(header + records))
    assert read.validate_crc()
    assert (read.producer_id, read.producer_epoch, read.base_sequence) == (producer_id, epoch, sequence)
