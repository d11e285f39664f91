"""TensorRT-LLM's LLM-API backend: one python-backend model, ``tensorrt_llm``, with ``1/model.yaml``.

What upstream's ``all_models/llmapi`` holds (facts and their sources:
:mod:`tritonkit.trtllm_versions`, :class:`~tritonkit.trtllm_versions.LlmApiInterface`):

* ``tensorrt_llm/config.pbtxt``: ``backend: "python"``, KIND_CPU instances, the line's inputs and
  outputs — and **no** ``max_batch_size`` or ``decoupled``: its ``model.py`` sets both at load
  (``auto_complete_config``) from ``model.yaml``'s ``triton_config``, and a value written in the
  config cannot be overwritten there;
* ``tensorrt_llm/1/model.yaml``: the ``tensorrt_llm.LLM(...)`` arguments (the model's path,
  ``backend: pytorch``, parallelism, KV-cache settings, …) and ``triton_config``
  (``max_batch_size: 0`` — the model takes one prompt per request and batches in flight inside
  ``LLM`` — and ``decoupled``, which streaming needs);
* ``tensorrt_llm/1/model.py`` (and its ``helpers.py``): TensorRT-LLM's own, from the release the
  container ships (``/app/all_models/llmapi/tensorrt_llm/1/`` in tensorrtllm_backend's container
  build, Dockerfile.triton.trt_llm_backend at e1611ce). No upstream file is copied into this
  package: either ``--python-model-file`` names that file and it is copied with its
  ``helpers.py``, or a short loader of ours is written that imports it from that container path.

Several instances (1.2 and main): ``instance_group`` count N and ``gpu_device_ids`` "0,1;2,3" (one
set of tp × pp GPUs per instance, semicolon-separated), started with the launcher's ``--no-mpi``
(docs/llmapi.md, tensorrtllm_backend 9b25ef9).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritonkit._fs import atomic_write
from tritonkit.builders.trtllm.llm_args import check_llm_args, parse_llm_args
from tritonkit.builders.trtllm.params import EnginePlan, Reason
from tritonkit.errors import ConfigError
from tritonkit.repository import InstanceGroup, ModelRepository, ModelSpec, TensorSpec
from tritonkit.trtllm_versions import LlmApiInterface, TensorFact, TrtllmInterface

__all__ = [
    "CONTAINER_MODEL_DIR",
    "LlmApiOptions",
    "LlmApiPlan",
    "llmapi_model_spec",
    "llmapi_model_yaml",
    "parse_llm_args",
    "plan_llmapi",
    "write_llmapi_repository",
]

#: Where tensorrtllm_backend's container build puts the LLM-API model (Dockerfile.triton.trt_llm_backend
#: at e1611ce: ``COPY … triton_backend/all_models all_models`` under ``WORKDIR /app``).
CONTAINER_MODEL_DIR = "/app/all_models/llmapi/tensorrt_llm/1"
#: The model's name: upstream's folder, and the name its docs' requests use.
MODEL_NAME = "tensorrt_llm"

_DTYPES = {"TYPE_STRING": "BYTES", "TYPE_BOOL": "BOOL", "TYPE_INT32": "INT32", "TYPE_UINT64": "UINT64",
           "TYPE_INT64": "INT64", "TYPE_FP32": "FP32"}

# The loader written when no --python-model-file is given: it runs the release's own model.py from
# the container, with this model's folder (and so this model.yaml) as its model directory.
_LOADER = '''"""Runs TensorRT-LLM's LLM-API model.py from the serving container (written by tritonkit).

