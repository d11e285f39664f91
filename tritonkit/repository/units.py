"""Durations with units and Triton data types: the two values users most often get wrong.

Triton stores every duration as an integer count of microseconds
(``max_queue_delay_microseconds``); people think in milliseconds. Nothing here
accepts a bare number as a duration: a string carries its unit (``"5ms"``,
``"5000us"``), a :class:`~datetime.timedelta` carries its own, and a plain int is
only accepted through a parameter whose name says ``_us``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, TypeAlias

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._values import MAX_SECONDS, excerpt
from tritonkit.errors import ConfigError

__all__ = [
    "Duration",
    "DTypeLike",
    "dtype_to_numpy",
    "dtype_to_triton",
    "format_duration_us",
    "to_microseconds",
]

#: A duration with its unit: ``"5ms"``, ``"5000us"``, ``"0.5s"`` or a ``timedelta``.
Duration: TypeAlias = "str | timedelta"

#: A data type: numpy dtype or scalar type, ``"TYPE_FP32"``, ``"FP32"``, ``"float32"``, or the enum value.
DTypeLike: TypeAlias = "str | int | np.dtype[Any] | type"

_UNIT_US = {
    "us": 1.0,
    "µs": 1.0,
    "μs": 1.0,
    "ms": 1_000.0,
    "s": 1_000_000.0,
    "sec": 1_000_000.0,
    "min": 60_000_000.0,
}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|µs|μs|ms|s|sec|min)\s*$")


def to_microseconds(value: Duration, *, field: str = "duration") -> int:
    """Convert a duration with a unit to whole microseconds.

    >>> to_microseconds("5ms"), to_microseconds("5000us"), to_microseconds(timedelta(milliseconds=20))
    (5000, 5000, 20000)

    A bare number is refused because it is exactly the mistake this guards
    against (is ``5`` five milliseconds or five microseconds?).
    """
    if isinstance(value, timedelta):
        us = value / timedelta(microseconds=1)
    elif isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match is None and re.fullmatch(r"\s*\d+(\.\d*)?\s*", value):
            raise ConfigError(f"{field}: {excerpt(value)} has no unit", hint=_unit_hint(value.strip(), field))
        if match is None:
            raise ConfigError(
                f"{field}: cannot read duration {excerpt(value)}",
                hint='write a number with a unit: "5ms", "5000us", "0.5s" (units: us, ms, s, min)',
            )
        us = float(match.group(1)) * _UNIT_US[match.group(2)]
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{field}: expected a duration, got {type(value).__name__} {excerpt(value)}",
                          hint='pass "5ms", "5000us" or a datetime.timedelta')
    else:
        raise ConfigError(f"{field}: bare number {excerpt(value)} has no unit", hint=_unit_hint(str(value), field))
    if us < 0:
        raise ConfigError(f"{field}: duration {excerpt(value)} is negative", hint="use a duration >= 0")
    if us > MAX_SECONDS * 1e6:
        raise ConfigError(f"{field}: duration {excerpt(value)} is longer than {MAX_SECONDS / 86400:g} days",
                          hint='write a shorter duration: "5ms", "500ms", "10s"')
    rounded = round(us)
    if abs(us - rounded) > 1e-6:
        raise ConfigError(f"{field}: {excerpt(value)} is not a whole number of microseconds",
                          hint="Triton stores durations as integer microseconds")
    return int(rounded)


def _unit_hint(number: str, field: str) -> str:
    hint = f'write it with a unit: "{number}ms" or "{number}us"'
    if field.isidentifier():  # a Python parameter has a *_us sibling; a CLI flag does not
        hint += f", or pass {field}_us={number} if it is microseconds"
    return hint


def format_duration_us(us: int) -> str:
    """Render microseconds the way a person reads them: ``5000`` → ``"5ms"``, ``1500`` → ``"1500us"``."""
    if us and us % 1_000_000 == 0:
        return f"{us // 1_000_000}s"
    if us and us % 1_000 == 0:
        return f"{us // 1_000}ms"
    return f"{us}us"


# numpy dtype name -> Triton short name. Triton's TYPE_STRING carries bytes (numpy object / bytes_).
_NUMPY_TO_TRITON = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "uint16": "UINT16",
    "uint32": "UINT32",
    "uint64": "UINT64",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "object": "STRING",
    "bytes": "STRING",
    "str": "STRING",
    "bfloat16": "BF16",
}
_TRITON_TO_NUMPY: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "STRING": np.object_,
}
_TRITON_NAMES = {name.removeprefix("TYPE_") for name in list(mc.DataType.keys())} - {"INVALID"}


def dtype_to_triton(dtype: DTypeLike, *, field: str = "data_type") -> int:
    """Return the ``DataType`` enum value for ``dtype``.

    Accepts ``np.float32``, ``np.dtype("float32")``, ``"float32"``, ``"FP32"`` and
    ``"TYPE_FP32"``; ``bytes``/``object``/``str`` mean Triton's ``TYPE_STRING``.
    """
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if dtype in mc.DataType.values() and dtype != mc.TYPE_INVALID:
            return dtype
        raise ConfigError(f"{field}: {dtype} is not a Triton DataType value")
    if isinstance(dtype, str):
        upper = dtype.strip().upper().removeprefix("TYPE_")
        if upper in _TRITON_NAMES:
            return int(mc.DataType.Value("TYPE_" + upper))
        name = dtype.strip().lower()
        if name in ("string", "bytes", "str", "object"):
            return int(mc.TYPE_STRING)
    else:
        try:
            name = "bytes" if dtype in (bytes, str, np.bytes_, np.str_) else np.dtype(dtype).name  # type: ignore[arg-type]
        except TypeError:
            name = ""
    short = _NUMPY_TO_TRITON.get(name)
    if short is None:
        raise ConfigError(
            f"{field}: unknown data type {dtype!r}",
            hint="use a numpy dtype (np.float32) or a Triton name (FP32, TYPE_FP32); "
            f"Triton knows {', '.join(sorted(_TRITON_NAMES))}",
        )
    return int(mc.DataType.Value("TYPE_" + short))


def dtype_to_numpy(dtype: DTypeLike) -> np.dtype[Any]:
    """Return the numpy dtype matching a Triton data type (``TYPE_STRING`` → ``object``).

    ``BF16`` has no numpy equivalent and raises :class:`ConfigError`.
    """
    short = mc.DataType.Name(dtype_to_triton(dtype)).removeprefix("TYPE_")
    if short not in _TRITON_TO_NUMPY:
        raise ConfigError(f"data type {short} has no numpy equivalent",
                          hint="send BF16 as raw bytes or convert to FP32 on the client")
    return np.dtype(_TRITON_TO_NUMPY[short])
