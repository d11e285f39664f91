"""Compare two LLM results (a baseline and a new run) and keep timestamped LLM baselines.

Steps are paired by load (``concurrency 4`` with ``concurrency 4``, ``spike`` with ``spike``), and
each compared metric (by default TTFT p99 and ITL p99, which must not rise, output token throughput
and goodput, which must not fall; keyed by the metric registry's names, which also say which way is
worse) is judged by the classic gate's rule
(:func:`~tritonkit.perf.judge.compare.judge_change`) on the **interval of its change**: each run's
95 % bootstrap interval of the figure over its requests (``LLMMetrics.intervals``), widened by the
spread between single runs of one build that one run's requests cannot show, gives the 95 %
interval of ``new / base − 1`` (:func:`~tritonkit.perf.measure.windows.change_interval_of_bands`);
a step combined from repeated runs (``--repeat``) already has its interval over the runs and is not widened.
That spread is ``run_noise`` for a rate (tokens/s, goodput; ``perf compare --run-noise``) and
``tail_run_noise`` for a latency percentile (``--tail-run-noise``, :data:`DEFAULT_TAIL_RUN_NOISE`):
a tail moves more between fresh-server runs than a rate does, and more than one run's bootstrap
shows — ``benchmarks/llm_gate_truth.py`` measured, over 6 runs of 400 requests on the reference
engine, TTFT p99 and ITL p99 spreading 7.7 % and 7.8 % (one run's own interval: ±9.5 %, ±1.6 %)
and tokens/s 1.9 %. A run on an OpenAI-compatible endpoint (:func:`run_kind`: a real engine behind
HTTP) spreads far more between runs: unless a spread is named, such runs are widened by
:data:`ENGINE_RUN_NOISE` and :data:`ENGINE_TAIL_RUN_NOISE` (``benchmarks/llm_gate_vllm.py`` on vLLM),
so that one run of each shows a change within that spread as inside the noise, saying to repeat both
runs (``--repeat 3``) or to name the noise measured. So:

* **regression** — worse past the limit, and the interval excludes no change;
* **no regression** — the whole interval on the right side of the limit;
* **inside the noise** — anything else (a tail percentile of a few dozen requests spreads widely:
  send more requests per level, ``--requests``).

A tail percentile of too few requests has no upper bound to judge with: the distribution-free 95 %
interval of a p99 needs ``n·q + 1.96·√(n·q·(1−q)) ≤ n`` requests (381 for a p99, 73 for a p95),
and below that one slow request more in the next run can move it any distance (two fresh-server
runs of the reference engine, 64 requests each, gave a TTFT p99 of 49.6 and 26.4 ms while each
run's own bootstrap said ±15 %): such a row is inside the noise and says how many requests it needs.
A metric without an interval (one the run kept none for, or a result written by hand) is judged on
its two figures alone. A step the baseline measured and the new run did not, or a figure that is
not a finite number, is a regression whatever the noise. Exit codes as the classic gate's: 0, 1, 3.
Pure functions; the baseline files are ``llm_result.json`` copies.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from tritonkit._fs import is_regular_file, read_json
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.baselines import baselines_in, latest_baseline, save_baseline
from tritonkit.perf.judge.compare import (
    DEFAULT_RUN_NOISE,
    Outcome,
    check_run_noise,
    judge_change,
    outcome_exit_code,
    worst_outcome,
)
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.measure.windows import change_interval_of_bands, quantile_ranks
from tritonkit.perf.metric_registry import METRICS, Metric

__all__ = ["DEFAULT_TAIL_RUN_NOISE", "ENGINE_RUN_NOISE", "ENGINE_TAIL_RUN_NOISE", "LLM_COMPARE_LIMITS", "LLMComparison",
           "LLMComparisonRow", "RunKind", "compare_llm_files", "compare_llm_results", "default_noise", "find_llm_result",
           "latest_llm_baseline", "llm_compare_limits", "requests_for_tail", "run_kind", "save_llm_baseline"]

#: The spread (coefficient of variation) between single fresh-server runs of one build assumed for a
#: latency percentile (TTFT, ITL, request latency): ``benchmarks/llm_gate_truth.py`` measured 7.7 %
#: (TTFT p99) and 7.8 % (ITL p99) over 6 runs of 400 requests on the CPU reference engine
#: (2026-12-02), rounded up for what six runs can say; measure yours with that benchmark.
DEFAULT_TAIL_RUN_NOISE = 0.10

#: The spread between single runs assumed for a run on an OpenAI-compatible endpoint (a real engine
#: behind HTTP: continuous batching, a scheduler, an API server sharing the machine) when no noise is
#: named: its rates (tokens/s, goodput) and its latency percentiles. ``benchmarks/llm_gate_vllm.py`` on
#: vLLM's CPU build serving a tiny Llama, on 2 cores shared with other work (2026-12-06), measured the
#: coefficients of variation over 6 runs at concurrency 1 and 4: with 400 requests a run, tokens/s
#: 20.1 % and 17.2 %, TTFT p99 58.5 % and 25.7 %, ITL p99 34.8 % and 20.5 %; with 200, tokens/s 12.5 %
#: and 16.0 % (an earlier 8 × 400: tokens/s 22 %, TTFT p99 66 %, ITL p99 63 % at concurrency 1).
#: Rounded up to 5 %: 25 % and 65 %, which raised no false alarm in 60 pairs of identical runs where
#: 20 % / 65 % raised 4 (docs/noise.md has the figures).
ENGINE_RUN_NOISE = 0.25
ENGINE_TAIL_RUN_NOISE = 0.65

#: Which kind of run a result is: over Triton's own protocol, or on an OpenAI-compatible endpoint.
RunKind = Literal["triton", "openai"]

#: The metrics an LLM run is held to against its baseline (metric registry names), each with the
#: fraction of its baseline value it may move the wrong way by (the registry says which way that is).
LLM_COMPARE_LIMITS: Mapping[str, float] = MappingProxyType(
    {"ttft_p99": 0.10, "itl_p99": 0.10, "tokens_per_s": 0.05, "goodput": 0.05}
)


def llm_compare_limits(
    *, max_rise: float, max_drop: float, metrics: Iterable[str] = LLM_COMPARE_LIMITS
) -> dict[str, float]:
    """``perf compare``'s two limits spread over ``metrics``: ``max_rise`` for each a rise makes
    worse (TTFT, ITL), ``max_drop`` for each a drop does (token throughput, goodput)."""
    return {name: max_rise if _metric(name).worse_when == "rise" else max_drop for name in metrics}


def _metric(name: str) -> Metric:
    found = METRICS.get(name)
    if found is None or "llm" not in found.modes:
        known = ", ".join(m.name for m in METRICS.values() if "llm" in m.modes)
        raise ConfigError(f"no LLM metric {name!r} to compare", hint=f"name one of {known}")
    return found


def run_kind(result: LLMResult) -> RunKind:
    """``"openai"`` for a run on an OpenAI-compatible endpoint (``perf run --llm --protocol openai``: a
    real engine behind HTTP), ``"triton"`` for one over Triton's gRPC stream; read from the request
    layout the result records (:attr:`~tritonkit.perf.llm.result.LLMResult.over_openai`)."""
    return "openai" if result.over_openai else "triton"


def default_noise(*results: LLMResult) -> tuple[float, float]:
    """The spread between single runs (rates, latency percentiles) assumed where none is named: an
    engine's (:data:`ENGINE_RUN_NOISE`, :data:`ENGINE_TAIL_RUN_NOISE`) when any of ``results`` ran on
    an OpenAI endpoint, else the reference engine's (``DEFAULT_RUN_NOISE``, :data:`DEFAULT_TAIL_RUN_NOISE`)."""
    if any(run_kind(r) == "openai" for r in results):
        return ENGINE_RUN_NOISE, ENGINE_TAIL_RUN_NOISE
    return DEFAULT_RUN_NOISE, DEFAULT_TAIL_RUN_NOISE


