"""The request interface of TensorRT-LLM's in-flight-batching templates, as typed tensors.

Names, data types and dims follow ``triton_backend/all_models/inflight_batcher_llm`` of
TensorRT-LLM (0.17 onwards: ``min_tokens``, ``seed``): clients written for those templates —
GenAI-Perf, Triton CLI's, users' own — call what this package generates unchanged. Kept: text
generation with sampling and stop/bad words, streaming, log-probs. Left out: LoRA, multimodal,
prompt tables, speculative decoding, guided decoding, logits and perf-metric outputs.
"""

from __future__ import annotations

from tritonkit.repository import EnsembleStep, TensorSpec

__all__ = [
    "BLS_INPUTS",
    "BLS_OUTPUTS",
    "ENGINE_INPUTS",
    "ENGINE_OUTPUTS",
    "ENSEMBLE_INPUTS",
    "ENSEMBLE_OUTPUTS",
    "POST_INPUTS",
    "POST_OUTPUTS",
    "PRE_INPUTS",
    "PRE_OUTPUTS",
    "ensemble_steps",
]


def _scalar(name: str, dtype: str, *, optional: bool = True, reshape: bool = True) -> TensorSpec:
    return TensorSpec(name=name, dtype=dtype, dims=[1], reshape=[] if reshape else None, optional=optional)


def _ragged(name: str, dtype: str, dims: list[int]) -> TensorSpec:
    return TensorSpec(name=name, dtype=dtype, dims=dims, optional=True, allow_ragged_batch=True)


# (ensemble / BLS input name, dtype) of the optional per-request knobs, in template order.
_KNOBS = (
    ("exclude_input_in_output", "BOOL"),
    ("end_id", "INT32"),
    ("pad_id", "INT32"),
    ("top_k", "INT32"),
    ("top_p", "FP32"),
    ("temperature", "FP32"),
    ("length_penalty", "FP32"),
    ("repetition_penalty", "FP32"),
    ("min_tokens", "INT32"),
    ("presence_penalty", "FP32"),
    ("frequency_penalty", "FP32"),
    ("seed", "UINT64"),
    ("return_log_probs", "BOOL"),
    ("beam_width", "INT32"),
    ("stream", "BOOL"),
)

#: Ensemble input → ``tensorrt_llm`` input, for the knobs passed straight through.
KNOB_TO_ENGINE = {
    "exclude_input_in_output": "exclude_input_in_output",
    "top_k": "runtime_top_k",
    "top_p": "runtime_top_p",
    "temperature": "temperature",
    "length_penalty": "len_penalty",
    "repetition_penalty": "repetition_penalty",
    "min_tokens": "min_tokens",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "seed": "seed",
    "return_log_probs": "return_log_probs",
    "beam_width": "beam_width",
    "stream": "streaming",
}

ENSEMBLE_INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="text_input", dtype="BYTES", dims=[1]),
    TensorSpec(name="max_tokens", dtype="INT32", dims=[1]),
    TensorSpec(name="bad_words", dtype="BYTES", dims=[-1], optional=True),
    TensorSpec(name="stop_words", dtype="BYTES", dims=[-1], optional=True),
    *(_scalar(name, dtype, reshape=False) for name, dtype in _KNOBS),
)
ENSEMBLE_OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="text_output", dtype="BYTES", dims=[-1]),
    TensorSpec(name="cum_log_probs", dtype="FP32", dims=[-1]),
    TensorSpec(name="output_log_probs", dtype="FP32", dims=[-1, -1]),
)

# The BLS model: the ensemble's interface; its boolean switches are reshaped to scalars as in the template.
BLS_INPUTS: tuple[TensorSpec, ...] = tuple(
    _scalar(t.name, str(t.dtype)) if t.name in ("return_log_probs",) else t for t in ENSEMBLE_INPUTS
)
BLS_OUTPUTS = ENSEMBLE_OUTPUTS

