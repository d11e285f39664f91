"""The CPU reference engine: a whole in-flight-batching repository that serves on this machine.

It exists to test and measure the serving path — tokenizer, ensemble, decoupled streaming,
in-flight batching, the client, perf_analyzer — without a GPU. The text it generates means
nothing. ``build_reference_repository`` writes the same five models as a GPU build, with the
``tensorrt_llm`` model replaced by a python-backend stand-in that has the same inputs and outputs
(see ``pymodels/reference_engine.py``), a tokenizer trained here, and an engine folder whose
``config.json`` has the shape TensorRT-LLM writes (so the engine/runtime checks run on it too).

Cancelling a stream frees its batch slot when the stream goes to ``tensorrt_llm`` or to
``tensorrt_llm_bls``; Triton 2.51 does not pass a cancellation on to an ensemble's steps, so a
cancelled ``ensemble`` stream runs to its end inside the server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tritonkit._fs import atomic_write
from tritonkit._version import __version__
from tritonkit.builders.trtllm.llmapi import LlmApiOptions, LlmApiPlan, plan_llmapi, write_llmapi_repository
from tritonkit.builders.trtllm.repository import (
    ENGINE_QUEUE_DELAY,
    PYMODELS,
    REFERENCE_HELPERS,
    TrtllmRepoOptions,
    write_trtllm_repository,
)
from tritonkit.builders.trtllm.tokenizer import REFERENCE_SPECIAL_TOKENS, build_reference_tokenizer
from tritonkit.errors import ConfigError
from tritonkit.trtllm_versions import NEWEST, NEWEST_ENGINE, TrtllmInterface, find_interface

__all__ = ["REFERENCE_VERSION", "ReferenceEngine", "ReferenceLlmApiRepository", "ReferenceRepository",
           "build_reference_llmapi_repository", "build_reference_repository", "reference_engine_config"]

#: What the reference engine's config.json records as the version that built it.
REFERENCE_VERSION = f"tritonkit-reference-{__version__}"


@dataclass(frozen=True, kw_only=True)
class ReferenceEngine:
    """The reference engine's build settings and its cost model.

    A decode step costs ``step_ms`` + ``per_sequence_ms`` × running sequences +
    ``per_kilotoken_context_ms`` × (context tokens of the batch / 1000), plus
    ``prefill_per_kilotoken_ms`` × (prompt tokens of the sequences joining at that step / 1000).
    """

    max_batch_size: int = 8
    max_input_len: int = 256
    max_seq_len: int = 512
    max_num_tokens: int | None = None
    seed: int = 0
    hidden_size: int = 64
    vocab_size: int = 512
    step_ms: float = 4.0
    per_sequence_ms: float = 0.5
    per_kilotoken_context_ms: float = 2.0
    prefill_per_kilotoken_ms: float = 20.0

    def __post_init__(self) -> None:
        if self.max_batch_size < 1 or self.max_input_len < 1 or self.max_seq_len <= self.max_input_len - 1:
            raise ConfigError(f"reference engine: max_batch_size {self.max_batch_size}, max_input_len "
                              f"{self.max_input_len}, max_seq_len {self.max_seq_len} are inconsistent",
                              hint="use positive sizes with max_seq_len >= max_input_len")
        if min(self.step_ms, self.per_sequence_ms, self.per_kilotoken_context_ms,
               self.prefill_per_kilotoken_ms) < 0:
            raise ConfigError("reference engine: step costs must be >= 0 ms")


@dataclass(frozen=True)
class ReferenceRepository:
    """What :func:`build_reference_repository` wrote."""

    repo: Path
    engine_dir: Path
    tokenizer_dir: Path
    options: TrtllmRepoOptions
    engine: ReferenceEngine
    vocab_size: int

    @property
    def ensemble(self) -> str:
        """The model clients call (``text_input``, ``max_tokens``, ``stream`` → ``text_output``)."""
        return "ensemble"


def reference_engine_config(engine: ReferenceEngine, *, vocab_size: int, allowed_token_ids: list[int],
                            interface: TrtllmInterface | None = None) -> dict:
    """The reference engine's ``config.json``: TensorRT-LLM's layout plus a ``reference`` section
    (its cost model, and the input names of the TensorRT-LLM line it stands in for)."""
    v = interface or find_interface(NEWEST_ENGINE)
    assert v is not None
    return {
        "version": REFERENCE_VERSION,
        "pretrained_config": {
            "architecture": "TinyLM",
            "dtype": "float32",
            "vocab_size": vocab_size,
            "hidden_size": engine.hidden_size,
            "num_hidden_layers": 1,
            "num_attention_heads": 1,
            "num_key_value_heads": 1,
            "max_position_embeddings": engine.max_seq_len,
            "mapping": {"world_size": 1, "gpus_per_node": 1, "cp_size": 1, "tp_size": 1, "pp_size": 1},
            "quantization": {"quant_algo": None, "kv_cache_quant_algo": None},
        },
        "build_config": {
            "max_input_len": engine.max_input_len,
            "max_seq_len": engine.max_seq_len,
            "max_batch_size": engine.max_batch_size,
            "max_beam_width": 1,
            "max_num_tokens": engine.max_num_tokens or engine.max_batch_size * engine.max_input_len,
            "kv_cache_type": "PAGED",
            "plugin_config": {"context_fmha": True, "paged_kv_cache": True, "use_paged_context_fmha": True,
                              "remove_input_padding": True, "tokens_per_block": 64},
        },
        "reference": {
            "trtllm_version": v.version,
            "min_tokens_input": v.min_tokens_input,
            "seed_input": v.seed_input,
            "seed": engine.seed,
            "hidden_size": engine.hidden_size,
            "vocab_size": vocab_size,
            "allowed_token_ids": allowed_token_ids,
            "step_ms": engine.step_ms,
            "per_sequence_ms": engine.per_sequence_ms,
            "per_kilotoken_context_ms": engine.per_kilotoken_context_ms,
            "prefill_per_kilotoken_ms": engine.prefill_per_kilotoken_ms,
        },
    }


def printable_token_ids(tokenizer_dir: Path) -> list[int]:
    """Ids (special tokens excluded) that decode alone to printable ASCII, so streamed text stays readable."""
    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    special = {tokenizer.token_to_id(t) for t in REFERENCE_SPECIAL_TOKENS}
    allowed = []
    for token_id in range(tokenizer.get_vocab_size()):
        if token_id in special:
            continue
        text = tokenizer.decode([token_id])
        if text and text.isascii() and text.isprintable():
            allowed.append(token_id)
    return allowed


def build_reference_repository(
    repo: str | Path,
    *,
    engine: ReferenceEngine | None = None,
    streaming: bool = True,
    max_batch_size: int | None = None,
    max_tokens_in_paged_kv_cache: int | None = None,
    exclude_input_in_output: bool = True,
    batch_window: str = ENGINE_QUEUE_DELAY,
    tokenizer_instances: int = 1,
    trtllm_version: str = NEWEST_ENGINE,
    overwrite: bool = False,
) -> ReferenceRepository:
    """Write a servable in-flight-batching repository with the CPU reference engine into ``repo``.

    ``max_batch_size`` is Triton's (default: the engine's); ``tokenizer_instances`` is the instance
    count of preprocessing and of postprocessing (each detokenizes one streamed token at a time;
    1 by default here, where the CPUs are shared with the engine and the client, not
    ``max_batch_size`` as on a GPU machine). ``trtllm_version`` is the TensorRT-LLM line whose
    input names the repository and the engine use. The tokenizer goes to
    ``<repo>/preprocessing/1/tokenizer`` and the engine to ``<repo>/tensorrt_llm/1/engine``; the
    configs name both by absolute path, as TensorRT-LLM's templates do.
    """
    eng = engine or ReferenceEngine()
    root = Path(repo).resolve()
    tokenizer_dir = root / "preprocessing" / "1" / "tokenizer"
    engine_dir = root / "tensorrt_llm" / "1" / "engine"
    options = TrtllmRepoOptions(
        engine="reference", engine_dir=str(engine_dir), tokenizer_dir=str(tokenizer_dir),
        max_batch_size=max_batch_size or eng.max_batch_size, streaming=streaming,
        max_tokens_in_paged_kv_cache=max_tokens_in_paged_kv_cache, exclude_input_in_output=exclude_input_in_output,
        batch_window=batch_window, gpu_ids=(0,), preprocessing_instances=tokenizer_instances,
        postprocessing_instances=tokenizer_instances, trtllm_version=trtllm_version,
    )
    write_trtllm_repository(root, options, overwrite=overwrite)
    vocab = build_reference_tokenizer(tokenizer_dir, vocab_size=eng.vocab_size)
    config = reference_engine_config(eng, vocab_size=vocab, allowed_token_ids=printable_token_ids(tokenizer_dir),
                                     interface=options.interface)
    engine_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(engine_dir / "config.json", json.dumps(config, indent=2) + "\n")
    return ReferenceRepository(repo=root, engine_dir=engine_dir, tokenizer_dir=tokenizer_dir, options=options,
                               engine=eng, vocab_size=vocab)


@dataclass(frozen=True)
class ReferenceLlmApiRepository:
    """What :func:`build_reference_llmapi_repository` wrote: one ``tensorrt_llm`` model (LLM-API interface)."""

    repo: Path
    checkpoint_dir: Path
    plan: LlmApiPlan
    engine: ReferenceEngine
    vocab_size: int

    @property
    def model(self) -> str:
        """The model clients call (``text_input``, ``sampling_param_max_tokens``, ``streaming`` → ``text_output``)."""
        return "tensorrt_llm"


def build_reference_llmapi_repository(
    repo: str | Path,
    *,
    engine: ReferenceEngine | None = None,
    streaming: bool = True,
    trtllm_version: str = NEWEST,
    overwrite: bool = False,
    extra_llm_args: Mapping[str, Any] | None = None,
) -> ReferenceLlmApiRepository:
    """Write TensorRT-LLM's LLM-API repository with a CPU stand-in for its ``model.py`` into ``repo``.

    ``config.pbtxt`` and ``model.yaml`` are what ``--engine llmapi`` writes for ``trtllm_version``'s
    line (its tensors, its ``LLM()`` arguments, ``triton_config.decoupled`` = ``streaming``); the
    ``model`` path is a checkpoint folder written here (``<repo>/tensorrt_llm/1/checkpoint``: the
    trained tokenizer and a ``config.json`` with the stand-in's settings). It serves on the bundled
    server (see ``pymodels/reference_llmapi.py`` for the contract it keeps).
    """
    eng = engine or ReferenceEngine()
    line = find_interface(trtllm_version)
    if line is None or line.llmapi is None:
        raise ConfigError(f"TensorRT-LLM {trtllm_version} has no LLM-API backend (it comes with 0.19)",
                          hint="pass --trtllm-version 0.19 or newer")
    root = Path(repo).resolve()
    checkpoint = root / "tensorrt_llm" / "1" / "checkpoint"
    plan = plan_llmapi(LlmApiOptions(line=line, model=str(checkpoint), max_batch_size=eng.max_batch_size,
                                     max_num_tokens=eng.max_num_tokens, max_seq_len=eng.max_seq_len,
                                     cuda_graphs=False, streaming=streaming, extra_llm_args=extra_llm_args or {}))

    def files(_root: Path) -> dict[str, str | bytes | Path]:
        return {"model.py": PYMODELS / "reference_llmapi.py", **REFERENCE_HELPERS}

    write_llmapi_repository(root, plan, model_files=files, overwrite=overwrite)
    vocab = build_reference_tokenizer(checkpoint, vocab_size=eng.vocab_size)
    config = reference_engine_config(eng, vocab_size=vocab, allowed_token_ids=printable_token_ids(checkpoint))
    api = line.llmapi
    config["reference"].update({
        "trtllm_version": line.version, "llm_args": sorted(api.llm_args),
        "best_of_input": "sampling_param_best_of" if "sampling_param_best_of" in api.input_names
        else "sampling_param_beam_width",
        "max_batch_size": eng.max_batch_size, "max_seq_len": eng.max_seq_len,
        # As the line's model.py sends them (see pymodels/reference_llmapi.py): strings up to 1.2.
        "metrics_as_strings": line.version != "main",
    })
    atomic_write(checkpoint / "config.json", json.dumps(config, indent=2) + "\n")
    return ReferenceLlmApiRepository(repo=root, checkpoint_dir=checkpoint, plan=plan, engine=eng, vocab_size=vocab)