@dataclass(frozen=True)
class LLMComparisonRow:
    """One metric of one step, base against new; ``change`` as a fraction of the base.

    ``change_interval``: the 95 % interval of the change (``None``: judged on the figures alone);
    ``problem``: why the row regressed; ``unsure``: why it lies inside the noise.
    """

    step: str
    metric: str
    base: float | None
    new: float | None
    change: float | None
    limit: float
    worse_when: str  # "rise" or "drop"
    change_interval: tuple[float, float] | None = None
    problem: str | None = None
    unsure: str | None = None

    @property
    def regressed(self) -> bool:
        """Whether this row is a regression (it then says why, in ``problem``)."""
        return self.problem is not None

    @property
    def outcome(self) -> Outcome:
        """``regression``, ``inside the noise`` or ``no regression``."""
        return "regression" if self.regressed else ("inside the noise" if self.unsure else "no regression")

    def to_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["change_interval"] = None if self.change_interval is None else list(self.change_interval)
        data["regressed"] = self.regressed
        data["outcome"] = self.outcome
        return data


@dataclass(frozen=True)
class LLMComparison:
    """Every compared row and the verdict: no regression → exit 0, a regression → 1, inside the noise → 3."""

    rows: tuple[LLMComparisonRow, ...]
    #: The spread between single runs each side's intervals were widened by: rates, latency percentiles.
    run_noise: float = 0.0
    tail_run_noise: float = 0.0
    #: ``"openai"`` when either run was on an OpenAI endpoint (:func:`run_kind`); whether the caller
    #: named both spreads (``False``: one was the kind's default, :func:`default_noise`); whether a
    #: side was a single run (one not combined from ``--repeat``, so widened by the spread).
    kind: RunKind = "triton"
    noise_named: bool = True
    single_runs: bool = True
    #: The engine's own figures where both runs have them, not gated: ``(step, figure, base, new)``
    #: (``ttft_ms`` / ``itl_ms`` means, the prefix-cache hit rate): was it the engine that moved, or the client?
    engine: tuple[tuple[str, str, float, float], ...] = ()

    @property
    def regressions(self) -> tuple[LLMComparisonRow, ...]:
        return tuple(r for r in self.rows if r.regressed)

    @property
    def outcome(self) -> Outcome:
        """The worst row's outcome."""
        return worst_outcome(r.outcome for r in self.rows)

    @property
    def passed(self) -> bool:
        """No regression and nothing inside the noise: what may become the next baseline."""
        return self.outcome == "no regression"

    @property
    def exit_code(self) -> int:
        return outcome_exit_code(self.outcome)

    def summary(self) -> str:
        how = "95% intervals of the change" + (
            f" with {self.run_noise:.1%} between single runs ({self.tail_run_noise:.1%} for latency percentiles)"
            if self.run_noise or self.tail_run_noise else "")
        if self.outcome == "no regression":
            return f"no regression in {len(self.rows)} compared LLM metric(s) ({how})"
        if self.outcome == "regression":
            worst = ", ".join(
                f"{r.step} {r.metric} {'unmeasured' if r.change is None else f'{r.change * 100:+.1f}%'}"
                for r in self.regressions
            )
            return f"REGRESSION: {worst} ({how})"
        unsure = ", ".join(f"{r.step} {r.metric}" + ("" if r.change is None else f" {r.change * 100:+.1f}%")
                           + (" past its limit" if _past_limit(r) else "")
                           for r in self.rows if r.outcome == "inside the noise")
        return f"INSIDE THE NOISE: {unsure} ({how}): the change could be on either side of the limit; {self.advice()}"

    def advice(self) -> str:
        """What to do about a comparison inside the noise."""
        if self.kind == "openai" and not self.noise_named and self.single_runs:
            return (f"single runs on an OpenAI endpoint's engine spread this far between runs of one build "
                    f"(the default for such runs: {self.run_noise:.0%} rates, {self.tail_run_noise:.0%} "
                    "percentiles, measured on vLLM), so one run each cannot tell; repeat both runs "
                    "(perf run --llm --repeat 3) or name the noise you measured (--run-noise, --tail-run-noise)")
        return "send more requests per level (--requests) or repeat both runs"

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "outcome": self.outcome, "exit_code": self.exit_code,
                "run_noise": self.run_noise, "tail_run_noise": self.tail_run_noise, "kind": self.kind,
                "noise_named": self.noise_named, "single_runs": self.single_runs, "summary": self.summary(),
                "rows": [r.to_dict() for r in self.rows], "engine": [list(e) for e in self.engine]}


