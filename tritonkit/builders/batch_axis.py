"""Is the first axis of a model's inputs a batch axis? Decided from declared shapes and axis names.

Triton batches along a first axis that every input and output shares. A variable first axis is
usually the batch (exporters write ``[batch, ...]``), but a rank-1 input ``[L]`` is usually one
variable-length vector per request: taking it as the batch would turn a 10-element sequence
into ten requests of one element and refuse it past ``max_batch_size``. So the names of the
axes count, and when they say nothing a rank-1-only model is not batched; the reason is kept
for the build output, and ``--batch-axis`` overrides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tritonkit.builders.onnx_tensor import TensorInfo

__all__ = ["BatchAxis", "find_batch_axis"]

# Axis names exporters give a batch axis: torch's dynamic_axes {0: "batch"}, tf2onnx's "N" / "unk__".
_BATCH_NAME = re.compile(r"^(n|b|bs|batch\w*|\w*_batch(_size)?|num_samples|samples?)$", re.IGNORECASE)
# Axis names that say "length of one request's data", never a count of requests.
_SEQUENCE_NAME = re.compile(r"^(l|t|s|len|length|\w*seq\w*|\w*_len(gth)?|time\w*|\w*tokens?|steps?|frames?)$",
                            re.IGNORECASE)


@dataclass(frozen=True)
class BatchAxis:
    """Where the batch axis is, as far as the graph's declared shapes tell.

    ``kind`` is ``"dynamic"`` (every input and output has a variable first axis),
    ``"fixed"`` (every first axis is the same fixed size, ``fixed_size``: may be made
    dynamic if the graph allows), or ``"none"``. ``reason`` says why, in the user's terms.
    ``overridable``: the shapes allow batching and only the axis names (or a rank-1 model)
    argue against it, so ``--batch-axis`` may batch anyway.
    """

    kind: Literal["dynamic", "fixed", "none"]
    fixed_size: int | None = None
    reason: str = ""
    overridable: bool = False


def _by_names(inputs: Sequence[TensorInfo], candidate: BatchAxis) -> BatchAxis:
    """Look at the first axes' names (and ranks) before taking a shape-compatible first axis as the batch."""
    firsts = [(t, t.shape[0]) for t in inputs if t.shape]
    for t, dim in firsts:
        if isinstance(dim, str) and _BATCH_NAME.match(dim):
            return BatchAxis(candidate.kind, candidate.fixed_size,
                             f"first axis {dim!r} of input {t.name!r} is named like a batch axis")
    for t, dim in firsts:
        if isinstance(dim, str) and _SEQUENCE_NAME.match(dim):
            return BatchAxis("none", reason=f"first axis {dim!r} of input {t.quoted()} is named like a length "
                                            "that varies within one request, not a count of requests",
                             overridable=True)
    ranks = {len(t.shape) for t in inputs if t.shape is not None}
    if ranks == {1}:
        names = ", ".join(t.quoted() for t in inputs)
        return BatchAxis("none", reason=f"every input is rank 1 ({names}) and no axis is named like a batch: "
                                        "read as one vector per request", overridable=True)
    symbols = {dim for _t, dim in firsts if isinstance(dim, str)}
    if candidate.kind == "dynamic" and len(symbols) == 1 and len(firsts) > 1:
        why = f"every input's first axis is {next(iter(symbols))!r}"
    elif candidate.kind == "fixed":
        why = f"every input's first axis is fixed to {candidate.fixed_size}"
    else:
        why = "every input's and output's first axis is variable"
    return BatchAxis(candidate.kind, candidate.fixed_size, why + ": taken as the batch axis (exporters' convention)")


def find_batch_axis(inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo]) -> BatchAxis:
    """Decide from declared shapes and axis names whether the first axis is the batch axis."""
    if not inputs:
        return BatchAxis("none", reason="the model has no inputs")
    for role, tensors in (("input", inputs), ("output", outputs)):
        for t in tensors:
            if t.shape is None:
                return BatchAxis("none", reason=f"{role} {t.name!r} has no declared shape, so its first axis is unknown")
            if len(t.shape) == 0:
                return BatchAxis("none", reason=f"{role} {t.name!r} is a scalar; Triton batches along a first axis")
    firsts = [t.shape[0] for t in inputs if t.shape]
    fixed = [d for d in firsts if isinstance(d, int)]
    if fixed and len(fixed) != len(firsts):
        a = next(t for t in inputs if t.shape and isinstance(t.shape[0], int))
        b = next(t for t in inputs if t.shape and not isinstance(t.shape[0], int))
        return BatchAxis("none", reason=f"inputs disagree on the first axis: {a.quoted()} is fixed, "
                                        f"{b.quoted()} is variable")
    if fixed:
        if len(set(fixed)) > 1:
            return BatchAxis("none", reason="inputs have different fixed first axes "
                             + ", ".join(t.quoted() for t in inputs))
        size = fixed[0]
        for t in outputs:
            assert t.shape is not None
            if t.shape[0] != size and isinstance(t.shape[0], int):
                return BatchAxis("none", reason=f"output {t.quoted()} does not carry the inputs' first axis "
                                                f"({size}), so that axis is not a batch axis")
        return _by_names(inputs, BatchAxis("fixed", fixed_size=size))
    # Outputs whose first axis has another symbol than the inputs' are not refused: exporters name
    # axes freely, and the batch-consistency check at build time decides.
    for t in outputs:
        assert t.shape is not None
        if isinstance(t.shape[0], int):
            return BatchAxis("none", reason=f"output {t.quoted()} has a fixed first axis while the inputs' "
                                            "is variable: the graph reduces or reshapes across the batch (or the exporter "
                                            f"mis-declared it: then build with --batch-output {t.name})")
    return _by_names(inputs, BatchAxis("dynamic"))
