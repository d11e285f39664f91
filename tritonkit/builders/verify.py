"""Numeric verification of a built model: ONNX Runtime against a reference, and batch consistency.

Errors are reported per output as a table: ``max abs err`` is ``max |got - want|`` and
``max rel err`` is that divided by ``max |want|`` (the output's own scale). Relative error
element by element explodes wherever the reference is near zero, which says nothing
about the model; relative to the output's scale it reads as "how many percent off".
An output passes when ``max abs err <= atol + rtol * max |want|``; integer, bool and
string outputs must match exactly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritonkit._fs import regular_file
from tritonkit._optional import require_module
from tritonkit._values import excerpt
from tritonkit.builders.onnx_tensor import TensorInfo
from tritonkit.errors import BuildError, ConfigError

__all__ = [
    "FP16_TOLERANCE",
    "FP32_TOLERANCE",
    "PINNED_PARAMETER",
    "VERIFIED_SIZES_PARAMETER",
    "Comparison",
    "DynamicAxis",
    "OutputComparison",
    "Reference",
    "Tolerance",
    "check_batch_consistency",
    "check_dynamic_axes",
    "compare_outputs",
    "dynamic_axes",
    "format_verified_sizes",
    "load_samples",
    "make_samples",
    "ort_runner",
    "parse_verified_sizes",
    "verify_against_reference",
]

#: Something that maps input arrays by name to output arrays by name.
Reference = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]

#: Size used for dynamic dimensions other than the batch axis when samples are generated.
DEFAULT_DYNAMIC_SIZE = 16
#: Second sizes tried for each dynamic non-batch axis, in order; the first one the model runs (and,
#: with a reference, answers right) at is its second verified size. 128 is the length ``perf run``
#: derives by default.
SECOND_SIZES = (128, 32, 8)
#: ``config.pbtxt`` parameter recording the sizes each dynamic axis was verified at
#: (``seq=16,128;image=16,32``), which ``perf run`` reads to derive data the model was proven on.
VERIFIED_SIZES_PARAMETER = "tritonkit_verified_sizes"
#: ``config.pbtxt`` parameter saying why a dynamic axis is pinned to one size in the config.
PINNED_PARAMETER = "tritonkit_pinned_dims"


@dataclass(frozen=True)
class Tolerance:
    """Pass when ``max abs err <= atol + rtol * max |reference|``."""

    atol: float
    rtol: float


#: Same arithmetic, different kernels or batch shapes: float32 rounding only.
FP32_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-4)
#: FP16 weights and activations against an FP32 reference: about 1 % of the output's scale.
FP16_TOLERANCE = Tolerance(atol=1e-3, rtol=2e-2)


@dataclass(frozen=True)
class OutputComparison:
    """One output's errors."""

    name: str
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    limit: float
    ok: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        return {"output": self.name, "shape": list(self.shape), "max_abs_error": self.max_abs_error,
                "max_rel_error": self.max_rel_error, "limit": self.limit, "ok": self.ok, "note": self.note}


