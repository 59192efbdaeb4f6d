"""Quantity parsing and formatting, checked against Kubernetes' resource.Quantity."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsched.model.quantity import MAX_AMOUNT, format_quantity, parse_quantity

GI = 1024**3
MI = 1024**2

# (input, resource, canonical value). cpu is in millicores (MilliValue, rounded up);
# everything else in units (Value, rounded up, away from zero).
VALID = [
    ("100m", "cpu", 100),
    ("0.5", "cpu", 500),
    ("1", "cpu", 1000),
    ("1.5", "cpu", 1500),
    ("0.1", "cpu", 100),
    (".5", "cpu", 500),
    ("1.", "cpu", 1000),
    ("+1", "cpu", 1000),
    ("-1", "cpu", -1000),
    ("-0.0005", "cpu", -1),  # away from zero
    ("250m", "cpu", 250),
    ("1e3", "cpu", 1_000_000),
    ("1E3", "cpu", 1_000_000),
    ("2e-3", "cpu", 2),
    ("2E+3", "cpu", 2_000_000),
    ("1e-4", "cpu", 1),  # 0.1 millicore rounds up to 1m
    ("100u", "cpu", 1),
    ("1n", "cpu", 1),
    ("1500000n", "cpu", 2),  # 1.5m -> 2m
    ("0", "cpu", 0),
    ("0.0", "cpu", 0),
    ("000", "cpu", 0),
    ("1k", "cpu", 1_000_000),
    ("2Ki", "cpu", 2_048_000),
    (2, "cpu", 2000),
    (0.5, "cpu", 500),
    (1e-05, "cpu", 1),
    ("5Mi", "memory", 5 * MI),
    ("1.5Gi", "memory", 3 * GI // 2),
    ("1G", "memory", 10**9),
    ("1M", "memory", 10**6),
    ("129M", "memory", 129_000_000),
    ("129e6", "memory", 129_000_000),
    ("123Mi", "memory", 128_974_848),
    ("128974848", "memory", 128_974_848),
    ("1e3", "memory", 1000),
    ("12e+2", "memory", 1200),
    ("1Ki", "memory", 1024),
    ("1Ti", "memory", 1024**4),
    ("1Pi", "memory", 1024**5),
    ("7Pi", "memory", 7 * 1024**5),
    ("1P", "memory", 10**15),
    ("0.001E", "memory", 10**15),  # E alone is exa
    ("1T", "ephemeral-storage", 10**12),
    ("1P", "ephemeral-storage", 10**15),
    ("100m", "memory", 1),  # 0.1 byte rounds up
    ("0.5", "memory", 1),
    ("1.1", "memory", 2),
    ("2Mi", "hugepages-2Mi", 2 * MI),
    ("110", "pods", 110),
    ("1k", "pods", 1000),
    ("500m", "example.com/gpu", 1),
    (3, "example.com/gpu", 3),
    ("9007199254740991", "memory", MAX_AMOUNT),
    ("9007199254740991m", "cpu", MAX_AMOUNT),
    ("-9007199254740991", "memory", -MAX_AMOUNT),
    ("0.000000000000000000000000000000000001", "memory", 1),
    ("1e-300", "memory", 1),
    ("0e999", "memory", 0),
]

INVALID = [
    "",
    " ",
    "1 Gi",
    " 1",
    "1\n",
    "1.2.3",
    "12Mx",
    "12x",
    "--1",
    "+-1",
    "-",
    "+",
    ".",
    "Gi",
    "e3",
    "1K",  # kilo is lower-case k
    "1KI",
    "1Gii",
    "1e",
    "1e1.5",
    "1e3Gi",
    "1,5",
    "1_000",
    "0x10",
    "nan",
    "inf",
    "\uff11",  # a full-width digit one
    "1" * 101,
]


@pytest.mark.parametrize(("text", "resource", "expected"), VALID)
def test_parse_valid(text: str | int | float, resource: str, expected: int) -> None:
    assert parse_quantity(text, resource) == expected


@pytest.mark.parametrize("text", INVALID)
def test_parse_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(text, "cpu")


@pytest.mark.parametrize("value", [True, None, [1], float("nan"), float("inf")])
def test_parse_rejects_non_quantities(value: object) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(value, "memory")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "resource", "unit"),
    [
        ("8Ei", "memory", " bytes"),
        ("1E", "cpu", " millicores"),
        ("1e41", "memory", " bytes"),
        ("10000000000000000000", "pods", ""),
        ("9007199254740992", "example.com/gpu", ""),  # 2^53
        ("9007199254740992m", "cpu", " millicores"),
        ("9007199254741", "cpu", " millicores"),  # 2^53 millicores and then some
        ("9223372036854775807m", "cpu", " millicores"),  # int64's maximum
        ("-8Pi", "memory", " bytes"),
    ],
)
def test_parse_beyond_the_ledgers_limit(text: str, resource: str, unit: str) -> None:
    expected = f"{text} exceeds the largest amount distsched can account (2^53-1{unit})"
    with pytest.raises(ValueError) as info:
        parse_quantity(text, resource)
    assert str(info.value) == expected


def test_error_message_quotes_the_input() -> None:
    with pytest.raises(ValueError) as info:
        parse_quantity("12x", "cpu")
    assert str(info.value) == 'invalid quantity "12x"'


@pytest.mark.parametrize(
    ("amount", "resource", "text"),
    [
        (250, "cpu", "250m"),
        (2000, "cpu", "2"),
        (0, "cpu", "0"),
        (1500, "cpu", "1500m"),
        (GI, "memory", "1Gi"),
        (3 * GI // 2, "memory", "1536Mi"),
        (1000, "memory", "1000"),
        (1024, "ephemeral-storage", "1Ki"),
        (2 * MI, "hugepages-2Mi", "2Mi"),
        (1024, "pods", "1024"),  # counts are never given binary suffixes
        (7, "example.com/gpu", "7"),
        (0, "memory", "0"),
    ],
)
def test_format(amount: int, resource: str, text: str) -> None:
    assert format_quantity(amount, resource) == text


RESOURCES = st.sampled_from(["cpu", "memory", "ephemeral-storage", "pods", "example.com/gpu"])


@given(st.integers(min_value=-MAX_AMOUNT, max_value=MAX_AMOUNT), RESOURCES)
def test_format_round_trips(amount: int, resource: str) -> None:
    assert parse_quantity(format_quantity(amount, resource), resource) == amount


@given(
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=0, max_value=9),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e2", "e-2"]),
)
def test_cpu_is_ceiling_of_value_times_1000(whole: int, frac: int, suffix: str) -> None:
    scales: dict[str, int | Fraction] = {
        "": 1,
        "m": Fraction(1, 1000),
        "k": 1000,
        "M": 10**6,
        "G": 10**9,
        "Ki": 1024,
        "Mi": 1024**2,
        "Gi": 1024**3,
        "e2": 100,
        "e-2": Fraction(1, 100),
    }
    scale = scales[suffix]
    value = (whole + Fraction(frac, 10)) * scale
    expected = -(-value * 1000 // 1)
    text = f"{whole}.{frac}{suffix}"
    if expected > MAX_AMOUNT:
        with pytest.raises(ValueError, match="exceeds the largest amount"):
            parse_quantity(text, "cpu")
    else:
        assert parse_quantity(text, "cpu") == expected
