"""The rule families; importing this package registers every rule.

==========  =======================================================
TK0xx       files and layout: config present and parseable, placeholders,
            name, version folders, backend/platform, model file, the runtime
            library's folder (TK012)
TK1xx       batching: max_batch_size, dynamic batcher window, preferred sizes,
            priority levels, queue policies, preserve_ordering
TK2xx       instance groups: kind, gpus, count, rate limiter (TK206: a resource
            global and per device across models), profiles
TK3xx       tensors: names, data types, dims, reshape, batch dimension,
            batch inputs and batch outputs (TK310, TK32x)
TK4xx       ensembles: steps, tensor flow, types and shapes across steps,
            decoupled streams (TK409)
TK5xx       transactions: decoupled, streaming, response cache;
            sequence batching controls (TK51x)
TK6xx       target: backends and GPUs of the server the repository is meant for,
            the runtime library among its backends (TK606)
TK7xx       model file: ONNX inputs/outputs against the config; the python
            backend's own load checks (TK703, TK704: auto_complete_config)
TK8xx       release: what the target Triton release (2.51 … 2.73) reads and checks
TK9xx       LLM backends: TensorRT-LLM's engine repository (TK90x–TK910) and
            LLM-API model (TK911–TK916), Triton's vLLM backend (TK95x)
==========  =======================================================
"""

from __future__ import annotations

from tritonkit.repository.lint.core import RULES

# Imported for their side effect: each module registers its rules.
from tritonkit.repository.lint.rules import (
    batching,  # noqa: F401
    batchio,  # noqa: F401
    ensemble,  # noqa: F401
    ensemble_flow,  # noqa: F401
    files,  # noqa: F401
    instances,  # noqa: F401
    llmapi,  # noqa: F401
    modelfile,  # noqa: F401
    python_model,  # noqa: F401
    rate_limiter,  # noqa: F401
    release,  # noqa: F401
    runtime,  # noqa: F401
    sequence,  # noqa: F401
    target,  # noqa: F401
    tensors,  # noqa: F401
    transaction,  # noqa: F401
    trtllm,  # noqa: F401
    vllm,  # noqa: F401
    warmup,  # noqa: F401
)

# Keep RULES in id order whatever order the families were imported in.
_ordered = dict(sorted(RULES.items()))
RULES.clear()
RULES.update(_ordered)
