"""The grpc.health.v1 messages in protobuf wire format, encoded by hand (no generated code needed)."""

from __future__ import annotations

HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"
# grpc.health.v1.HealthCheckResponse.ServingStatus
SERVING_STATUS_NAMES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
SERVING = 1


def encode_health_request(service: str) -> bytes:
    """grpc.health.v1.HealthCheckRequest{string service = 1} in protobuf wire format."""
    data = service.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def decode_health_response(data: bytes) -> int:
    """The `status` (field 1, enum) of a grpc.health.v1.HealthCheckResponse; 0 (UNKNOWN) when absent."""
    status = 0
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        field_number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, i = _read_varint(data, i)
            if field_number == 1:
                status = value
        elif wire_type == 1:
            i += 8
        elif wire_type == 2:
            length, i = _read_varint(data, i)
            i += length
        elif wire_type == 5:
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
    if i > len(data):
        raise ValueError("truncated HealthCheckResponse")
    return status


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
