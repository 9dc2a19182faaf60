"""Kafka record batches built whole elsewhere, sent by an aiokafka producer as they are: the native
fold core's sealed answers (streams/foldcore/serve_sealed.go), whose records the worker would
otherwise append to a batch of its own one by one and checksum in Python.

Such a batch is built with no producer state. An idempotent producer sets its own (producer id,
epoch, base sequence) just before sending, which changes header bytes the batch's CRC-32C covers;
so a batch carries the CRC of its records alone and x^(8·len(records)) modulo the CRC's
polynomial, and the new checksum combines the new header's (40 bytes) with the records' without
reading them again: CRC(a‖b) = (x^(8·len(b)) · CRC(a)) mod P ⊕ CRC(b).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["HEADER_BYTES", "RecordBatch", "crc_combine"]

HEADER_BYTES = 61  # a v2 batch's header: base offset .. record count
_CRC_AT, _ATTRIBUTES_AT, _TIMESTAMPS_AT, _PRODUCER_AT = 17, 21, 27, 43
_TIMESTAMPS = struct.Struct(">qq")  # base and max timestamp
_PRODUCER_STATE = struct.Struct(">qhi")  # producer id, epoch, base sequence
_CRC = struct.Struct(">I")
_POLY = 0x82F63B78  # CRC-32C's polynomial, reflected (bit 31 is x^0)


def _multiply(a: int, b: int) -> int:
    """a · b modulo the CRC's polynomial, both reflected."""
    product, bit = 0, 1 << 31
    while bit:
        if a & bit:
            product ^= b
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
        bit >>= 1
    return product


def crc_combine(crc_a: int, crc_b: int, shift_b: int) -> int:
    """CRC-32C of a‖b from CRC(a), CRC(b) and shift_b = x^(8·len(b)) mod P."""
    return _multiply(shift_b, crc_a) ^ crc_b


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A whole v2 record batch of `count` records for one topic-partition, with no producer state;
    `records_crc` and `shift` are its records' CRC-32C and x^(8·their length) mod P."""

    topic: str
    partition: int
    count: int
    data: bytes | memoryview
    records_crc: int
    shift: int

    def header_for(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        stamp_ms: int,
        crc32c: Callable[[bytes], int],
    ) -> bytes:
        """The batch's header with a producer's state, every record stamped `stamp_ms` (its
        records' timestamp deltas are 0), and the checksum that goes with them."""
        header = bytearray(self.data[:HEADER_BYTES])
        _TIMESTAMPS.pack_into(header, _TIMESTAMPS_AT, stamp_ms, stamp_ms)
        _PRODUCER_STATE.pack_into(header, _PRODUCER_AT, producer_id, producer_epoch, base_sequence)
        crc = crc_combine(crc32c(bytes(header[_ATTRIBUTES_AT:])), self.records_crc, self.shift)
        _CRC.pack_into(header, _CRC_AT, crc)
        return bytes(header)