The release's model.py and helpers.py are imported from {where!r}; pb_utils.get_model_dir() is
this folder, so they read the model.yaml beside this file.
"""

import importlib.util
import sys

_DIR = {where!r}
sys.path.insert(0, _DIR)  # its model.py imports helpers from its own folder
_spec = importlib.util.spec_from_file_location("trtllm_llmapi_model", _DIR + "/model.py")
if _spec is None or _spec.loader is None:
    raise ImportError(f"TensorRT-LLM's LLM-API model.py is not in {{_DIR}}: pass --python-model-file when "
                      "building, or serve in a container that ships it")
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
TritonPythonModel = _module.TritonPythonModel
'''


@dataclass(frozen=True, kw_only=True)
class LlmApiOptions:
    """What the LLM-API repository is written from; each field is one ``model.yaml`` / config knob.

    ``model`` is the checkpoint as the *server* sees it (a folder, or a Hugging Face id).
    ``instances`` > 1 needs a line with several-instance support; ``gpu_ids`` are the GPUs of all
    instances together (tp × pp each; default ``0 … instances × tp × pp − 1``).
    """

    line: TrtllmInterface
    model: str
    tp: int = 1
    pp: int = 1
    max_batch_size: int | None = None
    max_num_tokens: int | None = None
    max_seq_len: int | None = None
    kv_cache_free_gpu_memory_fraction: float | None = None
    enable_block_reuse: bool = False
    enable_chunked_prefill: bool = False
    cuda_graphs: bool = True
    streaming: bool = True
    instances: int = 1
    gpu_ids: Sequence[int] | None = None
    extra_llm_args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def api(self) -> LlmApiInterface:
        if self.line.llmapi is None:
            raise ConfigError(f"TensorRT-LLM {self.line.version} has no LLM-API backend (it comes with 0.19)",
                              hint="pass --trtllm-version 0.19 or newer, or --engine tensorrtllm")
        return self.line.llmapi


@dataclass(frozen=True)
class LlmApiPlan:
    """The LLM-API repository's settings and the reason for each, and how to start it."""

    options: LlmApiOptions
    model_yaml: dict[str, Any]
    gpu_device_ids: str | None
    reasons: tuple[Reason, ...]
    launch: str

    def render_text(self) -> str:
        return "\n".join(r.render() for r in self.reasons)


def _tensor(fact: TensorFact) -> TensorSpec:
    return TensorSpec(name=fact.name, dtype=_DTYPES[fact.data_type], dims=list(fact.dims), optional=fact.optional)


