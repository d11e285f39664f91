"""The in-flight-batching repository as typed configs: preprocessing, tensorrt_llm,
postprocessing, ensemble and tensorrt_llm_bls.

Every config is a :class:`~tritonkit.repository.ModelSpec`; no text template, no placeholder.
The ``tensorrt_llm`` model is one of three engines with the same inputs and outputs:

* ``tensorrtllm`` — the C++ TensorRT-LLM backend of NGC's ``…-trtllm-python-py3`` containers;
* ``python`` — TensorRT-LLM's own python-backend model (its ``model.py``, from the TensorRT-LLM
  release that built the engine, is copied in; it needs ``tensorrt_llm`` and a GPU at serve time);
* ``reference`` — the CPU reference engine (see :mod:`tritonkit.builders.trtllm.reference`).

Pre/postprocessing and the BLS model are this package's python-backend models (``pymodels/``):
they read the tokenizer with the ``tokenizers`` library from ``tokenizer_dir``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tritonkit.builders.trtllm.instances import derive_tokenizer_instances
from tritonkit.builders.trtllm.interface import (
    KNOB_TO_ENGINE,
    POST_INPUTS,
    POST_OUTPUTS,
    PRE_OUTPUTS,
    bls_inputs,
    engine_inputs,
    engine_outputs,
    ensemble_inputs,
    ensemble_outputs,
    ensemble_steps,
    pre_inputs,
)
from tritonkit.errors import ConfigError
from tritonkit.repository import (
    DynamicBatching,
    InstanceGroup,
    ModelRepository,
    ModelSpec,
    QueuePolicy,
)
from tritonkit.repository.lint.rules.trtllm import BATCHING_STRATEGIES, DECODING_MODES, SCHEDULER_POLICIES
from tritonkit.repository.units import Duration
from tritonkit.trtllm_versions import (
    NEWEST_ENGINE,
    SUPPORTED_TRTLLM_VERSIONS,
    TrtllmInterface,
    find_interface,
)

__all__ = [
    "BATCHING_STRATEGIES",
    "DECODING_MODES",
    "ENGINE_KINDS",
    "MODEL_NAMES",
    "SCHEDULER_POLICIES",
    "EngineKind",
    "TrtllmRepoOptions",
    "trtllm_model_specs",
    "write_trtllm_repository",
]

EngineKind = Literal["tensorrtllm", "python", "reference"]
ENGINE_KINDS: tuple[str, ...] = ("tensorrtllm", "python", "reference")
#: Folder names, as TensorRT-LLM's templates and the clients written for them expect.
MODEL_NAMES = ("preprocessing", "tensorrt_llm", "postprocessing", "ensemble", "tensorrt_llm_bls")
PYMODELS = Path(__file__).parent / "pymodels"
#: What both CPU reference models import, copied beside their model.py.
REFERENCE_HELPERS = {name: PYMODELS / name for name in ("tiny_lm.py", "inflight.py")}
#: Where the C++ backend's executor worker lives in NGC TensorRT-LLM containers.
EXECUTOR_WORKER_PATH = "/opt/tritonserver/backends/tensorrtllm/trtllmExecutorWorker"
#: The queue delay in front of ``tensorrt_llm``: the templates' documented value (tensorrtllm_backend
#: v0.19.0 README and docs fill max_queue_delay_microseconds with 0): the in-flight batcher
#: schedules every step itself, so a window only delays each request's first token.
ENGINE_QUEUE_DELAY = "0us"


def _flag(value: bool) -> str:
    # The backend accepts true/True/TRUE/1 and false/False/FALSE/0; write its own lower-case spelling.
    return "true" if value else "false"


@dataclass(frozen=True, kw_only=True)
class TrtllmRepoOptions:
    """Everything the five configs need; each field is one knob of TensorRT-LLM's templates.

    ``engine_dir`` and ``tokenizer_dir`` are written as given: paths as the *server* sees them
    (inside a container they are container paths). ``gpu_ids`` are the GPUs of one engine
    instance (tp × pp of them). ``max_batch_size`` is Triton's, and must not exceed the engine's.
    ``trtllm_version`` is the TensorRT-LLM line the configs are written for (input names differ,
    see :mod:`~tritonkit.trtllm_versions`). Pre- and postprocessing instance counts default to
    what the machine holds (:mod:`~tritonkit.builders.trtllm.instances`): upstream's "match the max
    batch size" starts hundreds of tokenizer stubs for a large batch.
    """

    engine: EngineKind = "tensorrtllm"
    trtllm_version: str = NEWEST_ENGINE
    engine_dir: str
    tokenizer_dir: str
    max_batch_size: int = 64
    streaming: bool = True
    gpu_ids: Sequence[int] = (0,)
    batching_strategy: str = "inflight_fused_batching"
    batch_scheduler_policy: str = "guaranteed_no_evict"
    kv_cache_free_gpu_mem_fraction: float = 0.9
    max_tokens_in_paged_kv_cache: int | None = None
    enable_kv_cache_reuse: bool = False
    enable_chunked_context: bool = False
    exclude_input_in_output: bool = True
    max_beam_width: int = 1
    decoding_mode: str | None = None
    batch_window: Duration = ENGINE_QUEUE_DELAY
    max_queue_size: int | None = None
    preprocessing_instances: int | None = None
    postprocessing_instances: int | None = None
    bls_instances: int = 1
    accumulate_tokens: bool = False
    skip_special_tokens: bool = True
    add_special_tokens: bool = True
    extra_engine_parameters: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.engine not in ENGINE_KINDS:
            raise ConfigError(f"engine {self.engine!r} is not one of {', '.join(ENGINE_KINDS)}",
                              hint="use --engine tensorrtllm (C++ backend), python or reference")
        if self.max_batch_size < 1:
            raise ConfigError(f"max_batch_size {self.max_batch_size} must be >= 1", hint="pass --max-batch-size")
        for name, value, allowed in (("batching_strategy", self.batching_strategy, BATCHING_STRATEGIES),
                                     ("batch_scheduler_policy", self.batch_scheduler_policy, SCHEDULER_POLICIES)):
            if value not in allowed:
                raise ConfigError(f"{name} {value!r} is not one of {', '.join(allowed)}",
                                  hint="the backend ignores other spellings; use one of the listed values")
        if self.decoding_mode is not None and self.decoding_mode not in DECODING_MODES:
            raise ConfigError(f"decoding_mode {self.decoding_mode!r} is not one of {', '.join(DECODING_MODES)}",
                              hint="leave it unset to let the backend choose from the engine")
        if not 0 < self.kv_cache_free_gpu_mem_fraction <= 1:
            raise ConfigError(f"kv_cache_free_gpu_mem_fraction {self.kv_cache_free_gpu_mem_fraction} must be in "
                              "(0, 1]", hint="pass --kv-cache-fraction like 0.9")
        line = find_interface(self.trtllm_version)
        if line is None:
            raise ConfigError(f"TensorRT-LLM {self.trtllm_version} is not in the supported matrix "
                              f"({', '.join(SUPPORTED_TRTLLM_VERSIONS)})",
                              hint="pass --trtllm-version with the line your serving container ships")
        if not line.has_engine:
            raise ConfigError(f"TensorRT-LLM {self.trtllm_version} has no engine backend: {line.engine_refusal}",
                              hint=f"write the LLM-API repository (--engine llmapi), or pass --trtllm-version "
                                   f"{NEWEST_ENGINE} or older")
        for name, count in (("preprocessing_instances", self.preprocessing_instances),
                            ("postprocessing_instances", self.postprocessing_instances),
                            ("bls_instances", self.bls_instances)):
            if count is not None and count < 1:
                raise ConfigError(f"{name} {count} must be >= 1", hint="pass an instance count of 1 or more")
        if not self.gpu_ids or any(g < 0 for g in self.gpu_ids):
            raise ConfigError(f"gpu_ids {list(self.gpu_ids)} must be one or more non-negative GPU ids",
                              hint="pass --gpu-ids 0,1 (tp × pp of them)")

    @property
    def interface(self) -> TrtllmInterface:
        """The request interface of :attr:`trtllm_version`'s line."""
        found = find_interface(self.trtllm_version)
        assert found is not None  # checked in __post_init__
        return found

    @property
    def tokenizer_instances(self) -> tuple[int, int]:
        """(preprocessing, postprocessing) instance counts: as given, else derived from this machine
        (:func:`~tritonkit.builders.trtllm.instances.derive_tokenizer_instances`)."""
        derived = derive_tokenizer_instances(self.max_batch_size).count
        return (self.preprocessing_instances or derived, self.postprocessing_instances or derived)

    @property
    def queue_size(self) -> int:
        """The bound on queued requests: twice the batch unless given (rule of thumb: one batch
        running, one waiting; beyond that overload is refused early instead of timing out)."""
        return self.max_queue_size if self.max_queue_size is not None else 2 * self.max_batch_size


