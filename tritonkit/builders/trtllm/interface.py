"""The request interface of TensorRT-LLM's in-flight-batching templates, as typed tensors, per release line.

Names, data types and dims follow ``all_models/inflight_batcher_llm`` of the line's release (see
:mod:`tritonkit.trtllm_versions` for the tag each comes from): clients written for those
templates — GenAI-Perf, Triton CLI's, Triton's OpenAI frontend, users' own — call what this
package generates unchanged. Kept: text generation with sampling and stop/bad words, streaming,
log-probs, context and generation logits, requests of batch > 1 (``batch_index``). Left out:
LoRA, multimodal, prompt tables, speculative decoding, guided decoding, perf-metric and
KV-cache-statistics outputs.

The two inputs renamed between lines (``min_length``/``min_tokens``, ``random_seed``/``seed``)
are accepted under both names by the ensemble and the BLS model and go through preprocessing,
which passes on whichever was given (an ensemble step that does not produce a tensor leaves the
next step's optional input unset) under the name the engine's line reads.
"""

from __future__ import annotations

from tritonkit.repository import EnsembleStep, TensorSpec
from tritonkit.trtllm_versions import TrtllmInterface

__all__ = [
    "ALIASED_KNOBS",
    "KNOB_TO_ENGINE",
    "OPTIONAL_OUTPUTS",
    "bls_inputs",
    "engine_inputs",
    "ensemble_inputs",
    "ensemble_outputs",
    "ensemble_steps",
    "engine_outputs",
    "POST_INPUTS",
    "POST_OUTPUTS",
    "pre_inputs",
    "PRE_OUTPUTS",
]


def _scalar(name: str, dtype: str, *, optional: bool = True, reshape: bool = True) -> TensorSpec:
    return TensorSpec(name=name, dtype=dtype, dims=[1], reshape=[] if reshape else None, optional=optional)


def _ragged(name: str, dtype: str, dims: list[int]) -> TensorSpec:
    return TensorSpec(name=name, dtype=dtype, dims=dims, optional=True, allow_ragged_batch=True)


#: Ensemble / BLS input → ``tensorrt_llm`` input, for the knobs passed straight through (same on every line).
KNOB_TO_ENGINE = {
    "exclude_input_in_output": "exclude_input_in_output",
    "top_k": "runtime_top_k",
    "top_p": "runtime_top_p",
    "temperature": "temperature",
    "length_penalty": "len_penalty",
    "repetition_penalty": "repetition_penalty",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "return_log_probs": "return_log_probs",
    "return_context_logits": "return_context_logits",
    "return_generation_logits": "return_generation_logits",
    "beam_width": "beam_width",
    "stream": "streaming",
}
_KNOB_DTYPES = {
    "exclude_input_in_output": "BOOL", "top_k": "INT32", "top_p": "FP32", "temperature": "FP32",
    "length_penalty": "FP32", "repetition_penalty": "FP32", "presence_penalty": "FP32", "frequency_penalty": "FP32",
    "return_log_probs": "BOOL", "return_context_logits": "BOOL", "return_generation_logits": "BOOL",
    "beam_width": "INT32", "stream": "BOOL",
}
#: The request's text and limits: (ensemble / BLS input, the preprocessing input it feeds, dtype, dims,
#: optional), as TensorRT-LLM's ensemble template wires them.
_REQUEST_TENSORS: tuple[tuple[str, str, str, tuple[int, ...], bool], ...] = (
    ("text_input", "QUERY", "BYTES", (1,), False),
    ("max_tokens", "REQUEST_OUTPUT_LEN", "INT32", (1,), False),
    ("bad_words", "BAD_WORDS_DICT", "BYTES", (-1,), True),
    ("stop_words", "STOP_WORDS_DICT", "BYTES", (-1,), True),
    ("end_id", "END_ID", "INT32", (1,), True),
    ("pad_id", "PAD_ID", "INT32", (1,), True),
)
#: Client-facing names of the renamed knobs → (preprocessing input, dtype); preprocessing's
#: ``OUT_MIN_TOKENS`` / ``OUT_SEED`` carry whichever was given.
ALIASED_KNOBS = {
    "min_length": ("MIN_LENGTH", "INT32"),
    "min_tokens": ("MIN_TOKENS", "INT32"),
    "random_seed": ("RANDOM_SEED", "UINT64"),
    "seed": ("SEED", "UINT64"),
}
#: Outputs the engine sends only when the request asks (``return_log_probs``,
#: ``return_context_logits``, ``return_generation_logits``; ``batch_index`` for batch > 1),
#: declared the same on the engine, the ensemble and the BLS model.
_OPTIONAL_OUTPUT_SPECS: tuple[TensorSpec, ...] = (
    TensorSpec(name="cum_log_probs", dtype="FP32", dims=[-1]),
    TensorSpec(name="output_log_probs", dtype="FP32", dims=[-1, -1]),
    TensorSpec(name="context_logits", dtype="FP32", dims=[-1, -1]),
    TensorSpec(name="generation_logits", dtype="FP32", dims=[-1, -1, -1]),
    TensorSpec(name="batch_index", dtype="INT32", dims=[1]),
)
OPTIONAL_OUTPUTS = tuple(t.name for t in _OPTIONAL_OUTPUT_SPECS)