def plan_llmapi(options: LlmApiOptions, engine_plan: EnginePlan | None = None) -> LlmApiPlan:
    """``model.yaml`` and the instance layout for ``options``; values not given come from ``engine_plan``
    (the planner's figures for the GPU and workload), each with its reason. Refuses a key the
    line's ``LLM()`` does not accept, several instances on a line that cannot run them, and GPU
    ids that are not tp × pp per instance."""
    o, api = options, options.api
    reasons: list[Reason] = []
    planned = {r.key: r for r in engine_plan.reasons} if engine_plan is not None else {}
    params = engine_plan.params if engine_plan is not None else None

    def pick(key: str, given: Any, from_plan: Any, plan_key: str, default_why: str) -> Any:
        if given is not None:
            reasons.append(Reason(key, given, "given"))
            return given
        if from_plan is not None:
            reasons.append(Reason(key, from_plan, f"planner: {planned[plan_key].why}" if plan_key in planned
                                  else "planner"))
            return from_plan
        reasons.append(Reason(key, "(LLM default)", default_why))
        return None

    args: dict[str, Any] = {"model": o.model, "backend": "pytorch"}
    reasons.append(Reason("model", o.model, "the checkpoint as the server sees it; the PyTorch backend loads it, "
                                           "no engine is built"))
    args["tensor_parallel_size"], args["pipeline_parallel_size"] = o.tp, o.pp
    reasons.append(Reason("tensor × pipeline parallel", f"{o.tp} × {o.pp}", f"{o.tp * o.pp} GPU(s) per instance"))
    batch = pick("max_batch_size", o.max_batch_size, params.max_batch_size if params else None, "max_batch_size",
                 "no workload given")
    tokens = pick("max_num_tokens", o.max_num_tokens, params.max_num_tokens if params else None, "max_num_tokens",
                  "no workload given")
    seq = pick("max_seq_len", o.max_seq_len, params.max_seq_len if params else None, "max_seq_len",
               "the model's own limit")
    for key, value in (("max_batch_size", batch), ("max_num_tokens", tokens), ("max_seq_len", seq)):
        if value is not None:
            args[key] = int(value)
    fraction = pick("kv_cache_config.free_gpu_memory_fraction", o.kv_cache_free_gpu_memory_fraction,
                    params.kv_cache_free_gpu_mem_fraction if params else None, "kv_cache_free_gpu_mem_fraction",
                    "TensorRT-LLM's default")
    kv: dict[str, Any] = {"enable_block_reuse": o.enable_block_reuse}
    if fraction is not None:
        kv["free_gpu_memory_fraction"] = float(fraction)
    args["kv_cache_config"] = kv
    reasons.append(Reason("kv_cache_config.enable_block_reuse", o.enable_block_reuse,
                          "given" if o.enable_block_reuse else "off: no shared-prefix traffic declared (--kv-reuse)"))
    if o.enable_chunked_prefill:
        args["enable_chunked_prefill"] = True
        reasons.append(Reason("enable_chunked_prefill", True, "given (--chunked-context)"))
    if api.cuda_graphs == "cuda_graph_config":
        if o.cuda_graphs:
            args["cuda_graph_config"] = {"max_batch_size": int(batch)} if batch is not None else {}
        reasons.append(Reason("cuda_graph_config", args.get("cuda_graph_config", "off"),
                              "CUDA graphs for decode batches up to max_batch_size (--no-cuda-graphs turns them off)"
                              if o.cuda_graphs else "given (--no-cuda-graphs)"))
    else:
        args["pytorch_backend_config"] = {"use_cuda_graph": o.cuda_graphs}
        reasons.append(Reason("pytorch_backend_config.use_cuda_graph", o.cuda_graphs,
                              "how 0.19 switches CUDA graphs on (cuda_graph_config from 1.0)"))
    check_llm_args(o.extra_llm_args, api.llm_args, line=o.line.version, source=api.llm_args_source)
    for key, value in o.extra_llm_args.items():
        args[key] = value
        reasons.append(Reason(key, value, "given (--llm-arg)"))
    unknown = sorted(k for k in args if k not in api.llm_args)
    if unknown:  # one of tritonkit's own keys this line's LLM() does not take
        raise ConfigError(f"TensorRT-LLM {o.line.version}'s LLM() does not accept {', '.join(unknown)} "
                          f"(its arguments as read at {api.llm_args_source})",
                          hint="pass the --trtllm-version whose LLM() takes it")
    args["triton_config"] = {"max_batch_size": 0, "decoupled": o.streaming}
    reasons.append(Reason("triton_config.max_batch_size", 0, "one prompt per request: LLM batches in flight itself"))
    reasons.append(Reason("triton_config.decoupled", o.streaming,
                          "streaming needs decoupled" if o.streaming else "given (--no-streaming): one response"))

    world = o.tp * o.pp
    ids = list(o.gpu_ids) if o.gpu_ids is not None else list(range(o.instances * world))
    device_ids: str | None = None
    if o.instances < 1:
        raise ConfigError(f"instances {o.instances} must be >= 1", hint="pass --instances 1 or more")
    if len(ids) != o.instances * world:
        raise ConfigError(f"{len(ids)} GPU id(s) given ({','.join(map(str, ids))}) but {o.instances} instance(s) × "
                          f"tp {o.tp} × pp {o.pp} = {o.instances * world}",
                          hint=f"give exactly {o.instances * world} ids with --gpu-ids")
    if o.instances > 1:
        if not api.multi_instance:
            raise ConfigError(f"TensorRT-LLM {o.line.version}'s LLM-API model runs one instance (gpu_device_ids per "
                              "instance comes with 1.2: tensorrtllm_backend docs/llmapi.md, 9b25ef9)",
                              hint="pass --instances 1, or --trtllm-version 1.2 or newer")
        device_ids = ";".join(",".join(map(str, ids[i * world:(i + 1) * world])) for i in range(o.instances))
        reasons.append(Reason("gpu_device_ids", device_ids, f"{o.instances} instances × {world} GPU(s), one set "
                                                           "each; start the server with --no-mpi"))
        launch = ("python3 /app/scripts/launch_triton_server.py --model_repo=<repo> --no-mpi "
                  "(several instances need --no-mpi: docs/llmapi.md)")
    elif world > 1:
        launch = (f"python3 /app/scripts/launch_triton_server.py --model_repo=<repo> --world_size {world} "
                  "(one MPI rank per GPU)")
    else:
        launch = "tritonserver --model-repository=<repo> (or /app/scripts/launch_triton_server.py)"
    return LlmApiPlan(options=o, model_yaml=args, gpu_device_ids=device_ids, reasons=tuple(reasons), launch=launch)


