"""The ONNX Runtime inside Triton's onnxruntime backend, per server release, and what each one loads.

Which ONNX Runtime each Triton release ships is a release fact, kept with the others in
:data:`tritonkit.triton_releases.ONNXRUNTIME_VERSIONS` (read in ``triton-inference-server/server``
``build.py`` on each release branch, the "ORT" entry of ``TRITON_VERSION_MAP`` /
``DEFAULT_TRITON_VERSION_MAP``, which ``build.py`` hands to the backend's ``CMakeLists.txt`` as
``TRITON_BUILD_ONNXRUNTIME_VERSION``; ``onnxruntime_backend``'s ``CMakeLists.txt`` holds no default).
This module holds what each ONNX Runtime loads, with where it was read:

* :data:`ONNXRUNTIME_LIMITS` — ONNX Runtime minor version → the newest ONNX IR version and
  ``ai.onnx`` / ``ai.onnx.ml`` opsets it loads. Read from each ONNX Runtime release's own
  library (the PyPI ``onnxruntime`` wheel of that version, CPython 3.11, x86_64): a model stamped
  with IR 99 is refused with "Unsupported model IR version: 99, max supported IR version: N"
  (``onnxruntime/core/graph/model.cc``), and the first opset refused says "Current official support
  for domain ai.onnx is till opset N" (``onnxruntime/core/graph/model_load_utils.h``,
  ``ValidateOpsetForDomain``; releases refuse opsets ONNX has not released). These limits follow
  the ONNX version ONNX Runtime builds against (``cmake/deps.txt``), the same for the wheel and for
  the source build Triton's backend makes at that tag. The ``microsoft/onnxruntime`` repository is
  too large to bring here, so its files at the tags were not read; ONNX's own table
  (``onnx/onnx`` ``docs/Versioning.md`` and ``onnx/onnx.in.proto`` ``IR_VERSION`` at tags
  v1.16.1 … v1.21.0) agrees with every row: ONNX 1.16 = IR 10 / opset 21, 1.17 = 10 / 22,
  1.18 = 11 / 23, 1.20 = 13 / 25, 1.21 = 13 / 26.

A patch release keeps its minor's ONNX dependency, so limits are kept per minor version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tritonkit.triton_releases import ONNXRUNTIME_VERSIONS, release_of_version

__all__ = [
    "ONNXRUNTIME_LIMITS",
    "OnnxRuntimeLimits",
    "ReleaseOnnxRuntime",
    "limits_for",
    "model_problems",
    "onnxruntime_for_release",
    "release_line",
]

_SERVER = "triton-inference-server/server"


@dataclass(frozen=True)
class ReleaseOnnxRuntime:
    """The ONNX Runtime a Triton release's onnxruntime backend is built with, and where that was read."""

    line: str
    branch: str
    onnxruntime: str
    #: Why the fact was read at another line's branch (``""``: read at the line's own).
    carried_over: str = ""

    @property
    def source(self) -> str:
        """``triton-inference-server/server build.py @ r24.10`` (and, for a line read at another's branch, why)."""
        return f"{_SERVER} build.py @ {self.branch}" + (f" ({self.carried_over})" if self.carried_over else "")


@dataclass(frozen=True)
class OnnxRuntimeLimits:
    """The newest ONNX IR version and opsets one ONNX Runtime minor version loads."""

    minor: str
    max_ir_version: int
    max_opset: int
    max_ml_opset: int
    read_at: str

    @property
    def source(self) -> str:
        """Where the limits were read: ``onnxruntime==1.19.2 (PyPI wheel): its own load errors``."""
        return f"onnxruntime=={self.read_at} (PyPI wheel, cp311 x86_64): its own load errors"


def _limits(minor: str, ir: int, opset: int, ml: int, read_at: str) -> OnnxRuntimeLimits:
    return OnnxRuntimeLimits(minor, ir, opset, ml, read_at)


#: ONNX Runtime ``major.minor`` → what it loads (see the module docstring).
ONNXRUNTIME_LIMITS: dict[str, OnnxRuntimeLimits] = {lim.minor: lim for lim in (
    _limits("1.19", 10, 21, 5, "1.19.2"), _limits("1.20", 10, 21, 5, "1.20.1"), _limits("1.21", 10, 22, 5, "1.21.0"),
    _limits("1.22", 10, 22, 5, "1.22.0"), _limits("1.23", 11, 23, 5, "1.23.2"), _limits("1.24", 13, 25, 5, "1.24.4"),
    _limits("1.27", 13, 26, 5, "1.27.0"), _limits("1.28", 13, 26, 5, "1.28.0"),
)}

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+.]\w+)*\s*$")


def release_line(text: str, *, origin: str = "--server-version") -> str:
    """The release line (``"2.51"``) of ``2.51``, ``2.51.0``, an NGC tag ``24.10`` or a branch ``r24.10``
    (:func:`tritonkit.triton_releases.release_of_version`: an unknown one is a :class:`ConfigError`
    listing the known lines)."""
    return str(release_of_version(text, origin=origin))


def onnxruntime_for_release(text: str, *, origin: str = "--server-version") -> ReleaseOnnxRuntime:
    """The ONNX Runtime of release ``text`` (``2.51``, ``2.51.0``, ``24.10``) with its source."""
    line = release_of_version(text, origin=origin)
    return ReleaseOnnxRuntime(str(line), line.read_at, ONNXRUNTIME_VERSIONS[str(line)], line.carried_over)


def limits_for(onnxruntime_version: str) -> OnnxRuntimeLimits | None:
    """What ONNX Runtime ``onnxruntime_version`` (``1.19.2``) loads; ``None`` for a minor version not in
    :data:`ONNXRUNTIME_LIMITS` (nothing is checked then rather than guessed)."""
    match = _VERSION.match(onnxruntime_version)
    if match is None:
        return None
    return ONNXRUNTIME_LIMITS.get(f"{int(match.group(1))}.{int(match.group(2))}")


def model_problems(ir_version: int, opsets: Mapping[str, int], onnxruntime_version: str) -> list[str]:
    """What in a model (its ``ir_version`` and ``opset_import`` by domain, ``""`` for ``ai.onnx``) ONNX
    Runtime ``onnxruntime_version`` refuses to load, one phrase each; empty when it loads them, or when
    that version's limits are not known."""
    limits = limits_for(onnxruntime_version)
    if limits is None:
        return []
    problems = []
    if ir_version > limits.max_ir_version:
        problems.append(f"IR version {ir_version} (ONNX Runtime {onnxruntime_version} loads IR {limits.max_ir_version} "
                        "and older)")
    for domain, name, most in (("", "ai.onnx", limits.max_opset), ("ai.onnx.ml", "ai.onnx.ml", limits.max_ml_opset)):
        opset = opsets.get(domain) or (opsets.get("ai.onnx") if domain == "" else None)
        if opset is not None and opset > most:
            problems.append(f"{name} opset {opset} (ONNX Runtime {onnxruntime_version} loads opset {most} and older)")
    return problems