def _past_limit(row: LLMComparisonRow) -> bool:
    """Whether a row's change is worse than its limit (a regression, were it not for the noise)."""
    if row.change is None:
        return False
    return row.change > row.limit if row.worse_when == "rise" else row.change < -row.limit


def _label(step: LLMStep) -> str:
    return f"concurrency {step.load_value:g}" if step.load_mode == "concurrency" else step.load_mode


def _values(step: LLMStep | None) -> dict[str, float | None]:
    if step is None or step.metrics is None:
        return {}
    return step.metrics.sla_values()


def _bands(step: LLMStep | None) -> dict[str, tuple[float, float]]:
    if step is None or step.metrics is None:
        return {}
    return step.metrics.sla_intervals()


_TAIL = re.compile(r"^(ttft|itl|latency)_p(\d+)$")


def _upper_known(count: int, q: float) -> bool:
    """Whether the 95 % interval of the ``q`` quantile of ``count`` values has a known upper bound:
    its upper rank (the order-statistic rule classic steps' latencies use) lies within the values."""
    return quantile_ranks(count, q)[1] <= count - 1


def requests_for_tail(q: float) -> int:
    """The fewest requests whose ``q`` quantile has a known 95 % upper bound (381 for a p99)."""
    count = 1
    while not _upper_known(count, q):
        count += 1
    return count


