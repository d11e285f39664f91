"""TK316 — warmup samples the server cannot build.

Beyond what TK311 compares with the inputs, ``TritonModelInstance::GenerateWarmupData`` (core
``src/backend_model_instance.cc``, read at r24.10 and r26.06) refuses, for every sample with a
``batch_size`` above 0 (a sample of batch 0 is skipped unread):

* a sample with a ``-1`` in its dims: "warmup setting expects all variable-size dimensions are
  specified";
* an input with none of ``zero_data``, ``random_data``, ``input_data_file``: "warmup setting
  expects input '...' to have input_data_type set";
* a non-string input whose ``input_data_file`` (``<model>/warmup/<name>``, a leading ``/`` joined
  too) holds fewer bytes than the sample's dims need: "warmup setting expects N bytes, but the data
  provided from ... only has M bytes".

The data file's size is read with ``os.stat``; the file is never opened.
"""

from __future__ import annotations

import math
import os

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, LintContext, ModelInfo, rule
from tritonkit.repository.lint.rules.sequence import DTYPE_BYTES
from tritonkit.repository.pbtxt import enum_name

#: Where Triton reads warmup data files, inside the model folder (core ``kWarmupDataFolder``).
WARMUP_FOLDER = "warmup"
_SOURCE = "core src/backend_model_instance.cc GenerateWarmupData @ r24.10"


def warmup_file(m: ModelInfo, name: str) -> str:
    """The path the server reads warmup file ``name`` from (``JoinPath``: an absolute name is joined too)."""
    return os.path.join(m.folder, WARMUP_FOLDER, name.lstrip("/"))


def _file_size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except (OSError, ValueError):
        return None  # missing: TK311 says so


@rule("TK316", ERROR, "warmup sample the server cannot build", family="tensors")
def warmup_samples_buildable(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.platform == "ensemble":
        return
    for i, w in enumerate(cfg.model_warmup):
        if w.batch_size == 0:
            continue  # skipped by the server without a look
        for key in sorted(w.inputs):
            sample = w.inputs[key]
            path = f'model_warmup[{i}].inputs["{key}"]'
            if any(d < 0 for d in sample.dims):
                ctx.report(m, f"warmup {w.name!r} input {key!r} has dims {list(sample.dims)}: the server refuses a "
                           f"variable-size dim in a warmup sample ('expects all variable-size dimensions are "
                           f"specified'; {_SOURCE})", field=f"{path}.dims",
                           hint="give every dim its size (the warmup sample is one concrete request)")
                continue
            kind = sample.WhichOneof("input_data_type")
            if kind is None:
                ctx.report(m, f"warmup {w.name!r} input {key!r} names no data: the server refuses it ('expects input "
                           f"{key!r} to have input_data_type set'; {_SOURCE})", field=path,
                           hint="add zero_data: true, random_data: true or input_data_file: \"NAME\"")
                continue
            dtype = enum_name(mc.DataType, sample.data_type, field=f"{path}.data_type")
            if kind != "input_data_file" or dtype == "TYPE_STRING" or dtype not in DTYPE_BYTES:
                continue
            need = math.prod(sample.dims) * DTYPE_BYTES[dtype]
            size = _file_size(warmup_file(m, sample.input_data_file))
            if size is not None and size < need:
                ctx.report(m, f"warmup {w.name!r} input {key!r}: {WARMUP_FOLDER}/{sample.input_data_file} holds "
                           f"{size} bytes, the sample's dims {list(sample.dims)} of {dtype} need {need} ('warmup "
                           f"setting expects {need} bytes'; {_SOURCE})", field=f"{path}.input_data_file",
                           hint=f"write {need} bytes (one batch-1 sample) into {m.name}/{WARMUP_FOLDER}/"
                                f"{sample.input_data_file}")
