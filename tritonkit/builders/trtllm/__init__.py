"""TensorRT-LLM: the LLM-API repository (one python model and its ``model.yaml``), the engine build plan
and the in-flight-batching repository as typed configs, and CPU stand-ins that serve both here.

::

    from tritonkit.builders.trtllm import EngineTarget, build_reference_repository, build_trtllm
    ref = build_reference_repository("model_repository")      # servable here, on the bundled server
    # clients call ref.ensemble ("ensemble"): text_input, max_tokens, stream → text_output

    result = build_trtllm("Llama-3-8B/", repo="llama_repo", target=EngineTarget(gpu="H100-80GB", tp=1))
    print(result.summary())     # the line and backend chosen, derived values with reasons
    # engine="llmapi": config.pbtxt + 1/model.yaml (LLM() arguments); engine="tensorrtllm": the
    # five-model repository and its engine build (GPU machines only)
"""

from __future__ import annotations

from tritonkit.builders.trtllm.build import LlmApiSettings, TrtllmBuildResult, build_trtllm
from tritonkit.builders.trtllm.engine import (
    EngineInfo,
    check_engine,
    engine_build_argv,
    engine_build_plan,
    read_engine_config,
    run_engine_build,
    runtime_version,
    same_release,
    write_build_files,
)
from tritonkit.builders.trtllm.instances import TokenizerInstances, derive_tokenizer_instances
from tritonkit.builders.trtllm.llmapi import (
    LlmApiOptions,
    LlmApiPlan,
    llmapi_model_spec,
    llmapi_model_yaml,
    parse_llm_args,
    plan_llmapi,
    write_llmapi_repository,
)
from tritonkit.builders.trtllm.params import (
    EngineOverrides,
    EngineParams,
    EnginePlan,
    EngineTarget,
    Reason,
    derive_engine_params,
)
from tritonkit.builders.trtllm.reference import (
    REFERENCE_VERSION,
    ReferenceEngine,
    ReferenceLlmApiRepository,
    ReferenceRepository,
    build_reference_llmapi_repository,
    build_reference_repository,
    reference_engine_config,
)
from tritonkit.builders.trtllm.repository import (
    BATCHING_STRATEGIES,
    DECODING_MODES,
    ENGINE_KINDS,
    MODEL_NAMES,
    SCHEDULER_POLICIES,
    EngineKind,
    TrtllmRepoOptions,
    trtllm_model_specs,
    write_trtllm_repository,
)
from tritonkit.builders.trtllm.tokenizer import TOKENIZER_FILES, build_reference_tokenizer
from tritonkit.trtllm_versions import (
    SUPPORTED_TRTLLM_VERSIONS,
    TRTLLM_INTERFACES,
    TrtllmInterface,
    find_interface,
    resolve_trtllm_version,
)

__all__ = [
    "LlmApiOptions",
    "LlmApiPlan",
    "LlmApiSettings",
    "ReferenceLlmApiRepository",
    "TokenizerInstances",
    "build_reference_llmapi_repository",
    "derive_tokenizer_instances",
    "llmapi_model_spec",
    "llmapi_model_yaml",
    "parse_llm_args",
    "plan_llmapi",
    "write_llmapi_repository",
    "EngineInfo",
    "EngineOverrides",
    "EngineParams",
    "EnginePlan",
    "EngineTarget",
    "Reason",
    "TrtllmBuildResult",
    "build_trtllm",
    "check_engine",
    "derive_engine_params",
    "engine_build_argv",
    "engine_build_plan",
    "read_engine_config",
    "run_engine_build",
    "runtime_version",
    "same_release",
    "write_build_files",
    "BATCHING_STRATEGIES",
    "DECODING_MODES",
    "ENGINE_KINDS",
    "MODEL_NAMES",
    "REFERENCE_VERSION",
    "SCHEDULER_POLICIES",
    "SUPPORTED_TRTLLM_VERSIONS",
    "TOKENIZER_FILES",
    "TRTLLM_INTERFACES",
    "TrtllmInterface",
    "find_interface",
    "resolve_trtllm_version",
    "EngineKind",
    "ReferenceEngine",
    "ReferenceRepository",
    "TrtllmRepoOptions",
    "build_reference_repository",
    "build_reference_tokenizer",
    "reference_engine_config",
    "trtllm_model_specs",
    "write_trtllm_repository",
]