def _open_tail(step: LLMStep | None, metric: str) -> tuple[int, int] | None:
    """(requests, requests needed) when ``metric`` is a percentile too far in the tail of ``step``'s
    requests for its upper bound to be known; ``None`` otherwise."""
    found = _TAIL.match(metric)
    if found is None or step is None or step.metrics is None:
        return None
    distribution = getattr(step.metrics, f"{found[1]}_ms", None)
    q = int(found[2]) / 100.0
    if distribution is None or not 0 < q < 1 or _upper_known(distribution.count, q):
        return None
    return distribution.count, requests_for_tail(q)


def _between_runs(step: LLMStep | None, noise: float) -> float:
    """The spread between runs a side is widened by: none for a step combined from repeated runs
    (``perf run --llm --repeat N``: its intervals are already over the runs), else ``noise``."""
    if step is not None and sum(r.measured for r in step.runs) >= 2 and step.failures.total == 0:
        return 0.0
    return noise


def _judged(label: str, metric: str, base: float, new: float | None, limit: float, worse_when: str,
            bands: tuple[tuple[float, float] | None, tuple[float, float] | None], run_noise: tuple[float, float],
            open_tail: tuple[int, int] | None = None) -> LLMComparisonRow:
    """One metric of one step judged: unmeasured or not finite is a regression, a base of zero
    for a figure that must not fall leaves nothing to lose, a tail percentile of too few
    requests (``open_tail``: the fewer count and the count needed) is inside the noise, else
    :func:`judge_change`."""
    if new is None or not (math.isfinite(base) and math.isfinite(new)):
        why = f"{metric} {'unmeasured' if new is None else 'not a finite number'} (base {base:.4g})"
        return LLMComparisonRow(label, metric, base, new, None, limit, worse_when, problem=why)
    if base == 0:
        lost = worse_when == "rise" and new > 0
        return LLMComparisonRow(label, metric, base, new, None, limit, worse_when,
                                problem=f"{metric} rose from 0 to {new:.4g}" if lost else None)
    change = (new - base) / base
    if open_tail is not None:
        count, needed = open_tail
        return LLMComparisonRow(label, metric, base, new, change, limit, worse_when, unsure=(
            f"{metric} {change * 100:+.1f}% (limit {limit * 100:g}%): a percentile of {count} requests has no "
            f"upper bound below {needed}; send at least {needed} requests per level (--requests)"))
    band = change_interval_of_bands(base, new, bands[0], bands[1], between_runs=run_noise)
    problem, unsure = judge_change(metric, change, band, limit, higher_is_better=worse_when == "drop")
    return LLMComparisonRow(label, metric, base, new, change, limit, worse_when,
                            change_interval=band, problem=problem, unsure=unsure)


