"""What users type to `podledger history`, `why` and `export`: pods, moments, durations."""

from __future__ import annotations

import pytest

from podledger.read.audit.parse import PodRef, format_time, parse_duration_ms, parse_pod, parse_time_ms

NOW = 1_714_572_120_000  # 2024-05-01T14:02:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("default/crashloop", PodRef(namespace="default", name="crashloop"), id="namespace_name"),
        pytest.param("/crashloop", PodRef(namespace="default", name="crashloop"), id="empty_namespace"),
        pytest.param(
            "6f0c2c1e-9b0a-4d0e-8a53-0c1f2e3d4c5b",
            PodRef(
                uid="6f0c2c1e-9b0a-4d0e-8a53-0c1f2e3d4c5b",
                namespace="default",
                name="6f0c2c1e-9b0a-4d0e-8a53-0c1f2e3d4c5b",
            ),
            id="uid_or_default_name",
        ),
    ],
)
def test_parse_pod(text: str, expected: PodRef) -> None:
    assert parse_pod(text) == expected


@pytest.mark.parametrize("text", ["", "a/b/c", "default/", "two words"])
def test_parse_pod_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="pod"):
        parse_pod(text)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2h", 7_200_000),
        ("30m", 1_800_000),
        ("1h30m", 5_400_000),
        ("45s", 45_000),
        ("3d", 259_200_000),
        ("500ms", 500),
        ("1.5h", 5_400_000),
        ("2x", None),
        ("h", None),
        ("2024-05-01", None),
        ("", None),
    ],
)
def test_parse_duration_ms(text: str, ms: int | None) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        pytest.param("2h", NOW - 7_200_000, id="duration_before_now"),
        pytest.param("2024-05-01T14:02:00Z", NOW, id="rfc3339_utc"),
        pytest.param("2024-05-01T16:02:00+02:00", NOW, id="rfc3339_offset"),
        pytest.param("2024-05-01T14:02:00.250Z", NOW + 250, id="fraction"),
        pytest.param("2024-05-01T14:02:00", NOW, id="no_offset_is_utc"),
    ],
)
def test_parse_time_ms(text: str, ms: int) -> None:
    assert parse_time_ms(text, NOW) == ms


def test_parse_time_ms_names_both_forms_when_it_refuses() -> None:
    with pytest.raises(ValueError, match=r"RFC 3339 .* duration"):
        parse_time_ms("yesterday", NOW)


def test_format_time_keeps_milliseconds_and_round_trips() -> None:
    assert format_time(NOW + 7) == "2024-05-01T14:02:00.007Z"
    assert parse_time_ms(format_time(NOW + 7), 0) == NOW + 7