def _knob_names(v: TrtllmInterface) -> list[str]:
    """Client knob names, the line's own spelling of each renamed one before the other."""
    aliased = [v.min_tokens_input, *(a for a, n in v.renamed_inputs.items() if n == v.min_tokens_input),
               v.seed_input, *(a for a, n in v.renamed_inputs.items() if n == v.seed_input)]
    return [*KNOB_TO_ENGINE, *aliased]


def _knob_dtype(name: str) -> str:
    return _KNOB_DTYPES[name] if name in _KNOB_DTYPES else ALIASED_KNOBS[name][1]


def ensemble_inputs(v: TrtllmInterface) -> tuple[TensorSpec, ...]:
    """The ensemble's inputs on line ``v`` (both spellings of the renamed knobs)."""
    return (
        *(TensorSpec(name=name, dtype=dtype, dims=list(dims), optional=optional)
          for name, _, dtype, dims, optional in _REQUEST_TENSORS),
        *(_scalar(name, _knob_dtype(name), reshape=False) for name in _knob_names(v)),
    )


def ensemble_outputs(v: TrtllmInterface) -> tuple[TensorSpec, ...]:
    """``text_output`` and the optional outputs, as the line's ensemble declares them."""
    del v  # the kept outputs are the same on every supported line
    return (
        TensorSpec(name="text_output", dtype="BYTES", dims=[-1]),
        *_OPTIONAL_OUTPUT_SPECS,
    )


def bls_inputs(v: TrtllmInterface) -> tuple[TensorSpec, ...]:
    """The BLS model takes the ensemble's interface; its switches are reshaped to scalars as in the template."""
    switches = ("return_log_probs", "return_context_logits", "return_generation_logits")
    return tuple(_scalar(t.name, str(t.dtype)) if t.name in switches else t for t in ensemble_inputs(v))


def pre_inputs() -> tuple[TensorSpec, ...]:
    """preprocessing's inputs: the template's, plus both spellings of the renamed knobs."""
    return (
        *(TensorSpec(name=pre, dtype=dtype, dims=list(dims), optional=optional)
          for _, pre, dtype, dims, optional in _REQUEST_TENSORS),
        *(TensorSpec(name=pre, dtype=dtype, dims=[1], optional=True) for pre, dtype in ALIASED_KNOBS.values()),
    )


PRE_OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="INPUT_ID", dtype="INT32", dims=[-1]),
    TensorSpec(name="REQUEST_INPUT_LEN", dtype="INT32", dims=[1]),
    TensorSpec(name="BAD_WORDS_IDS", dtype="INT32", dims=[2, -1]),
    TensorSpec(name="STOP_WORDS_IDS", dtype="INT32", dims=[2, -1]),
    TensorSpec(name="REQUEST_OUTPUT_LEN", dtype="INT32", dims=[-1]),
    TensorSpec(name="OUT_END_ID", dtype="INT32", dims=[1]),
    TensorSpec(name="OUT_PAD_ID", dtype="INT32", dims=[1]),
    TensorSpec(name="OUT_MIN_TOKENS", dtype="INT32", dims=[1]),
    TensorSpec(name="OUT_SEED", dtype="UINT64", dims=[1]),
)


