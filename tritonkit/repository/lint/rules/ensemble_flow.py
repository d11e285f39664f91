"""TK409 — an ensemble step fed by more than one decoupled stream.

Triton core's ``ValidateEnsembleConfig`` (``src/ensemble_scheduler/ensemble_utils.cc``, read at
r24.10 and r26.06) walks the ensemble's tensors from its inputs and labels each with the
decoupled stream it comes from: the ensemble's inputs are stream 0, every output of a decoupled
step starts a stream of its own, a non-decoupled step passes its inputs' stream on. A step whose
inputs come from different streams is refused: "step of model '...' receives inputs originated
from different decoupled models" — a decoupled model may send any number of responses, so
tensors from two streams (or from one stream and the request itself) cannot be paired. An
ensemble with a decoupled step is itself decoupled; the server sets that on its config.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, LintContext, ModelInfo, rule

__all__ = ["is_decoupled", "mixed_stream_steps"]


def is_decoupled(ctx: LintContext, name: str, _seen: frozenset[str] = frozenset()) -> bool:
    """Whether model ``name`` of the repository answers as decoupled: its transaction policy, or for an
    ensemble any decoupled step (as the server sets it). Unknown models and cycles count as not decoupled."""
    info = ctx.models.get(name)
    cfg = info.config if info is not None else None
    if cfg is None or name in _seen:
        return False
    if cfg.platform == "ensemble":
        return any(is_decoupled(ctx, s.model_name, _seen | {name}) for s in cfg.ensemble_scheduling.step)
    return bool(cfg.model_transaction_policy.decoupled)


def mixed_stream_steps(ctx: LintContext, cfg: mc.ModelConfig) -> list[tuple[int, dict[str, int]]]:
    """``(step index, {input tensor: stream})`` of every step whose inputs come from different streams,
    in the order the server meets them (steps ready once every tensor they read is labelled)."""
    streams: dict[str, int] = {t.name: 0 for t in cfg.input}
    steps = list(cfg.ensemble_scheduling.step)
    done: set[int] = set()
    mixed: list[tuple[int, dict[str, int]]] = []
    next_stream = 0
    progress = True
    while progress:
        progress = False
        for i, step in enumerate(steps):
            reads = list(step.input_map.values())
            if i in done or not reads or any(t not in streams for t in reads):
                continue
            done.add(i)
            progress = True
            seen = {t: streams[t] for t in reads}
            if len(set(seen.values())) > 1:
                mixed.append((i, seen))
                return mixed  # the server stops at the first
            if is_decoupled(ctx, step.model_name):
                next_stream += 1
                stream = next_stream
            else:
                stream = next(iter(seen.values()))
            for tensor in step.output_map.values():
                streams.setdefault(tensor, stream)
    return mixed


def _stream_name(stream: int) -> str:
    return "the ensemble's request" if stream == 0 else f"decoupled stream {stream}"


@rule("TK409", ERROR, "ensemble step reads tensors from different decoupled streams", family="ensemble")
def decoupled_streams(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.platform != "ensemble":
        return
    for i, seen in mixed_stream_steps(ctx, cfg):
        step = cfg.ensemble_scheduling.step[i]
        sources = ", ".join(f"{tensor} ({_stream_name(stream)})" for tensor, stream in sorted(seen.items()))
        ctx.report(m, f"step {i} ({step.model_name!r}) reads tensors from different decoupled streams: {sources}; "
                   f"the server refuses the ensemble ('receives inputs originated from different decoupled models'; "
                   "core src/ensemble_scheduler/ensemble_utils.cc ValidateEnsembleConfig @ r24.10)",
                   field=f"ensemble_scheduling.step[{i}].input_map",
                   hint="feed the step from one stream only: pass what it needs from the request through the "
                        "decoupled model as an output, or run that model outside the ensemble")
