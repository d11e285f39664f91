"""TK5xx — transactions: decoupled models and streaming, the response cache,
and consistency of decoupled settings across an ensemble."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, WARNING, LintContext, ModelInfo, rule

FAMILY = "transaction"

#: Parameters backends use to switch streaming on (TensorRT-LLM: decoupled_mode; vLLM-style: streaming).
_STREAM_PARAMS = ("decoupled_mode", "streaming")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _decoupled(cfg: mc.ModelConfig) -> bool:
    return bool(cfg.model_transaction_policy.decoupled)


@rule("TK501", ERROR, "response cache with a decoupled model", family=FAMILY)
def cache_decoupled(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.response_cache.enable and _decoupled(cfg):
        ctx.report(m, "response_cache is enabled on a decoupled model; Triton does not cache decoupled "
                   "responses and refuses the model", field="response_cache.enable",
                   hint="disable response_cache, or make the model non-decoupled")


@rule("TK502", ERROR, "response cache with sequence batching", family=FAMILY)
def cache_sequence(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.response_cache.enable and cfg.HasField("sequence_batching"):
        ctx.report(m, "response_cache is enabled with sequence_batching; stateful responses cannot be cached",
                   field="response_cache.enable", hint="disable response_cache for stateful models")


@rule("TK503", WARNING, "decoupled settings disagree", family=FAMILY)
def decoupled_parameters(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    """A backend parameter that turns streaming on must agree with model_transaction_policy.

    The TensorRT-LLM backend reads ``decoupled_mode`` and needs the transaction policy to match; the
    bundled server has no such backend, so this is checked from the config alone.
    """
    for key in _STREAM_PARAMS:
        if key not in cfg.parameters:
            continue
        value = cfg.parameters[key].string_value.strip().lower()
        if value not in _TRUE | _FALSE:
            continue  # unfilled placeholders are TK003's business
        if (value in _TRUE) != _decoupled(cfg):
            ctx.report(m, f"parameter {key} is {value!r} but model_transaction_policy.decoupled is "
                       f"{str(_decoupled(cfg)).lower()}", field=f'parameters["{key}"]',
                       hint=f"make them agree: streaming needs both {key}: true and decoupled: true")


@rule("TK504", WARNING, "streaming input on a model that is not decoupled", family=FAMILY)
def streaming_needs_decoupled(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if _decoupled(cfg):
        return
    for i, t in enumerate(cfg.input):
        if t.name.lower() in ("stream", "streaming") and t.data_type == mc.TYPE_BOOL:
            ctx.report(m, f"input {t.name!r} asks for streaming, but the model is not decoupled, so it can "
                       "send only one response per request", field=f"input[{i}]",
                       hint="add model_transaction_policy { decoupled: true }")


@rule("TK505", WARNING, "ensemble and its decoupled steps disagree", family=FAMILY)
def ensemble_decoupled(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.platform != "ensemble":
        return
    decoupled_steps = []
    for step in cfg.ensemble_scheduling.step:
        info = ctx.models.get(step.model_name)
        if info is not None and info.config is not None and _decoupled(info.config):
            decoupled_steps.append(step.model_name)
    if decoupled_steps and not _decoupled(cfg):
        # Triton 2.51 loads this; the ensemble then fails at request time when a step streams.
        ctx.report(m, f"step model(s) {decoupled_steps} are decoupled but the ensemble is not, so a streamed "
                   "response cannot pass through it", field="name",
                   hint="add model_transaction_policy { decoupled: true } to the ensemble")
    if cfg.response_cache.enable and decoupled_steps:
        ctx.report(m, f"response_cache on an ensemble with decoupled step(s) {decoupled_steps}",
                   field="response_cache.enable", hint="disable response_cache on this ensemble")