def _engine_parameters(o: TrtllmRepoOptions) -> dict[str, str]:
    params = {
        "max_beam_width": str(o.max_beam_width),
        "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
        "gpt_model_type": o.batching_strategy,
        "gpt_model_path": o.engine_dir,
        "batch_scheduler_policy": o.batch_scheduler_policy,
        "kv_cache_free_gpu_mem_fraction": f"{o.kv_cache_free_gpu_mem_fraction:g}",
        "enable_kv_cache_reuse": _flag(o.enable_kv_cache_reuse),
        "enable_chunked_context": _flag(o.enable_chunked_context),
        "exclude_input_in_output": _flag(o.exclude_input_in_output),
        "gpu_device_ids": ",".join(str(g) for g in o.gpu_ids),
    }
    if o.max_tokens_in_paged_kv_cache is not None:
        params["max_tokens_in_paged_kv_cache"] = str(o.max_tokens_in_paged_kv_cache)
    if o.decoding_mode is not None:
        params["decoding_mode"] = o.decoding_mode
    if o.engine == "tensorrtllm":
        params["executor_worker_path"] = EXECUTOR_WORKER_PATH
    params.update(o.extra_engine_parameters)
    return params


def trtllm_model_specs(o: TrtllmRepoOptions) -> list[ModelSpec]:
    """The five configs, in :data:`MODEL_NAMES` order."""
    batch = o.max_batch_size
    v = o.interface
    pre_count, post_count = o.tokenizer_instances
    tokenizer = {"tokenizer_dir": o.tokenizer_dir}
    # Pre/postprocessing take whatever is queued at once (no window: every streamed token passes
    # through postprocessing, and a delay there would add to each token).
    no_wait = DynamicBatching(window="0us")
    preprocessing = ModelSpec(
        name="preprocessing", backend="python", max_batch_size=batch, inputs=pre_inputs(), outputs=PRE_OUTPUTS,
        dynamic_batching=no_wait, instance_groups=[InstanceGroup(kind="KIND_CPU", count=pre_count)],
        parameters={**tokenizer, "add_special_tokens": _flag(o.add_special_tokens)},
    )
    postprocessing = ModelSpec(
        name="postprocessing", backend="python", max_batch_size=batch, inputs=POST_INPUTS, outputs=POST_OUTPUTS,
        dynamic_batching=no_wait, instance_groups=[InstanceGroup(kind="KIND_CPU", count=post_count)],
        parameters={**tokenizer, "skip_special_tokens": _flag(o.skip_special_tokens)},
    )
    # The engine's own scheduler batches in flight; the dynamic batcher in front of it only hands
    # requests over and bounds the queue (the template's default_queue_policy).
    engine = ModelSpec(
        name="tensorrt_llm", backend="tensorrtllm" if o.engine == "tensorrtllm" else "python",
        max_batch_size=batch, inputs=engine_inputs(v), outputs=engine_outputs(v),
        dynamic_batching=DynamicBatching(window=o.batch_window,
                                         default_queue_policy=QueuePolicy(max_queue_size=o.queue_size)),
        # The C++ backend places the engine on gpu_device_ids itself; Triton sees one CPU instance.
        instance_groups=[InstanceGroup(kind="KIND_CPU", count=1)], decoupled=o.streaming,
        parameters=_engine_parameters(o),
    )
    ensemble = ModelSpec(
        name="ensemble", platform="ensemble", max_batch_size=batch, inputs=ensemble_inputs(v),
        outputs=ensemble_outputs(v), ensemble_steps=ensemble_steps(v, "tensorrt_llm"), decoupled=o.streaming or None,
    )
    bls = ModelSpec(
        name="tensorrt_llm_bls", backend="python", max_batch_size=batch, inputs=bls_inputs(v),
        outputs=ensemble_outputs(v), dynamic_batching=None,
        instance_groups=[InstanceGroup(kind="KIND_CPU", count=o.bls_instances)], decoupled=o.streaming,
        parameters={"accumulate_tokens": _flag(o.accumulate_tokens), "tensorrt_llm_model_name": "tensorrt_llm",
                    "tensorrt_llm_draft_model_name": "",
                    # This package's BLS hands the renamed knobs on under the names the engine's line reads.
                    "engine_min_tokens_input": v.min_tokens_input, "engine_seed_input": v.seed_input,
                    "pass_through_inputs": json.dumps(KNOB_TO_ENGINE)},
    )
    return [preprocessing, engine, postprocessing, ensemble, bls]


