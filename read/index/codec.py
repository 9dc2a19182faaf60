"""How the index stores a value: zstd with a dictionary trained on the values themselves.

Statuses and journal entries of one cluster repeat the same keys, images, reasons and names, so
a small dictionary (16 KiB) learnt from a few thousand of them shrinks a 1.7 KB status to about
a tenth, at a few microseconds a value; plain zstd or zlib without one gain about 2.5x, and cost
more. Each stored row names the codec it was written with: 0 is the value as read, any other
number a dictionary kept in the file, so a table can hold rows of several dictionaries (a new one
is trained as a table grows, on its recent values) and every row stays readable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import zstandard

RAW = 0
DICTIONARY_BYTES = 16 * 1024
LEVEL = 3
TRAIN_SAMPLES = 2_000  # values a dictionary is trained on; fewer leave the values raw


class Codec:
    """The compressors and decompressors of the dictionaries an index holds, by codec id."""

    def __init__(self) -> None:
        self._compressors: dict[int, zstandard.ZstdCompressor] = {}
        self._decompressors: dict[int, zstandard.ZstdDecompressor] = {}

    def load(self, codec: int, dictionary: bytes) -> None:
        """Make a stored dictionary usable under its codec id."""
        data = zstandard.ZstdCompressionDict(dictionary)
        data.precompute_compress(level=LEVEL)
        self._compressors[codec] = zstandard.ZstdCompressor(
            level=LEVEL, dict_data=data, write_checksum=False, write_dict_id=False
        )
        self._decompressors[codec] = zstandard.ZstdDecompressor(dict_data=data)

    def known(self, codec: int) -> bool:
        return codec == RAW or codec in self._compressors

    def encoder(self, codec: int) -> Callable[[bytes], bytes]:
        """The function that encodes values with `codec`."""
        return bytes if codec == RAW else self._compressors[codec].compress

    def decode(self, codec: int, stored: bytes) -> bytes:
        return stored if codec == RAW else self._decompressors[codec].decompress(stored)


def train(samples: Sequence[bytes]) -> bytes | None:
    """A dictionary learnt from `samples`, or None when they are too few (or too alike) to learn from."""
    if len(samples) < TRAIN_SAMPLES:
        return None
    try:
        return bytes(zstandard.train_dictionary(DICTIONARY_BYTES, list(samples)).as_bytes())
    except zstandard.ZstdError:
        return None
