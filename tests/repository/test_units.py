"""Durations carry their unit; data types come from numpy or from Triton's names."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.repository import dtype_to_numpy, dtype_to_triton, format_duration_us, to_microseconds


@pytest.mark.parametrize(
    ("value", "us"),
    [("5ms", 5000), ("5000us", 5000), ("5000µs", 5000), ("0.5ms", 500), ("1s", 1_000_000), (" 20 ms ", 20000),
     ("1min", 60_000_000), (timedelta(milliseconds=7), 7000), (timedelta(microseconds=3), 3)],
)
def test_durations_with_units_convert_to_microseconds(value: str | timedelta, us: int) -> None:
    assert to_microseconds(value) == us


@pytest.mark.parametrize("value", [5, 5.0, "5", "5 hours", "ms", "-5ms"])
def test_durations_without_a_known_unit_are_refused(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        to_microseconds(value, field="window")  # type: ignore[arg-type]
    assert "window" in str(info.value)


def test_bare_number_error_suggests_both_units_and_the_us_parameter() -> None:
    with pytest.raises(ConfigError) as info:
        to_microseconds(5, field="window")  # type: ignore[arg-type]
    assert info.value.hint is not None
    assert '"5ms"' in info.value.hint and "window_us=5" in info.value.hint


def test_fraction_of_a_microsecond_is_refused() -> None:
    with pytest.raises(ConfigError, match="whole number of microseconds"):
        to_microseconds("0.0005ms")


def test_durations_format_back_in_the_largest_whole_unit() -> None:
    assert [format_duration_us(v) for v in (5000, 1500, 2_000_000, 0)] == ["5ms", "1500us", "2s", "0us"]


@pytest.mark.parametrize(
    ("dtype", "name"),
    [(np.float32, "TYPE_FP32"), (np.dtype("float16"), "TYPE_FP16"), ("FP32", "TYPE_FP32"), ("TYPE_INT64", "TYPE_INT64"),
     ("int8", "TYPE_INT8"), (np.bool_, "TYPE_BOOL"), (bytes, "TYPE_STRING"), (np.object_, "TYPE_STRING"),
     ("BF16", "TYPE_BF16"), ("string", "TYPE_STRING"), (mc.TYPE_UINT16, "TYPE_UINT16")],
)
def test_dtypes_from_numpy_or_triton_names(dtype: object, name: str) -> None:
    assert mc.DataType.Name(dtype_to_triton(dtype)) == name  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", ["float128x", "TYPE_INVALID", 0, np.complex64])
def test_unknown_dtypes_are_refused_with_the_known_names(dtype: object) -> None:
    with pytest.raises(ConfigError):
        dtype_to_triton(dtype)  # type: ignore[arg-type]


def test_triton_types_map_back_to_numpy() -> None:
    assert dtype_to_numpy("TYPE_FP16") == np.float16
    assert dtype_to_numpy("STRING") == np.object_
    with pytest.raises(ConfigError, match="no numpy equivalent"):
        dtype_to_numpy("BF16")