def write_trtllm_repository(
    repo: str | Path,
    options: TrtllmRepoOptions,
    *,
    python_model_file: str | Path | None = None,
    overwrite: bool = False,
) -> list[Path]:
    """Write the five models into ``repo``; returns their folders.

    ``python_model_file`` is TensorRT-LLM's python-backend ``model.py`` (``engine="python"``
    only). The reference engine's files are written by :func:`build_reference_repository`.
    """
    specs = trtllm_model_specs(options)
    repository = ModelRepository.init(repo)
    clash = [s.name for s in specs if (repository.root / s.name / "config.pbtxt").exists()]
    if clash and not overwrite:
        raise ConfigError(f"{repository.root} already holds {', '.join(clash)}",
                          hint="pass overwrite=True (CLI: --force) to replace them, or choose another --repo")
    if options.engine == "python" and python_model_file is None:
        raise ConfigError("engine 'python' needs TensorRT-LLM's python-backend model.py",
                          hint="pass --python-model-file …/inflight_batcher_llm/tensorrt_llm/1/model.py from the "
                               "TensorRT-LLM release that built the engine")
    files = {
        "preprocessing": {"model.py": PYMODELS / "preprocessing.py"},
        "postprocessing": {"model.py": PYMODELS / "postprocessing.py"},
        "tensorrt_llm_bls": {"model.py": PYMODELS / "bls.py"},
        "ensemble": {},
        "tensorrt_llm": _engine_files(options, python_model_file),
    }
    folders = []
    for spec in specs:
        sources: dict[str, str | bytes | Path] = {k: v for k, v in files[spec.name].items()}
        entry = repository.add_model(spec, files=sources, overwrite=True)
        folders.append(entry.root)
    return folders


def _engine_files(o: TrtllmRepoOptions, python_model_file: str | Path | None) -> dict[str, Path]:
    if o.engine == "reference":
        return {"model.py": PYMODELS / "reference_engine.py", **REFERENCE_HELPERS}
    if o.engine == "python":
        assert python_model_file is not None
        source = Path(python_model_file)
        if not source.is_file():
            raise ConfigError(f"{source}: TensorRT-LLM's model.py is not there", hint="check --python-model-file")
        return {"model.py": source}
    return {}


