"""One step judged on its own, as a ladder climbs: its status as it finishes, and the stop rule.

Both ask :func:`~tritonkit.perf.judge.verdict.evaluate` about that one step, with the same
:class:`~tritonkit.perf.judge.criteria.JudgeSettings` the whole ladder is judged with afterwards,
so what a step showed as it finished and what the verdict says of it cannot differ.
"""

from __future__ import annotations

from collections.abc import Callable

from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.judge.sla import SLA
from tritonkit.perf.judge.verdict import StepVerdict, evaluate, measurement_from_step
from tritonkit.perf.measure.result import StepResult

__all__ = ["judge_step", "ladder_check"]


def judge_step(sla: SLA | None, step: StepResult, judging: JudgeSettings | None = None, *,
               batch_size: int = 1) -> StepVerdict | None:
    """``step`` judged on its own against ``sla`` and ``judging`` (``None`` without an SLA).
    ``batch_size``: the requests' batch size (the offered rate counts requests, throughput inferences)."""
    if sla is None:
        return None
    measurement = measurement_from_step(step, batch_size=batch_size)
    return evaluate(sla, [measurement], load_kind=step.load_mode, judging=judging).steps[0]


def ladder_check(sla: SLA, judging: JudgeSettings | None = None, *,
                 batch_size: int = 1) -> Callable[[StepResult], bool]:
    """The ladder's stop rule: a step *breaks* the SLA when a limit that load makes worse breaks.

    A throughput floor is not such a limit: low loads miss it by design, and stopping there
    would end the ladder before it reached the knee. Latency, queue and error limits only get
    worse as the load rises, and so do the criteria of ``judging`` (an open loop that did not
    carry its rate carries no higher one; memory grows with the batches in flight), so two
    breaks of those mean the knee is behind us. Only a clear break counts (a limit inside the
    step's noise does not: measured again it could hold), and a noisy step is judged like any
    other. A step perf_analyzer could not call stable and that has no figures breaks only through
    those criteria (a fact); otherwise it does not count either way.
    """

    def check(step: StepResult) -> bool:
        judged = judge_step(sla, step, judging, batch_size=batch_size)
        if judged is None:
            return True
        broke_upper = any(c.status == "fail" and c.constraint.spec.bound == "upper" for c in judged.checks)
        return not (broke_upper or judged.misses)

    return check