def engine_inputs(v: TrtllmInterface) -> tuple[TensorSpec, ...]:
    """The ``tensorrt_llm`` model's kept inputs, under the names line ``v`` reads."""
    return (
        TensorSpec(name="input_ids", dtype="INT32", dims=[-1], allow_ragged_batch=True, optional=True),
        _scalar("input_lengths", "INT32", optional=False),
        _scalar("request_output_len", "INT32", optional=False),
        _scalar("end_id", "INT32"),
        _scalar("pad_id", "INT32"),
        _ragged("stop_words_list", "INT32", [2, -1]),
        _ragged("bad_words_list", "INT32", [2, -1]),
        _scalar("beam_width", "INT32"),
        _scalar("temperature", "FP32"),
        _scalar("runtime_top_k", "INT32"),
        _scalar("runtime_top_p", "FP32"),
        _scalar("len_penalty", "FP32"),
        _scalar("repetition_penalty", "FP32"),
        _scalar(v.min_tokens_input, "INT32"),
        _scalar("presence_penalty", "FP32"),
        _scalar("frequency_penalty", "FP32"),
        _scalar(v.seed_input, "UINT64"),
        _scalar("return_log_probs", "BOOL"),
        _scalar("return_context_logits", "BOOL"),
        _scalar("return_generation_logits", "BOOL"),
        _scalar("exclude_input_in_output", "BOOL"),
        _scalar("stop", "BOOL"),
        _scalar("streaming", "BOOL"),
    )


def engine_outputs(v: TrtllmInterface) -> tuple[TensorSpec, ...]:
    """``output_ids`` and ``sequence_length``, then the outputs sent only when asked."""
    del v  # the kept outputs are the same on every supported line
    return (
        TensorSpec(name="output_ids", dtype="INT32", dims=[-1, -1]),
        TensorSpec(name="sequence_length", dtype="INT32", dims=[-1]),
        *_OPTIONAL_OUTPUT_SPECS,
    )


POST_INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="TOKENS_BATCH", dtype="INT32", dims=[-1, -1]),
    TensorSpec(name="SEQUENCE_LENGTH", dtype="INT32", dims=[-1]),
)
POST_OUTPUTS: tuple[TensorSpec, ...] = (TensorSpec(name="OUTPUT", dtype="BYTES", dims=[-1]),)


def ensemble_steps(v: TrtllmInterface, engine_model: str = "tensorrt_llm") -> list[EnsembleStep]:
    """preprocessing → ``engine_model`` → postprocessing, wired as TensorRT-LLM's ensemble template
    (plus the renamed knobs through preprocessing, see the module docstring)."""
    pre = EnsembleStep(
        model_name="preprocessing",
        input_map={**{pre: name for name, pre, *_ in _REQUEST_TENSORS},
                   **{pre: name for name, (pre, _) in ALIASED_KNOBS.items()}},
        output_map={"REQUEST_INPUT_LEN": "_REQUEST_INPUT_LEN", "INPUT_ID": "_INPUT_ID",
                    "REQUEST_OUTPUT_LEN": "_REQUEST_OUTPUT_LEN", "STOP_WORDS_IDS": "_STOP_WORDS_IDS",
                    "BAD_WORDS_IDS": "_BAD_WORDS_IDS", "OUT_END_ID": "_PREPROCESSOR_END_ID",
                    "OUT_PAD_ID": "_PREPROCESSOR_PAD_ID", "OUT_MIN_TOKENS": "_MIN_TOKENS", "OUT_SEED": "_SEED"},
    )
    inputs = {"input_ids": "_INPUT_ID", "input_lengths": "_REQUEST_INPUT_LEN",
              "request_output_len": "_REQUEST_OUTPUT_LEN", "end_id": "_PREPROCESSOR_END_ID",
              "pad_id": "_PREPROCESSOR_PAD_ID", "stop_words_list": "_STOP_WORDS_IDS",
              "bad_words_list": "_BAD_WORDS_IDS", v.min_tokens_input: "_MIN_TOKENS", v.seed_input: "_SEED"}
    inputs.update({engine: knob for knob, engine in KNOB_TO_ENGINE.items()})
    engine = EnsembleStep(
        model_name=engine_model,
        input_map=inputs,
        output_map={"output_ids": "_TOKENS_BATCH", "sequence_length": "_SEQUENCE_LENGTH",
                    **{name: name for name in OPTIONAL_OUTPUTS}},
    )
    post = EnsembleStep(
        model_name="postprocessing",
        input_map={"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"},
        output_map={"OUTPUT": "text_output"},
    )
    return [pre, engine, post]