def llmapi_model_spec(plan: LlmApiPlan) -> ModelSpec:
    """The ``tensorrt_llm`` config: the line's tensors, KIND_CPU instances, no max_batch_size or decoupled."""
    api = plan.options.api
    params = {"gpu_device_ids": plan.gpu_device_ids} if plan.gpu_device_ids is not None else {}
    return ModelSpec(name=MODEL_NAME, backend="python", inputs=[_tensor(t) for t in api.inputs],
                     outputs=[_tensor(t) for t in api.outputs], dynamic_batching=None,
                     instance_groups=[InstanceGroup(kind="KIND_CPU", count=plan.options.instances)],
                     parameters=params)


def llmapi_model_yaml(plan: LlmApiPlan) -> str:
    """``model.yaml``: the LLM() arguments, then ``triton_config`` (keys in the order planned)."""
    head = (f"# TensorRT-LLM {plan.options.line.version} LLM-API model: the tensorrt_llm.LLM(...) arguments "
            "and triton_config.\n# Written by tritonkit; see `tritonkit build trtllm --engine llmapi`.\n")
    return head + yaml.safe_dump(plan.model_yaml, sort_keys=False)


def write_llmapi_repository(
    repo: str | Path,
    plan: LlmApiPlan,
    *,
    python_model_file: str | Path | None = None,
    model_files: Callable[[Path], Mapping[str, str | bytes | Path]] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``tensorrt_llm`` (config.pbtxt, 1/model.yaml, 1/model.py) into ``repo``; returns its folder.

    ``python_model_file`` is TensorRT-LLM's LLM-API ``model.py`` (its ``helpers.py`` beside it is
    copied too); without it a loader that imports them from :data:`CONTAINER_MODEL_DIR` is written.
    ``model_files`` replaces both (the CPU reference stand-in).
    """
    repository = ModelRepository.init(repo)
    if (repository.root / MODEL_NAME / "config.pbtxt").exists() and not overwrite:
        raise ConfigError(f"{repository.root} already holds {MODEL_NAME}",
                          hint="pass overwrite=True (CLI: --force) to replace it, or choose another --repo")
    files: dict[str, str | bytes | Path]
    if model_files is not None:
        files = dict(model_files(repository.root))
    elif python_model_file is not None:
        source = Path(python_model_file)
        helpers = source.parent / "helpers.py"
        if not source.is_file() or not helpers.is_file():
            raise ConfigError(f"{source}: TensorRT-LLM's LLM-API model.py and its helpers.py are not both there",
                              hint=f"pass --python-model-file {CONTAINER_MODEL_DIR}/model.py from the serving "
                                   "container (or the same file of its TensorRT-LLM release)")
        files = {"model.py": source, "helpers.py": helpers}
    else:
        files = {"model.py": _LOADER.format(where=CONTAINER_MODEL_DIR)}
    files["model.yaml"] = llmapi_model_yaml(plan)
    entry = repository.add_model(llmapi_model_spec(plan), files=files, overwrite=True)
    # WAR: the renderer writes "max_batch_size: 0" for every non-batching model; here model.py sets
    # max_batch_size (and decoupled) from model.yaml at load, and upstream's config.pbtxt has no such
    # line ("The below config arguments are specific in model.yaml"), so neither does this one.
    config = entry.root / "config.pbtxt"
    atomic_write(config, config.read_text(encoding="utf-8").replace("max_batch_size: 0\n", "", 1))
    return entry.root