PRE_INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="QUERY", dtype="BYTES", dims=[1]),
    TensorSpec(name="REQUEST_OUTPUT_LEN", dtype="INT32", dims=[1]),
    TensorSpec(name="BAD_WORDS_DICT", dtype="BYTES", dims=[-1], optional=True),
    TensorSpec(name="STOP_WORDS_DICT", dtype="BYTES", dims=[-1], optional=True),
    TensorSpec(name="END_ID", dtype="INT32", dims=[1], optional=True),
    TensorSpec(name="PAD_ID", dtype="INT32", dims=[1], optional=True),
)
PRE_OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="INPUT_ID", dtype="INT32", dims=[-1]),
    TensorSpec(name="REQUEST_INPUT_LEN", dtype="INT32", dims=[1]),
    TensorSpec(name="BAD_WORDS_IDS", dtype="INT32", dims=[2, -1]),
    TensorSpec(name="STOP_WORDS_IDS", dtype="INT32", dims=[2, -1]),
    TensorSpec(name="REQUEST_OUTPUT_LEN", dtype="INT32", dims=[-1]),
    TensorSpec(name="OUT_END_ID", dtype="INT32", dims=[1]),
    TensorSpec(name="OUT_PAD_ID", dtype="INT32", dims=[1]),
)

ENGINE_INPUTS: tuple[TensorSpec, ...] = (
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
    _scalar("min_tokens", "INT32"),
    _scalar("presence_penalty", "FP32"),
    _scalar("frequency_penalty", "FP32"),
    _scalar("seed", "UINT64"),
    _scalar("return_log_probs", "BOOL"),
    _scalar("exclude_input_in_output", "BOOL"),
    _scalar("stop", "BOOL"),
    _scalar("streaming", "BOOL"),
)
ENGINE_OUTPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="output_ids", dtype="INT32", dims=[-1, -1]),
    TensorSpec(name="sequence_length", dtype="INT32", dims=[-1]),
    TensorSpec(name="cum_log_probs", dtype="FP32", dims=[-1]),
    TensorSpec(name="output_log_probs", dtype="FP32", dims=[-1, -1]),
)

POST_INPUTS: tuple[TensorSpec, ...] = (
    TensorSpec(name="TOKENS_BATCH", dtype="INT32", dims=[-1, -1]),
    TensorSpec(name="SEQUENCE_LENGTH", dtype="INT32", dims=[-1]),
)
POST_OUTPUTS: tuple[TensorSpec, ...] = (TensorSpec(name="OUTPUT", dtype="BYTES", dims=[-1]),)


def ensemble_steps(engine_model: str = "tensorrt_llm") -> list[EnsembleStep]:
    """preprocessing → ``engine_model`` → postprocessing, wired as TensorRT-LLM's ensemble template."""
    pre = EnsembleStep(
        model_name="preprocessing",
        input_map={"QUERY": "text_input", "REQUEST_OUTPUT_LEN": "max_tokens", "BAD_WORDS_DICT": "bad_words",
                   "STOP_WORDS_DICT": "stop_words", "END_ID": "end_id", "PAD_ID": "pad_id"},
        output_map={"REQUEST_INPUT_LEN": "_REQUEST_INPUT_LEN", "INPUT_ID": "_INPUT_ID",
                    "REQUEST_OUTPUT_LEN": "_REQUEST_OUTPUT_LEN", "STOP_WORDS_IDS": "_STOP_WORDS_IDS",
                    "BAD_WORDS_IDS": "_BAD_WORDS_IDS", "OUT_END_ID": "_PREPROCESSOR_END_ID",
                    "OUT_PAD_ID": "_PREPROCESSOR_PAD_ID"},
    )
    engine_inputs = {"input_ids": "_INPUT_ID", "input_lengths": "_REQUEST_INPUT_LEN",
                     "request_output_len": "_REQUEST_OUTPUT_LEN", "end_id": "_PREPROCESSOR_END_ID",
                     "pad_id": "_PREPROCESSOR_PAD_ID", "stop_words_list": "_STOP_WORDS_IDS",
                     "bad_words_list": "_BAD_WORDS_IDS"}
    engine_inputs.update({engine: knob for knob, engine in KNOB_TO_ENGINE.items()})
    engine = EnsembleStep(
        model_name=engine_model,
        input_map=engine_inputs,
        output_map={"output_ids": "_TOKENS_BATCH", "sequence_length": "_SEQUENCE_LENGTH",
                    "cum_log_probs": "cum_log_probs", "output_log_probs": "output_log_probs"},
    )
    post = EnsembleStep(
        model_name="postprocessing",
        input_map={"TOKENS_BATCH": "_TOKENS_BATCH", "SEQUENCE_LENGTH": "_SEQUENCE_LENGTH"},
        output_map={"OUTPUT": "text_output"},
    )
    return [pre, engine, post]
