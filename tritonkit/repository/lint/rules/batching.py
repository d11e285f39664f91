"""TK1xx — batching: max_batch_size, the dynamic batcher's window, preferred sizes,
priority levels and queue policies."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, INFO, WARNING, LintContext, ModelInfo, rule
from tritonkit.repository.lint.rules.trtllm import is_engine_model
from tritonkit.repository.spec import WINDOW_RANGE_US
from tritonkit.repository.units import format_duration_us

FAMILY = "batching"

WINDOW_MIN_US, WINDOW_MAX_US = WINDOW_RANGE_US


@rule("TK101", ERROR, "preferred_batch_size must be > 0 and <= max_batch_size", family=FAMILY)
def preferred_sizes(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    sched = cfg.WhichOneof("scheduling_choice")
    if sched == "dynamic_batching":
        sizes, base = list(cfg.dynamic_batching.preferred_batch_size), "dynamic_batching.preferred_batch_size"
    elif sched == "sequence_batching" and cfg.sequence_batching.HasField("oldest"):
        sizes, base = list(cfg.sequence_batching.oldest.preferred_batch_size), \
            "sequence_batching.oldest.preferred_batch_size"
    else:
        return
    for i, size in enumerate(sizes):
        if size <= 0:
            ctx.report(m, f"preferred_batch_size {size} must be positive", field=f"{base}[{i}]",
                       hint="remove it; Triton advises leaving preferred_batch_size unset unless measured")
        elif size > cfg.max_batch_size:
            # Triton refuses this for max_batch_size 0 too: a model that does not batch has no sizes to prefer.
            ctx.report(m, f"preferred_batch_size {size} exceeds max_batch_size {cfg.max_batch_size}",
                       field=f"{base}[{i}]", hint=f"use sizes <= {cfg.max_batch_size}, or drop preferred_batch_size"
                       if cfg.max_batch_size > 0 else "drop preferred_batch_size, or set max_batch_size > 0")


@rule("TK102", ERROR, "max_batch_size is negative", family=FAMILY)
def max_batch_negative(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.max_batch_size < 0:
        ctx.report(m, f"max_batch_size {cfg.max_batch_size} is negative", field="max_batch_size",
                   hint="use 0 for a model without a batch dimension, or the largest batch it accepts")


@rule("TK103", WARNING, "dynamic batching on a model that does not batch", family=FAMILY)
def dynamic_without_batching(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.HasField("dynamic_batching") and cfg.max_batch_size == 0:
        ctx.report(m, "dynamic_batching is set but max_batch_size is 0, so no requests are ever merged",
                   field="dynamic_batching", hint="set max_batch_size > 0 (and a batch dimension), or drop dynamic_batching")


@rule("TK104", ERROR, "priority levels out of range", family=FAMILY, needs_field="dynamic_batching")
def priority_levels(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    db = cfg.dynamic_batching
    levels = db.priority_levels
    if levels == 0:
        # Triton 2.51 loads these and ignores them; the author clearly meant priorities to work.
        if db.default_priority_level != 0:
            ctx.report(m, f"default_priority_level {db.default_priority_level} set but priority_levels is 0, "
                       "so it is ignored", field="dynamic_batching.default_priority_level", severity=WARNING,
                       hint="set priority_levels, or drop default_priority_level")
        for key in sorted(db.priority_queue_policy):
            ctx.report(m, f"priority_queue_policy for level {key} but priority_levels is 0, so it is ignored",
                       field="dynamic_batching.priority_queue_policy", severity=WARNING,
                       hint="set priority_levels, or use default_queue_policy")
        return
    if not 1 <= db.default_priority_level <= levels:
        ctx.report(m, f"default_priority_level {db.default_priority_level} is outside 1..{levels}",
                   field="dynamic_batching.default_priority_level",
                   hint=f"priority 1 is highest; set default_priority_level between 1 and {levels}")
    for key in sorted(db.priority_queue_policy):
        if not 1 <= key <= levels:
            ctx.report(m, f"priority_queue_policy key {key} is outside 1..{levels}",
                       field="dynamic_batching.priority_queue_policy",
                       hint=f"use priority levels 1..{levels} as keys")


def _schedules_per_token(cfg: mc.ModelConfig) -> bool:
    """A TensorRT-LLM engine model, or a tokenizer step of its pipeline (it reads ``tokenizer_dir``).

    The backend's own templates leave their queue delay at 0: the in-flight batcher schedules a new
    step every token, so a window in front of it, or of the per-token detokeniser, only adds latency.
    """
    return is_engine_model(cfg) or "tokenizer_dir" in cfg.parameters


@rule("TK105", WARNING, "dynamic batching window outside 5-20 ms", family=FAMILY)
def window_range(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if not cfg.HasField("dynamic_batching") or cfg.max_batch_size == 0:
        return
    us = cfg.dynamic_batching.max_queue_delay_microseconds
    if us < 1000 and us != 0:
        return  # TK106 says why more precisely
    if us == 0 and _schedules_per_token(cfg):
        return
    if not WINDOW_MIN_US <= us <= WINDOW_MAX_US:
        what = "0 (no waiting: batches only form under backlog)" if us == 0 else format_duration_us(us)
        ctx.report(m, f"max_queue_delay_microseconds is {what}; the rule-of-thumb window is 5-20 ms",
                   field="dynamic_batching.max_queue_delay_microseconds",
                   hint="use 5000-20000 us; longer windows add latency at low traffic, shorter ones batch little")


@rule("TK106", WARNING, "window looks like milliseconds written as microseconds", family=FAMILY)
def window_units(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    fields = []
    if cfg.HasField("dynamic_batching"):
        fields.append(("dynamic_batching.max_queue_delay_microseconds",
                       cfg.dynamic_batching.max_queue_delay_microseconds))
        policies = [("dynamic_batching.default_queue_policy", cfg.dynamic_batching.default_queue_policy)]
        policies += [(f"dynamic_batching.priority_queue_policy[{k}]", v)
                     for k, v in sorted(cfg.dynamic_batching.priority_queue_policy.items())]
        for base, policy in policies:
            fields.append((f"{base}.default_timeout_microseconds", policy.default_timeout_microseconds))
    if cfg.HasField("sequence_batching"):
        sb = cfg.sequence_batching
        strategy = sb.WhichOneof("strategy_choice")
        if strategy is not None:
            fields.append((f"sequence_batching.{strategy}.max_queue_delay_microseconds",
                           getattr(sb, strategy).max_queue_delay_microseconds))
    for path, us in fields:
        if 0 < us < 1000:
            ctx.report(m, f"{path.rsplit('.', 1)[-1]} is {us} us ({us / 1000:g} ms): that looks like {us} ms "
                       "written as microseconds", field=path,
                       hint=f"if {us} ms was meant, write {us * 1000}; tritonkit specs take units (\"{us}ms\")")


@rule("TK107", INFO, "preferred_batch_size set", family=FAMILY)
def preferred_set(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.HasField("dynamic_batching") and cfg.dynamic_batching.preferred_batch_size:
        ctx.report(m, "preferred_batch_size is set; Triton advises leaving it unset unless a measurement shows "
                   "a size runs faster", field="dynamic_batching.preferred_batch_size",
                   hint="drop it unless perf results justify it")


@rule("TK108", INFO, "batching model without dynamic batching", family=FAMILY)
def batching_without_batcher(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.max_batch_size > 0 and cfg.WhichOneof("scheduling_choice") is None and cfg.platform != "ensemble":
        ctx.report(m, f"max_batch_size is {cfg.max_batch_size} but no scheduler merges requests",
                   field="max_batch_size",
                   hint="add dynamic_batching { max_queue_delay_microseconds: 5000 } (window 5-20 ms)")


@rule("TK109", INFO, "queue is unbounded", family=FAMILY)
def unbounded_queue(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.HasField("dynamic_batching") and cfg.max_batch_size > 0:
        policy = cfg.dynamic_batching.default_queue_policy
        if policy.max_queue_size == 0:
            ctx.report(m, "default_queue_policy.max_queue_size is 0 (unbounded): under overload the queue grows "
                       "until clients time out and retry", field="dynamic_batching",
                       hint="set default_queue_policy { max_queue_size: N } so overload is rejected early")


@rule("TK110", INFO, "timeout override allowed without a default timeout", family=FAMILY, needs_field="dynamic_batching")
def queue_timeout(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    db = cfg.dynamic_batching
    policies = [("dynamic_batching.default_queue_policy", db.default_queue_policy)]
    policies += [(f"dynamic_batching.priority_queue_policy[{k}]", v) for k, v in sorted(db.priority_queue_policy.items())]
    for base, policy in policies:
        if policy.allow_timeout_override and policy.default_timeout_microseconds == 0:
            ctx.report(m, "allow_timeout_override without a default_timeout_microseconds: requests without "
                       "their own timeout never time out", field=f"{base}.allow_timeout_override",
                       hint="set default_timeout_microseconds as well")


@rule("TK111", ERROR, "preserve_ordering with more than one priority level", family=FAMILY)
def preserve_ordering_priorities(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    db = cfg.dynamic_batching
    if cfg.HasField("dynamic_batching") and db.preserve_ordering and db.priority_levels > 1:
        ctx.report(m, f"preserve_ordering is true with {db.priority_levels} priority levels; "
                   "responses cannot keep arrival order and honour priorities at once",
                   field="dynamic_batching.preserve_ordering",
                   hint="drop preserve_ordering, or use a single priority level")


@rule("TK112", ERROR, "preserve_ordering with a DELAY timeout action", family=FAMILY)
def preserve_ordering_delay(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    db = cfg.dynamic_batching
    if not cfg.HasField("dynamic_batching") or not db.preserve_ordering:
        return
    policies = [("dynamic_batching.default_queue_policy", db.default_queue_policy)]
    policies += [(f"dynamic_batching.priority_queue_policy[{k}]", v) for k, v in sorted(db.priority_queue_policy.items())]
    for base, policy in policies:
        if policy.default_timeout_microseconds != 0 and policy.timeout_action == mc.ModelQueuePolicy.DELAY:
            # A delayed request would be answered after later ones, which preserve_ordering forbids.
            ctx.report(m, "preserve_ordering is true but a timed-out request is DELAYed behind later ones",
                       field=f"{base}.timeout_action",
                       hint="use timeout_action: REJECT, drop default_timeout_microseconds, or drop preserve_ordering")
