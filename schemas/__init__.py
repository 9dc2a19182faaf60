"""The contract: versioned JSON Schemas for every topic value, their models and codec."""

from podledger.schemas.codec import (
    SCHEMA_VERSION,
    DecodeError,
    decode,
    encode,
    from_dict,
    schema,
    to_dict,
)

__all__ = ["SCHEMA_VERSION", "DecodeError", "decode", "encode", "from_dict", "schema", "to_dict"]
