"""``--llm-arg KEY=YAML``: one more ``LLM()`` argument for the LLM-API backend's ``model.yaml``, read
and checked here before anything is written.

A value is read as YAML, but only as plain data: an anchor, an alias or a tag (``&a``, ``*a``,
``!!python/…``) is refused, as is a number that is not finite. A key must be one the line's
``LLM()`` takes (:attr:`~tritonkit.trtllm_versions.LlmApiInterface.llm_args`, with the release
and file it was read at); an unknown one is refused with the known ones listed. Keys tritonkit
writes from its own options are refused with that option (``model`` is ``--hf-model``'s folder;
``model=/etc`` would have the server load another folder than the one planned from), and the
counts ``LLM()`` takes (``max_batch_size``, ``max_seq_len``, …) must be whole numbers of at least
one, the switches true or false. Those value rules are what the arguments mean (a batch of -1
requests is none); upstream's own type annotations were not read here, so other keys' values are
left to ``LLM()`` itself.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from tritonkit._values import INT32_MAX, MAX_GPUS, Bounds, excerpt
from tritonkit.errors import ConfigError

__all__ = ["OWN_OPTIONS", "check_llm_args", "parse_llm_args"]

_EXAMPLE = "e.g. --llm-arg enable_attention_dp=true"

#: Keys tritonkit writes into ``model.yaml`` from options of its own: given as ``--llm-arg`` they
#: would contradict what was planned (the checkpoint read, the GPUs counted).
OWN_OPTIONS: dict[str, str] = {
    "model": "--hf-model (or the builder's model_path)",
    "backend": "the line's backend (pytorch): tritonkit writes it",
    "tensor_parallel_size": "--tp",
    "pipeline_parallel_size": "--pp",
}

_TOKENS = Bounds(integer=True, low=1, high=INT32_MAX, example="8192")
_PARALLEL = Bounds(integer=True, low=1, high=MAX_GPUS, example="2")
_ITERATIONS = Bounds(integer=True, low=0, high=INT32_MAX, example="1000")
#: Counts among the ``LLM()`` arguments: what each counts decides its lowest meaningful value.
_COUNTS: dict[str, Bounds] = {
    "max_batch_size": _TOKENS, "max_num_tokens": _TOKENS, "max_seq_len": _TOKENS, "max_input_len": _TOKENS,
    "max_beam_width": Bounds(integer=True, low=1, high=1024, example="1"),
    "context_parallel_size": _PARALLEL, "moe_tensor_parallel_size": _PARALLEL,
    "moe_expert_parallel_size": _PARALLEL, "moe_cluster_parallel_size": _PARALLEL, "gpus_per_node": _PARALLEL,
    "stream_interval": Bounds(integer=True, low=1, high=INT32_MAX, example="1"),
    "num_postprocess_workers": Bounds(integer=True, low=0, high=1024, example="0"),
    "iter_stats_max_iterations": _ITERATIONS, "request_stats_max_iterations": _ITERATIONS,
}
#: Switches among the ``LLM()`` arguments.
_SWITCHES = frozenset({
    "skip_tokenizer_init", "trust_remote_code", "enable_lora", "enable_chunked_prefill", "enable_attention_dp",
    "normalize_log_probs", "gather_generation_logits", "disable_overlap_scheduler", "enable_mixed_sampler",
    "enable_trtllm_sampler", "enable_iter_perf_stats", "enable_iter_req_stats", "print_iter_log",
    "enable_autotuner", "enable_layerwise_nvtx_marker", "enable_min_latency", "force_dynamic_quantization",
})


def _plain_yaml(item: str, text: str) -> Any:
    """``text`` read as YAML holding plain data only (no anchor, alias or tag); finite numbers."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise ConfigError(f"--llm-arg {excerpt(item, 60)}: a YAML anchor or alias (&name, *name)",
                                  hint=f"write the value out in full, {_EXAMPLE}")
            tag = getattr(event, "tag", None)
            if tag is not None:
                raise ConfigError(f"--llm-arg {excerpt(item, 60)}: a YAML tag ({excerpt(tag)})",
                                  hint=f"write a plain value (a number, true/false, text, a {{mapping}}), {_EXAMPLE}")
        value = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError(f"--llm-arg {excerpt(item, 60)}: the value is not YAML ({type(exc).__name__})",
                          hint="quote it, e.g. --llm-arg 'kv_cache_config={enable_block_reuse: true}'") from None
    if _non_finite(value):
        raise ConfigError(f"--llm-arg {excerpt(item, 60)}: a number that is not finite (.nan, .inf)",
                          hint=f"give a real number, {_EXAMPLE}")
    return value


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    return False


def parse_llm_args(items: Sequence[str]) -> dict[str, Any]:
    """``KEY=YAML`` items (``--llm-arg``) → a dict of ``LLM()`` arguments; each value read as plain YAML."""
    args: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(f"--llm-arg {excerpt(item, 60)} is not KEY=VALUE with KEY an LLM() argument name",
                              hint=_EXAMPLE)
        if key in args:
            raise ConfigError(f"--llm-arg {key} is given twice", hint="keep one --llm-arg per key")
        args[key] = _plain_yaml(item, text)
    return args


def _known_text(known: Iterable[str]) -> str:
    return ", ".join(sorted(known))


def check_llm_args(args: Mapping[str, Any], known: frozenset[str], *, line: str, source: str) -> None:
    """Refuse an ``--llm-arg`` ``LLM()`` of TensorRT-LLM ``line`` does not take (listing those it
    takes, as read at ``source``), one tritonkit writes from its own option, or a value its key
    cannot mean (a count below one, a switch that is not true or false)."""
    unknown = sorted(k for k in args if k not in known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        guess = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(f"--llm-arg {', '.join(unknown)}: TensorRT-LLM {line}'s LLM() does not accept "
                          f"{', '.join(unknown)} (its arguments as read at {source})",
                          hint=f"{guess}give one of {_known_text(known - OWN_OPTIONS.keys())}, or the "
                               "--trtllm-version whose LLM() takes it")
    for key, value in args.items():
        if key in OWN_OPTIONS:
            raise ConfigError(f"--llm-arg {key}={excerpt(value)}: tritonkit writes {key} itself",
                              hint=f"set it with {OWN_OPTIONS[key]}")
        bounds = _COUNTS.get(key)
        problem = bounds.problem(value) if bounds is not None else None
        if bounds is not None and problem is not None:
            raise ConfigError(f"--llm-arg {key}={excerpt(value)}: {problem}",
                              hint=f"give {bounds.describe()}, e.g. --llm-arg {key}={bounds.example}")
        if key in _SWITCHES and not isinstance(value, bool):
            raise ConfigError(f"--llm-arg {key}={excerpt(value)}: {key} is a switch",
                              hint=f"write --llm-arg {key}=true or --llm-arg {key}=false")