@dataclass(frozen=True)
class Comparison:
    """A verification step: a title, how many samples, and one row per output."""

    title: str
    samples: int
    rows: tuple[OutputComparison, ...]
    error: str = ""

    @property
    def ok(self) -> bool:
        """True when the step ran and every output passed."""
        return not self.error and all(r.ok for r in self.rows)

    def failures(self) -> list[str]:
        """One phrase per failing output (or the error that stopped the step)."""
        if self.error:
            return [self.error]
        return [f"{r.name}: max abs err {r.max_abs_error:.3g} > {r.limit:.3g}" + (f" ({r.note})" if r.note else "")
                for r in self.rows if not r.ok]

    def table(self) -> str:
        """The step as a text table (what ``tritonkit build`` prints)."""
        lines = [f"{self.title} ({self.samples} sample{'s' if self.samples != 1 else ''})"]
        if self.error:
            lines.append(f"  failed: {self.error}")
            return "\n".join(lines)
        header = ("output", "shape", "max abs err", "max rel err", "limit (abs)", "result")
        body = [(r.name, "[" + ", ".join(str(d) for d in r.shape) + "]", f"{r.max_abs_error:.3g}",
                 f"{r.max_rel_error:.3g}", f"{r.limit:.3g}", ("ok" if r.ok else "FAIL") + (f" {r.note}" if r.note else ""))
                for r in self.rows]
        widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
        for row in [header, *body]:
            lines.append("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for JSON."""
        return {"title": self.title, "samples": self.samples, "ok": self.ok, "error": self.error,
                "outputs": [r.to_dict() for r in self.rows]}


# ---------------------------------------------------------------------------- samples

#: The most sample data generated for one input to verify a model: far above any real input.
MAX_SAMPLE_BYTES = 1 << 30


def axis_key(info: TensorInfo, axis: int) -> str:
    """The name a dynamic axis goes by: its symbol (``seq``), else ``input:axis`` for an unnamed one."""
    assert info.shape is not None
    dim = info.shape[axis]
    return dim if isinstance(dim, str) and dim else f"{info.name}:{axis}"


def _sample_shape(info: TensorInfo, *, count: int, batched: bool, dynamic_size: int,
                  sizes: Mapping[str, int] | None = None) -> tuple[int, ...]:
    assert info.shape is not None
    dims = [d if isinstance(d, int) else (sizes or {}).get(axis_key(info, i), dynamic_size)
            for i, d in enumerate(info.shape)]
    if batched:
        dims[0] = count
    return tuple(dims)


def make_samples(inputs: Sequence[TensorInfo], *, count: int, batched: bool, seed: int = 0,
                 dynamic_size: int = DEFAULT_DYNAMIC_SIZE, sizes: Mapping[str, int] | None = None
                 ) -> dict[str, np.ndarray]:
    """Deterministic random inputs: ``count`` samples along the batch axis when ``batched``,
    else one full tensor per input. Dynamic dimensions get ``dynamic_size``, or their own size
    in ``sizes`` (keyed as :func:`axis_key` names them).

    Floats are standard normal; integers are 0 or 1 (safe as indices into any table);
    booleans are random; strings are short words.
    """
    rng = np.random.default_rng(seed)
    samples: dict[str, np.ndarray] = {}
    for info in inputs:
        if info.shape is None:
            raise BuildError(f"input {info.name!r} has no declared rank, so samples cannot be generated",
                             hint="pass --samples FILE.npz with real inputs")
        shape = _sample_shape(info, count=count, batched=batched, dynamic_size=dynamic_size, sizes=sizes)
        dtype = info.numpy_dtype
        size_bytes = math.prod(shape) * max(dtype.itemsize, 8)
        if size_bytes > MAX_SAMPLE_BYTES:
            raise BuildError(f"input {info.name!r} of shape {list(shape)} would need {size_bytes:.3g} bytes of samples, "
                             f"more than the {MAX_SAMPLE_BYTES >> 20} MiB generated to verify a model",
                             hint="check the input's dims in the model; pass --samples FILE.npz, or --no-verify")
        if dtype.kind == "f":
            samples[info.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            samples[info.name] = rng.integers(0, 2, size=shape).astype(dtype)
        elif dtype.kind == "b":
            samples[info.name] = rng.random(shape) < 0.5
        elif dtype.kind == "O":
            words = np.array(["alpha", "beta", "gamma"], dtype=object)
            samples[info.name] = words[rng.integers(0, 3, size=shape)]
        else:
            raise BuildError(f"input {info.name!r}: cannot generate samples of type {info.onnx_type}",
                             hint="pass --samples FILE.npz with real inputs")
    return samples


def load_samples(path: Path | str, inputs: Sequence[TensorInfo], *, batched: bool) -> dict[str, np.ndarray]:
    """Read an ``.npz`` with one array per input name.

    With ``batched`` the first axis of every array counts samples (all equal); otherwise each
    array is one whole request. Types are converted when numpy can do so safely.
    """
    path = Path(path)
    regular_file(path, what="--samples file", hint="pass an .npz saved with numpy.savez(path, name=array, ...)")
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - numpy raises ValueError/OSError/BadZipFile
        raise ConfigError(f"--samples {path}: not a readable .npz file: {excerpt(str(exc), 120)}",
                          hint="save samples with numpy.savez(path, input_name=array, ...)") from exc
    with archive:
        missing = [i.name for i in inputs if i.name not in archive.files]
        if missing:
            raise ConfigError(f"--samples {path}: no array for input(s) {', '.join(missing)} "
                              f"(it has {', '.join(archive.files) or 'nothing'})",
                              hint="name each array after the model input it feeds")
        samples = {i.name: archive[i.name] for i in inputs}
    counts: set[int] = set()
    for info in inputs:
        array = samples[info.name]
        assert info.shape is not None
        if array.ndim != len(info.shape):
            raise ConfigError(f"--samples {path}: {info.name!r} has shape {list(array.shape)}, the model wants "
                              f"rank {len(info.shape)} ({info.describe()})", hint="reshape the sample array")
        for axis, (want, got) in enumerate(zip(info.shape, array.shape, strict=True)):
            if batched and axis == 0:
                continue
            if isinstance(want, int) and want != got:
                raise ConfigError(f"--samples {path}: {info.name!r} axis {axis} is {got}, the model fixes it to {want}",
                                  hint="reshape the sample array")
        if batched:
            counts.add(array.shape[0])
        if info.elem_type != 8 and array.dtype != info.numpy_dtype:  # 8: STRING
            if not np.can_cast(array.dtype, info.numpy_dtype, casting="same_kind"):
                raise ConfigError(f"--samples {path}: {info.name!r} is {array.dtype}, the model wants {info.numpy_dtype}",
                                  hint="save the array with the model's dtype")
            samples[info.name] = array.astype(info.numpy_dtype)
    if batched and len(counts) > 1:
        raise ConfigError(f"--samples {path}: arrays hold different numbers of samples {sorted(counts)}",
                          hint="give every input the same number of samples along the first axis")
    return samples


# ---------------------------------------------------------------------------- running


def ort_runner(path: Path | str, *, threads: int | None = None) -> Reference:
    """An ONNX Runtime session on ``path`` (CPU), as a :data:`Reference`. Load errors become :class:`BuildError`."""
    ort = require_module("onnxruntime", "onnxruntime is not installed; it is needed to verify ONNX models",
                         "pip install 'tritonkit[cpu]' (or tritonkit[gpu])")
    options = ort.SessionOptions()
    # Failures come back as exceptions and are reported from them; ORT's own log lines would repeat them.
    options.log_severity_level = 4
    if threads:
        options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own pybind exception types
        raise BuildError(f"ONNX Runtime cannot load {path}: {load_error_text(exc)}",
                         hint=load_error_hint(str(exc))) from exc
    output_names = [o.name for o in session.get_outputs()]

    def run(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = session.run(output_names, dict(feeds))
        return {name: np.asarray(value) for name, value in zip(output_names, results, strict=True)}

    return run


def load_error_text(exc: BaseException) -> str:
    """ONNX Runtime's whole load error on one line, without its error-code prefix: the real cause
    (a missing locale, a missing file) is often at the end, so nothing is cut."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)


def load_error_hint(message: str) -> str:
    """The fix for a load error, from its cause."""
    locale = re.search(r"locale with name:\s*([\w.@-]+)", message)
    if locale:
        return (f"the model asks for the locale {locale.group(1)!r}, which this machine lacks (a StringNormalizer, "
                "as skl2onnx writes for text vectorizers); re-convert with a locale every machine has: "
                "to_onnx(..., options={id(vectorizer): {'locale': 'C.UTF-8'}}), or install that locale "
                "(locale-gen) on every server")
    return ("the model uses an operator or type this ONNX Runtime lacks; check the opset report "
            "and update onnxruntime or re-export")


def _first_line(exc: BaseException, *, limit: int = 240) -> str:
    """A short, single-line account of ``exc``; ONNX Runtime's kernel errors are cut to op + reason."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    match = re.search(r"running (\w+) node\..*?Status Message: (.*)$", text)
    if match:
        reason = match.group(2)
        # Drop ORT's source location and the failed internal assertion before the human sentence.
        reason = re.sub(r"^\S*onnxruntime_src\S* .*? was false\. ", "", reason)
        text = f"{match.group(1)}: {reason}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compare_one(name: str, got: np.ndarray, want: np.ndarray, tol: Tolerance) -> OutputComparison:
    shape = tuple(int(d) for d in want.shape)
    if got.shape != want.shape:
        return OutputComparison(name, shape, float("inf"), float("inf"), 0.0, False,
                                f"shape {list(got.shape)} != {list(want.shape)}")
    if want.dtype.kind in "biuOSU" or got.dtype.kind in "biuOSU":
        equal = np.array_equal(got, want)
        mismatches = int(np.count_nonzero(got != want)) if got.size else 0
        if want.dtype.kind in "biu" and got.dtype.kind in "biu":
            diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0.0
        else:
            diff = 0.0 if equal else float(mismatches)
        scale = float(np.max(np.abs(want.astype(np.float64)))) if want.size and want.dtype.kind in "biu" else 0.0
        return OutputComparison(name, shape, diff, diff / scale if scale else diff, 0.0, equal,
                                "" if equal else f"{mismatches} element(s) differ (exact match required)")
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    if not np.array_equal(nan_g, nan_w):
        return OutputComparison(name, shape, float("nan"), float("nan"), 0.0, False, "NaN in different places")
    finite = ~nan_w
    if not finite.any():
        return OutputComparison(name, shape, 0.0, 0.0, 0.0, True, "all NaN")
    g, w = g[finite], w[finite]
    inf_mismatch = not np.array_equal(np.isinf(g), np.isinf(w)) or not np.array_equal(g[np.isinf(w)], w[np.isinf(w)])
    if inf_mismatch:
        return OutputComparison(name, shape, float("inf"), float("inf"), 0.0, False, "infinities differ")
    keep = ~np.isinf(w)
    g, w = g[keep], w[keep]
    max_abs = float(np.max(np.abs(g - w))) if g.size else 0.0
    scale = float(np.max(np.abs(w))) if w.size else 0.0
    limit = tol.atol + tol.rtol * scale
    return OutputComparison(name, shape, max_abs, max_abs / scale if scale else max_abs, limit, max_abs <= limit)


def compare_outputs(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], *, tolerance: Tolerance,
                    title: str, samples: int) -> Comparison:
    """Compare every output in ``want`` with the same-named one in ``got``."""
    rows = []
    for name, expected in want.items():
        if name not in got:
            rows.append(OutputComparison(name, tuple(expected.shape), float("inf"), float("inf"), 0.0, False,
                                         "missing from the candidate's outputs"))
            continue
        rows.append(_compare_one(name, np.asarray(got[name]), np.asarray(expected), tolerance))
    return Comparison(title=title, samples=samples, rows=tuple(rows))


def verify_against_reference(candidate: Reference, reference: Reference, samples: Mapping[str, np.ndarray], *,
                             tolerance: Tolerance, title: str, count: int) -> Comparison:
    """Run both on ``samples`` and compare; an exception in either is reported, not raised."""
    try:
        want = reference(samples)
    except Exception as exc:  # noqa: BLE001 - a reference that cannot run is a verification failure
        return Comparison(title=title, samples=count, rows=(), error=f"reference failed: {_first_line(exc)}")
    try:
        got = candidate(samples)
    except Exception as exc:  # noqa: BLE001
        return Comparison(title=title, samples=count, rows=(), error=f"ONNX Runtime failed: {_first_line(exc)}")
    return compare_outputs(got, want, tolerance=tolerance, title=title, samples=count)


def check_batch_consistency(run: Reference, samples: Mapping[str, np.ndarray], *, k: int,
                            tolerance: Tolerance) -> Comparison:
    """Run the first ``k`` samples as one batch, then one at a time, and compare.

    Dynamic batching merges requests from different clients into one batch; a model is only
    safe for it when sample i's answer does not depend on what else is in the batch.
    """
    title = f"batch consistency: {k} samples as one batch vs one by one"
    batch = {name: array[:k] for name, array in samples.items()}
    try:
        together = run(batch)
    except Exception as exc:  # noqa: BLE001
        return Comparison(title=title, samples=k, rows=(), error=f"a batch of {k} does not run: {_first_line(exc)}")
    singles: list[Mapping[str, np.ndarray]] = []
    for i in range(k):
        try:
            singles.append(run({name: array[i:i + 1] for name, array in samples.items()}))
        except Exception as exc:  # noqa: BLE001
            return Comparison(title=title, samples=k, rows=(), error=f"a batch of 1 does not run: {_first_line(exc)}")
    for name, value in together.items():
        if value.ndim == 0 or value.shape[0] != k:
            return Comparison(title=title, samples=k, rows=(),
                              error=f"output {name!r} has shape {list(value.shape)} for a batch of {k}: "
                                    "its first axis does not follow the batch")
    for single in singles:
        for name, value in single.items():
            if value.ndim == 0 or value.shape[0] != 1:
                return Comparison(title=title, samples=k, rows=(),
                                  error=f"output {name!r} has shape {list(value.shape)} for a batch of 1: "
                                        "its first axis does not follow the batch")
    one_by_one = {name: np.concatenate([s[name] for s in singles], axis=0) for name in together}
    return compare_outputs(together, one_by_one, tolerance=tolerance, title=title, samples=k)


# ---------------------------------------------------------------------------- dynamic axes


@dataclass(frozen=True)
class DynamicAxis:
    """A dynamic non-batch axis (its symbol, or ``input:axis``) and the sizes it was verified at.

    ``pinned``: it ran (right) at one size only, so the config fixes it there; ``failures`` say what
    went wrong at each other size tried.
    """

    name: str
    sizes: tuple[int, ...]
    failures: tuple[str, ...] = ()

    @property
    def pinned(self) -> bool:
        """True when only one size was verified."""
        return len(self.sizes) < 2


def dynamic_axes(inputs: Sequence[TensorInfo], *, batched: bool) -> list[str]:
    """The dynamic non-batch axes of ``inputs``, each once (axes sharing a symbol are one axis)."""
    found: dict[str, None] = {}
    for info in inputs:
        for axis, dim in enumerate(info.shape or ()):
            if (batched and axis == 0) or isinstance(dim, int):
                continue
            found[axis_key(info, axis)] = None
    return list(found)


def _first_size(name: str, inputs: Sequence[TensorInfo], samples: Mapping[str, np.ndarray]) -> int:
    for info in inputs:
        for axis in range(len(info.shape or ())):
            if not isinstance((info.shape or ())[axis], int) and axis_key(info, axis) == name and info.name in samples:
                return int(np.asarray(samples[info.name]).shape[axis])
    return DEFAULT_DYNAMIC_SIZE


def check_dynamic_axes(candidate: Reference, reference: Reference | None, inputs: Sequence[TensorInfo],
                       samples: Mapping[str, np.ndarray], *, batched: bool, tolerance: Tolerance, count: int = 1
                       ) -> tuple[list[DynamicAxis], list[Comparison]]:
    """Verify each dynamic non-batch axis at a second size, one axis at a time (the others keep the
    size ``samples`` have): the sizes of :data:`SECOND_SIZES` in turn until the candidate runs there
    and, given a ``reference``, answers as it does. A graph exported by tracing can declare an axis
    dynamic while its Reshape nodes hold the traced size: it runs at that size only, and the axis
    comes back ``pinned``. ``count``: samples per trial along the batch axis (a multiple of an
    original model's fixed batch size). Returns the axes and the comparisons that passed."""
    axes: list[DynamicAxis] = []
    comparisons: list[Comparison] = []
    for name in dynamic_axes(inputs, batched=batched):
        first = _first_size(name, inputs, samples)
        failures: list[str] = []
        verified = [first]
        for size in SECOND_SIZES:
            if size == first:
                continue
            trial = make_samples(inputs, count=count, batched=batched, seed=1, sizes={name: size},
                                 dynamic_size=first)
            title = f"dynamic axis {name!r} at {size}"
            if reference is not None:
                comparison = verify_against_reference(candidate, reference, trial, tolerance=tolerance,
                                                      title=f"ONNX Runtime vs reference, {title}", count=count)
            else:
                try:
                    candidate(trial)
                    comparison = Comparison(title=f"{title}: runs", samples=count, rows=())
                except Exception as exc:  # noqa: BLE001 - ONNX Runtime raises its own pybind types
                    comparison = Comparison(title=title, samples=count, rows=(), error=_first_line(exc))
            if comparison.ok:
                verified.append(size)
                if comparison.rows:
                    comparisons.append(comparison)
                break
            failures.append(f"at {size}: {'; '.join(comparison.failures())}")
        axes.append(DynamicAxis(name, tuple(sorted(verified)), tuple(failures)))
    return axes, comparisons


def format_verified_sizes(axes: Sequence[DynamicAxis]) -> str:
    """``seq=16,128;image=16,32`` (the :data:`VERIFIED_SIZES_PARAMETER` value)."""
    return ";".join(f"{axis.name}={','.join(str(s) for s in axis.sizes)}" for axis in axes)


def parse_verified_sizes(text: str) -> dict[str, tuple[int, ...]]:
    """The axes and sizes of a :data:`VERIFIED_SIZES_PARAMETER` value; malformed parts are skipped."""
    found: dict[str, tuple[int, ...]] = {}
    for part in text.split(";"):
        name, _, sizes = part.partition("=")
        numbers = tuple(int(x) for x in sizes.split(",") if x.strip().isdigit())
        if name.strip() and numbers:
            found[name.strip()] = numbers
    return found