def compare_llm_results(base: LLMResult, new: LLMResult, *, limits: Mapping[str, float] = LLM_COMPARE_LIMITS,
                        run_noise: float | None = None, tail_run_noise: float | None = None) -> LLMComparison:
    """A row per step and metric of ``limits`` (registry name → the fraction of the base it may
    worsen by; default :data:`LLM_COMPARE_LIMITS`), in that order; see :func:`llm_compare_limits`
    and the module docstring for the rule. ``run_noise``: the spread (a coefficient of variation)
    between single runs of one build each side's rates are widened by, ``tail_run_noise`` its
    latency percentiles (0: the requests alone); ``None``: the default for the kind of runs
    compared (:func:`default_noise`: an OpenAI endpoint's engine spreads far more than the reference
    engine).

    An unknown metric name, or a spread outside [0, 1), raises ``ConfigError``.
    """
    named = run_noise is not None and tail_run_noise is not None
    kind_noise = default_noise(base, new)
    run_noise = kind_noise[0] if run_noise is None else run_noise
    tail_run_noise = kind_noise[1] if tail_run_noise is None else tail_run_noise
    check_run_noise(run_noise)
    check_run_noise(tail_run_noise, option="--tail-run-noise")
    checks = [(name, limit, _metric(name).worse_when) for name, limit in limits.items()]
    new_steps = {(s.load_mode, s.load_value): s for s in new.steps}
    rows: list[LLMComparisonRow] = []
    for base_step in base.steps:
        new_step = new_steps.get((base_step.load_mode, base_step.load_value))
        before, after = _values(base_step), _values(new_step)
        base_bands, new_bands = _bands(base_step), _bands(new_step)
        for metric, limit, worse_when in checks:
            b = before.get(metric)
            if b is None:
                continue  # the baseline did not measure it: nothing to hold the new run to
            tails = [t for t in (_open_tail(base_step, metric), _open_tail(new_step, metric)) if t is not None]
            noise = tail_run_noise if _TAIL.match(metric) else run_noise
            rows.append(_judged(_label(base_step), metric, b, after.get(metric), limit, worse_when,
                                (base_bands.get(metric), new_bands.get(metric)),
                                (_between_runs(base_step, noise), _between_runs(new_step, noise)),
                                open_tail=min(tails) if tails else None))
    single = any(_between_runs(step, 1.0) > 0 for step in (*base.steps, *new.steps))
    engine = tuple((_label(b), key, x, y) for b in base.steps if (n := new_steps.get((b.load_mode, b.load_value)))
                   for key in ("ttft_ms", "itl_ms", "prefix_cache_hit_rate")
                   if (x := _engine(b, key)) is not None and (y := _engine(n, key)) is not None)
    kind: RunKind = "openai" if "openai" in (run_kind(base), run_kind(new)) else "triton"
    return LLMComparison(tuple(rows), run_noise=run_noise, tail_run_noise=tail_run_noise, kind=kind,
                         noise_named=named, single_runs=single, engine=engine)


def _engine(step: LLMStep, key: str) -> float | None:
    found = step.engine.get(key)
    return found.get("mean") if isinstance(found, Mapping) else found if isinstance(found, float) else None


def save_llm_baseline(result: LLMResult, root: str | Path) -> Path:
    """Keep ``result`` as an LLM baseline: ``<root>/<model>/llm/<UTC start>.json``; return the path."""
    return save_baseline(result, root)


def latest_llm_baseline(model: str, root: str | Path) -> Path | None:
    """The newest LLM baseline kept for ``model``, if any (never a classic one)."""
    return latest_baseline(model, root, kind="llm")


def find_llm_result(path: Path) -> Path | None:
    """The LLM result ``path`` names: the file itself, a run folder's ``llm_result.json``, or the
    newest LLM baseline in a model's baseline folder (or its ``llm/``); ``None`` when it holds none."""
    if is_regular_file(path):
        try:
            data = read_json(path, what="LLM result", hint="pass an llm_result.json")
        except ConfigError:
            return None
        return path if isinstance(data, dict) and data.get("kind") == "llm" else None
    if is_regular_file(path / "llm_result.json"):
        return path / "llm_result.json"
    found = baselines_in(path, "llm")
    return found[-1] if found else None


def compare_llm_files(
    base: Path, new: Path, *, max_rise: float, max_drop: float, baseline_root: str | Path | None = None,
    run_noise: float | None = None, tail_run_noise: float | None = None,
) -> tuple[LLMComparison, Path, Path, Path | None]:
    """``perf compare`` on two stored LLM results (files, run folders or baseline folders).

    TTFT / ITL p99 may rise by ``max_rise``, tokens/s and goodput fall by ``max_drop``, each judged
    on the interval of its change (``run_noise``, ``tail_run_noise``: see :func:`compare_llm_results`). With
    ``baseline_root`` a new run with no regression (and nothing inside the noise) is kept as the
    newest LLM baseline. Returns the comparison, the two files read, and the baseline written
    (``None`` when none was).
    """
    base_path, new_path = find_llm_result(base), find_llm_result(new)
    if base_path is None or new_path is None:
        missing = base if base_path is None else new
        raise ConfigError(f"{missing} holds no LLM result (llm_result.json)",
                          hint="compare two LLM runs, or two classic runs, not one of each")
    base_result, new_result = LLMResult.load(base_path), LLMResult.load(new_path)
    comparison = compare_llm_results(base_result, new_result,
                                     limits=llm_compare_limits(max_rise=max_rise, max_drop=max_drop),
                                     run_noise=run_noise, tail_run_noise=tail_run_noise)
    saved = save_llm_baseline(new_result, baseline_root) if baseline_root is not None and comparison.passed else None
    return comparison, base_path, new_path, saved
