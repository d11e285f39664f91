"""Which variant to measure next, which ones cannot win, and which one did: pure functions.

Nothing here starts a server or perf_analyzer. :func:`search` is handed a ``measure`` callable
(variant → :class:`VariantOutcome`) and a ``confirm`` callable (outcome → one more
:class:`StepPoint` at its best load), so the same logic runs against a live server or over
stored results.

How the search decides:

* **Cost.** The server's statistics give the mean time of one model execution per batch size.
  No execution is shorter than the cheapest one measured (a larger batch never runs in less
  time than a smaller one), so a variant with ``i`` instances and max batch ``b`` cannot carry
  more than ``i × b`` requests per cheapest execution time, nor more than the ladder's highest
  concurrency per cheapest execution time (a closed loop has that many requests in flight).
  The bound gets a noise allowance (default 10 %) because the statistics themselves are noisy.
* **A model, fitted as variants are measured** (:mod:`tritonkit.perf.sweep.model`): cost per
  execution against batch size, per-instance scaling up to the CPU cores or GPUs (then as
  measured), and p99 against the queueing a load causes. It predicts what each unmeasured
  variant carries within the p99 limit, as a value with a range (``610 ± 80/s``).
* **First guess.** After the default, the variant the model fitted to it predicts highest
  (among those within the tie tolerance of the top, the fewest instances, the smallest batch
  and window). Without any execution cost, a first guess from the hardware alone
  (:func:`first_guess`).
* **Pruning and stopping.** A variant whose bound is below the best measured throughput less
  the tie tolerance cannot win and is never measured (``skipped: bound 412/s below best
  530/s``). Of the others, the one whose reach (its bound, or the top of the model's range if
  lower) is highest is measured next, and the model is fitted again; the search stops when no
  variant's reach is above the best: those are skipped, with the model's figures. The batching
  window and preferred sizes change when a batch is sent, not how much an instance carries
  once saturated, so they share the bound of their instances × max batch (the model tells
  them apart by latency). The same bound per load skips the low rungs of a ladder: ``c``
  requests in flight cannot complete more than ``c`` per cheapest execution, so once a best is
  known, loads that cannot reach it are not measured.
* **Confirmation.** The top candidates (within twice the tie tolerance of the top, or whose
  throughput interval reaches the top's) are measured once more at their best load; the score
  is the mean. (A live sweep re-measures a contender right after its ladder, while it is still
  loaded; the closing round here then covers only the contenders left without a second
  measurement.) Throughputs within the tie tolerance (default 5 %) are a tie, broken by lower p99
  (again within the tolerance), then fewer instances, then the default config (nothing to
  change), then the smaller max batch and window.
* **A tie within the noise.** After the re-measurements, the top must also clear the noise: a
  variant beyond the tie tolerance whose throughput interval still reaches the top's lower
  bound cannot be told from it. Those are tied too, the same rule picks among them, and the
  answer says so (:attr:`WinnerChoice.noise_note`). :func:`choose_winner` is the one place this
  is decided.
* **The commit rule** (:attr:`SearchResult.decided`, the same for every host and load source):
  the pick is written back (or applied) only when the config already served — the default — is
  not in the tie. A tie that holds it changes nothing: the served config is as good as the pick
  within the tolerance or the noise. A tie of variants that all beat it beyond the noise writes
  the tie rule's pick.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from tritonkit.perf.sweep.model import ModelSettings, Prediction, cheapest_costs, fit_model, knob_distance
from tritonkit.perf.sweep.outcome import NOISE_ALLOWANCE, TIE_TOLERANCE, StepPoint, VariantOutcome
from tritonkit.perf.sweep.variants import Variant

__all__ = [
    "Decision",
    "SearchResult",
    "SearchSettings",
    "StepPoint",
    "TieRule",
    "VariantOutcome",
    "WinnerChoice",
    "choose_winner",
    "first_guess",
    "interpolate_cost_us",
    "pareto_front",
    "search",
    "ties_with",
    "throughput_bound_per_s",
    "useful_loads",
]

@dataclass(frozen=True)
class SearchSettings(ModelSettings):
    """Knobs of the search: the fitted model's (:class:`~tritonkit.perf.sweep.model.ModelSettings`:
    the ladder's ``levels``/``load_mode``, with which loads that cannot reach the best throughput
    found are skipped; the SLA's p99 bound when it has one; ``cpu_cores``/``gpus``, the serving
    hardware, for the first guess) and its own. ``max_concurrency`` is the ladder's top
    concurrency (``None`` for request-rate ladders, which have no closed-loop bound);
    ``confirm_top`` is the most variants re-measured per round."""

    exhaustive: bool = False
    tie_tolerance: float = TIE_TOLERANCE
    confirm_top: int = 3
    max_concurrency: float | None = None

    def model_settings(self) -> ModelSettings:
        """What the fitted model (:mod:`tritonkit.perf.sweep.model`) needs of these settings."""
        levels = self.levels or ((self.max_concurrency,) if self.max_concurrency else ())
        return ModelSettings(**{f.name: getattr(self, f.name) for f in fields(ModelSettings)} | {"levels": tuple(levels)})


@dataclass(frozen=True)
class Decision:
    """Why one variant was measured or not: ``action`` ``measured``, ``pruned`` (its bound from
    the server's statistics is below the best) or ``skipped`` (the model's range is); ``reason``
    in words (``"skipped: bound 412/s below best 530/s"``, ``"measured: model predicts 610 ± 80/s
    …"``), with the prediction and the bound behind it where there was one."""

    action: Literal["measured", "pruned", "skipped"]
    reason: str
    prediction: Prediction | None = None
    bound_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "reason": self.reason,
                "predicted": self.prediction.to_dict() if self.prediction else None,
                "bound_per_s": None if self.bound_per_s is None or not math.isfinite(self.bound_per_s)
                else round(self.bound_per_s, 2)}


@dataclass
class SearchResult:
    """The search's record: every outcome in the order measured, the variants pruned (id →
    the bound that ruled them out, infer/s), the first guess, the winner and whoever tied it;
    ``decisions`` say why each variant was measured, pruned or skipped, and ``model_text`` what
    the model fitted to everything measured holds. ``noise_note``: when the top is a tie within
    the noise, what says so (see :class:`WinnerChoice`); empty when the winner is clear."""

    outcomes: list[VariantOutcome]
    pruned: dict[str, float]
    guess: Variant | None
    winner: VariantOutcome | None
    tied: list[VariantOutcome]
    decisions: dict[str, Decision] = field(default_factory=dict)
    model_text: str = ""
    noise_note: str = ""

    @property
    def decided(self) -> bool:
        """The commit rule: True when there is a winner and the config already served (the
        default) is not in its tie: only then is it written back or applied."""
        return self.winner is not None and not any(o.variant.is_default for o in self.tied)

    @property
    def default(self) -> VariantOutcome | None:
        return next((o for o in self.outcomes if o.variant.is_default), None)


# ------------------------------------------------------------------------------------ pieces


def _slots(variant: Variant) -> int:
    return variant.instances * max(variant.max_batch_size, 1)


def throughput_bound_per_s(
    variant: Variant, min_exec_us: float, *, max_concurrency: float | None = None, allowance: float = NOISE_ALLOWANCE
) -> float:
    """The most inferences per second ``variant`` could carry (see the module docstring)."""
    if min_exec_us <= 0:
        return math.inf
    slots = float(_slots(variant))
    if max_concurrency is not None:
        slots = min(slots, float(max_concurrency))
    return slots * 1e6 / min_exec_us * (1.0 + allowance)


def useful_loads(
    variant: Variant, settings: SearchSettings, min_exec_us: float | None, floor_per_s: float
) -> tuple[float, ...]:
    """The ladder loads at which ``variant`` could still carry ``floor_per_s``.

    A closed loop of ``c`` requests cannot complete more than ``c`` (nor more than the variant's
    slots) per cheapest execution time; an open loop cannot complete more than it offers. Loads
    below the floor are skipped: whatever they meet, they cannot win. The top load is always kept.
    """
    levels = settings.levels
    if not levels or floor_per_s <= 0 or min_exec_us is None or min_exec_us <= 0:
        return levels
    grow = 1.0 + settings.noise_allowance
    slots = float(_slots(variant))

    def bound(level: float) -> float:
        if settings.load_mode == "concurrency":
            return min(level, slots) * 1e6 / min_exec_us * grow
        return level * grow

    keep = tuple(level for level in levels if bound(level) >= floor_per_s)
    return keep or levels[-1:]


def _min_exec_us(outcomes: Iterable[VariantOutcome]) -> float | None:
    costs = [us for o in outcomes for us in o.exec_cost_us.values() if us > 0]
    return min(costs) if costs else None


def interpolate_cost_us(costs: dict[int, float], batch: int) -> float:
    """Execution time for ``batch`` from measured ``{batch: µs}``: measured, else linear between the
    nearest measured sizes, else extended from the two largest (never below the largest measured)."""
    if batch in costs:
        return costs[batch]
    sizes = sorted(costs)
    below = [b for b in sizes if b < batch]
    above = [b for b in sizes if b > batch]
    if below and above:
        lo, hi = below[-1], above[0]
        return costs[lo] + (costs[hi] - costs[lo]) * (batch - lo) / (hi - lo)
    if above:
        return costs[above[0]]
    if len(below) >= 2:
        lo, hi = below[-2], below[-1]
        slope = max(0.0, (costs[hi] - costs[lo]) / (hi - lo))
        return costs[hi] + slope * (batch - hi)
    return costs[below[-1]]


def first_guess(candidates: Sequence[Variant], costs: dict[int, float], settings: SearchSettings) -> Variant | None:
    """The variant a simple model of the server expects to carry the most within the p99 limit.

    Throughput ≈ effective instances × batch the ladder can fill / execution time of that batch;
    effective instances are capped by CPU cores when there is no GPU (workers beyond the cores
    slow each other down). Latency ≈ window + two executions (wait for the running batch, then
    run). ``None`` without costs or candidates.
    """
    if not candidates or not costs:
        return None
    concurrency = settings.max_concurrency or math.inf

    def predict(v: Variant) -> tuple[float, float]:
        instances = v.instances if settings.gpus else min(v.instances, max(1, settings.cpu_cores))
        per_instance = max(1.0, math.floor(concurrency / v.instances)) if math.isfinite(concurrency) else math.inf
        batch = int(min(max(v.max_batch_size, 1), per_instance))
        exec_us = interpolate_cost_us(costs, batch)
        throughput = instances * batch * 1e6 / exec_us if exec_us > 0 else 0.0
        latency_ms = (v.window_us or 0) / 1000.0 + 2.0 * exec_us / 1000.0
        return throughput, latency_ms

    predicted = {v.id: predict(v) for v in candidates}
    limit = settings.p99_limit_ms
    feasible = [v for v in candidates if limit is None or predicted[v.id][1] <= limit] or list(candidates)
    return _simplest_near_top(feasible, {v.id: predicted[v.id][0] for v in feasible}, settings.tie_tolerance)


def _simplest_near_top(variants: Sequence[Variant], per_s: dict[str, float], tolerance: float) -> Variant:
    """The first guess's rule: of ``variants`` expected (``per_s``) within ``tolerance`` of the top,
    the one with the fewest instances, then the smallest batch and window."""
    top = max(per_s[v.id] for v in variants)
    near = [v for v in variants if per_s[v.id] >= top * (1.0 - tolerance)]
    return min(near, key=lambda v: (v.instances, v.max_batch_size, v.window_us or 0, not v.is_default))


def _tie_key(outcome: VariantOutcome) -> tuple[Any, ...]:
    v = outcome.variant
    return (v.instances, not v.is_default, v.max_batch_size, v.window_us or 0, v.id)


@dataclass(frozen=True)
class TieRule:
    """How a tie within the tolerance is broken once p99 has not (``key``: the lowest wins), said in
    ``words``; ``retry``: what tells tied variants apart by measuring again. The Triton sweep's is
    :data:`TRITON_TIES`; a sweep of other knobs (an LLM engine's) brings its own."""

    key: Callable[[VariantOutcome], tuple[Any, ...]]
    words: str
    retry: str


#: The Triton sweep's tie rule: fewer instances, then the default config, then the smaller batch and window.
TRITON_TIES = TieRule(_tie_key, "lower p99, then fewer instances, then the default config",
                      "sweep again with longer windows (--window-ms)")


@dataclass(frozen=True)
class WinnerChoice:
    """What :func:`choose_winner` decided: the ``winner``, every outcome tied with it (winner
    first), and ``noise_note``, a sentence when the top is a tie within the noise (empty when the
    winner is clear)."""

    winner: VariantOutcome | None
    tied: list[VariantOutcome]
    noise_note: str = ""


def choose_winner(outcomes: Iterable[VariantOutcome], tie_tolerance: float = TIE_TOLERANCE,
                  ties: TieRule = TRITON_TIES) -> WinnerChoice:
    """The winner by the rule in the module docstring: throughputs within ``tie_tolerance`` of the
    top are a tie, and so are those beyond it whose throughput interval reaches the top's lower
    bound (a tie within the noise, said in :attr:`WinnerChoice.noise_note`); lower p99 (within the
    tolerance), then ``ties`` (default: fewer instances, then the default config, then the smaller
    batch and window) break a tie."""
    scored = [(o, s) for o in outcomes if (s := o.score()) is not None]
    if not scored:
        return WinnerChoice(None, [])
    leader, lead = max(scored, key=lambda pair: (pair[1].throughput_per_s, pair[1].band_per_s[0]))
    top = lead.throughput_per_s
    tied = [(o, s) for o, s in scored if s.throughput_per_s >= top * (1.0 - tie_tolerance)]
    # Beyond the tolerance, but the top's lower bound is not above its upper one: not told apart.
    noisy = [(o, s) for o, s in scored if s.throughput_per_s < top * (1.0 - tie_tolerance)
             and ties_with(top, s.throughput_per_s, tie_tolerance, lead.band_per_s, s.band_per_s)]
    pool = tied + noisy
    lowest_p99 = min(s.p99_ms for _, s in pool)
    calm = [o for o, s in pool if s.p99_ms <= lowest_p99 * (1.0 + tie_tolerance)]
    winner = min(calm, key=ties.key)
    others = sorted((o for o, _ in pool if o is not winner), key=lambda o: -(o.score() or StepPoint(0, 0, 0)).throughput_per_s)
    served = any(o.variant.is_default for o, _ in pool)
    return WinnerChoice(winner, [winner, *others], _noise_note(leader, lead, noisy, winner, ties, served) if noisy else "")


def ties_with(top_per_s: float, other_per_s: float, tolerance: float,
              top_band: tuple[float, float] | None = None, other_band: tuple[float, float] | None = None) -> bool:
    """Whether ``other`` cannot be told from the ``top``: within ``tolerance`` of it, or (with both
    95 % intervals) its interval's top reaches the top's lower bound. The tie of :func:`choose_winner`
    and of the commit rule, for one model or several."""
    if other_per_s >= top_per_s * (1.0 - tolerance):
        return True
    return top_band is not None and other_band is not None and other_band[1] >= top_band[0]


def _band_text(outcome: VariantOutcome, score: StepPoint) -> str:
    low, high = score.band_per_s
    return f"{outcome.variant.id} {score.throughput_per_s:,.1f}/s (95 % interval {low:,.1f} – {high:,.1f})"


def _noise_note(leader: VariantOutcome, lead: StepPoint, noisy: list[tuple[VariantOutcome, StepPoint]],
                winner: VariantOutcome, ties: TieRule, served: bool) -> str:
    """The plain statement of a tie within the noise, with the figures, the pick and what to do."""
    return (f"the top is a tie within the noise: {_band_text(leader, lead)} cannot be told from "
            + ", ".join(_band_text(o, s) for o, s in noisy)
            + f"; {winner.variant.id} is picked by the tie rule ({ties.words})"
            + ("; the config served is in the tie, so it stays: nothing is written back or applied" if served
               else "; the config served is not in the tie, so the pick stands (written back where the sweep writes)")
            + f". To tell them apart, {ties.retry}")


def pareto_front(points: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The ``(p99_ms, throughput_per_s)`` points no other point beats on both (lower p99, higher
    throughput), sorted by p99."""
    front: list[tuple[float, float]] = []
    best = -math.inf
    for p99, throughput in sorted(points, key=lambda p: (p[0], -p[1])):
        if throughput > best:
            front.append((p99, throughput))
            best = throughput
    return front


# ------------------------------------------------------------------------------------ search

#: Measure one variant at the given ladder loads (all of them when the tuple is empty).
Measure = Callable[[Variant, tuple[float, ...]], VariantOutcome]
Confirm = Callable[[VariantOutcome], StepPoint | None]
Notify = Callable[[str, dict[str, Any]], None]


def search(
    grid: Sequence[Variant],
    measure: Measure,
    confirm: Confirm | None,
    settings: SearchSettings,
    *,
    notify: Notify | None = None,
    ties: TieRule = TRITON_TIES,
) -> SearchResult:
    """Measure the default first, then (unless ``exhaustive``) the variant the fitted model
    expects to carry most (the first guess), then, one at a time, the unmeasured variant whose
    range reaches highest, refitting the model after each; stop when no variant left can beat
    the best measured one; confirm the top.

    ``notify(kind, data)`` hears ``guess``, ``propose`` (why the next variant is measured),
    ``pruned`` (its bound is below the best), ``skipped`` (the model's range is) and ``confirm``
    decisions as they happen. :attr:`SearchResult.decisions` keeps why each variant was
    measured or not. ``ties`` breaks a tie (:class:`TieRule`; default the Triton sweep's).
    """
    run = _Run(measure, settings, notify or (lambda _kind, _data: None))
    default = next((v for v in grid if v.is_default), grid[0])
    run.take(default, Decision("measured", "the model's own config, measured first: its cost per execution is "
                               "what the bounds and the model start from"), settings.levels)
    remaining = [v for v in grid if v is not default]
    guess: Variant | None = None
    if settings.exhaustive:
        for variant in remaining:
            run.take(variant, Decision("measured", "exhaustive: every variant is measured"), settings.levels)
        remaining = []
    elif remaining:
        guess = run.take_first_guess(remaining)
    while remaining and run.take_next(remaining, near=guess or default):
        pass
    if confirm is not None:
        _confirm_top(run.outcomes, confirm, settings, run.say)
    choice = choose_winner(run.outcomes, settings.tie_tolerance, ties)
    final = fit_model(run.outcomes, settings.model_settings())
    return SearchResult(outcomes=run.outcomes, pruned=run.pruned, guess=guess, winner=choice.winner,
                        tied=choice.tied, decisions=run.decisions,
                        model_text=final.describe() if final is not None else "", noise_note=choice.noise_note)


@dataclass
class _Run:
    """A search under way: what it measures with, the outcomes in the order measured, and why each
    variant was measured, pruned (by its bound, kept in ``pruned``) or skipped."""

    measure: Measure
    settings: SearchSettings
    say: Notify
    outcomes: list[VariantOutcome] = field(default_factory=list)
    decisions: dict[str, Decision] = field(default_factory=dict)
    pruned: dict[str, float] = field(default_factory=dict)

    def take(self, variant: Variant, decision: Decision, loads: tuple[float, ...] | None = None) -> None:
        """Measure ``variant`` for the reason ``decision`` gives, at ``loads`` (default: the loads
        that could still reach the best so far, :func:`useful_loads`)."""
        self.decisions[variant.id] = decision
        if loads is None:
            floor = _best(self.outcomes) * (1.0 - self.settings.tie_tolerance)
            loads = useful_loads(variant, self.settings, _min_exec_us(self.outcomes), floor)
        self.outcomes.append(self.measure(variant, loads))

    def predictions(self, variants: Iterable[Variant]) -> dict[str, Prediction]:
        """What the model fitted to everything measured so far predicts of ``variants`` (none unfitted)."""
        model = fit_model(self.outcomes, self.settings.model_settings())
        return {v.id: model.predict(v) for v in variants} if model is not None else {}

    def take_first_guess(self, remaining: list[Variant]) -> Variant | None:
        """Measure the first guess (see the module docstring) and take it out of ``remaining``."""
        predictions = self.predictions(remaining)
        per_s = {v.id: p.throughput_per_s for v in remaining if (p := predictions.get(v.id)) is not None}
        if not predictions:
            guess = first_guess(remaining, cheapest_costs(self.outcomes), self.settings)
        else:  # the variant the model expects to carry most, by the first guess's rule
            guess = (_simplest_near_top(remaining, per_s, self.settings.tie_tolerance)
                     if max(per_s.values(), default=0.0) > 0 else None)
        if guess is None:
            return None
        prediction = predictions.get(guess.id)
        why = (f"first guess: the model fitted to the default predicts {prediction.text()}, the most of any "
               "variant" if prediction is not None else "first guess from the measured cost and the hardware")
        self.say("guess", {"variant": guess.id, **({"predicted": prediction.to_dict()} if prediction else {})})
        self.take(guess, Decision("measured", why, prediction))
        remaining.remove(guess)
        return guess

    def take_next(self, remaining: list[Variant], near: Variant) -> bool:
        """One round: prune what cannot win, refit, and measure the variant whose reach is highest
        (ties: the nearer ``near``); ``False`` once nothing left can beat the best (skipped, said why)."""
        min_exec = _min_exec_us(self.outcomes)
        best = _best(self.outcomes)
        bounds = {v.id: (throughput_bound_per_s(v, min_exec, max_concurrency=self.settings.max_concurrency,
                                                allowance=self.settings.noise_allowance) if min_exec else math.inf)
                  for v in remaining}
        self._prune(remaining, bounds, best)
        if not remaining:
            return False
        predictions = self.predictions(remaining)
        reach = {v.id: min(bounds[v.id], p.high_per_s) if (p := predictions.get(v.id)) is not None else bounds[v.id]
                 for v in remaining}
        open_ = [v for v in remaining if reach[v.id] > best * (1.0 + self.settings.tie_tolerance)]
        if not open_:
            self._skip_rest(remaining, bounds, predictions, best)
            return False
        nxt = max(open_, key=lambda v: (reach[v.id], _mid(predictions, v), -knob_distance(v, near)))
        prediction = predictions.get(nxt.id)
        why = (f"measured: model predicts {prediction.text()} (up to {prediction.high_per_s:,.0f}/s; best so far "
               f"{best:,.0f}/s)" if prediction is not None
               else f"measured: its bound {bounds[nxt.id]:,.0f}/s is the highest left (best so far {best:,.0f}/s)")
        self.say("propose", {"variant": nxt.id, "reason": why})
        self.take(nxt, Decision("measured", why, prediction, bounds[nxt.id]))
        remaining.remove(nxt)
        return True

    def _prune(self, remaining: list[Variant], bounds: dict[str, float], best: float) -> None:
        """Take out of ``remaining`` the variants whose bound is below the best less the tie tolerance."""
        for v in [v for v in remaining if bounds[v.id] < best * (1.0 - self.settings.tie_tolerance)]:
            self.pruned[v.id] = bounds[v.id]
            self.decisions[v.id] = Decision("pruned", f"skipped: bound {bounds[v.id]:,.0f}/s below best {best:,.0f}/s",
                                            bound_per_s=bounds[v.id])
            remaining.remove(v)
            self.say("pruned", {"variant": v.id, "bound_per_s": bounds[v.id], "best_per_s": best})

    def _skip_rest(self, remaining: list[Variant], bounds: dict[str, float], predictions: dict[str, Prediction],
                   best: float) -> None:
        """Nothing left can beat the best by more than the tie tolerance: say why for each, with
        the figures this decision rested on."""
        margin = f"cannot beat best {best:,.0f}/s by more than {100 * self.settings.tie_tolerance:g} %"
        for v in remaining:
            prediction = predictions.get(v.id)
            if prediction is not None and prediction.high_per_s <= bounds[v.id]:
                text = f"skipped: model predicts at most {prediction.high_per_s:,.0f}/s ({prediction.text()}), {margin}"
            else:
                text = f"skipped: bound {bounds[v.id]:,.0f}/s, {margin}"
            self.decisions[v.id] = Decision("skipped", text, prediction, bounds[v.id])
            self.say("skipped", {"variant": v.id, "reason": text, "best_per_s": best})


def _best(outcomes: Iterable[VariantOutcome]) -> float:
    return max((s.throughput_per_s for o in outcomes if (s := o.score()) is not None), default=0.0)


def _mid(predictions: dict[str, Prediction], variant: Variant) -> float:
    prediction = predictions.get(variant.id)
    return prediction.throughput_per_s if prediction is not None else 0.0


def _confirm_top(outcomes: list[VariantOutcome], confirm: Confirm, settings: SearchSettings, say: Notify) -> None:
    """Re-measure the leader, and up to ``confirm_top`` variants close enough to it that noise could
    reorder them, until each such variant has been re-measured once (a few rounds at most)."""
    tried: set[str] = {o.variant.knobs_id for o in outcomes if o.confirmations}
    for _ in range(3):
        ranked = sorted(((o, s) for o in outcomes if (s := o.score()) is not None),
                        key=lambda pair: -pair[1].throughput_per_s)
        if not ranked:
            return
        top, floor = ranked[0][1].throughput_per_s, ranked[0][1].band_per_s[0]
        # Within twice the tolerance, or reaching the top's interval: noise could still reorder them.
        contenders = [o for o, s in ranked
                      if s.throughput_per_s >= top * (1.0 - 2 * settings.tie_tolerance) or s.band_per_s[1] >= floor]
        todo = [o for o in contenders[: settings.confirm_top] if o.variant.knobs_id not in tried]
        if not todo:
            return
        for outcome in todo:
            tried.add(outcome.variant.knobs_id)  # once, even when the re-measurement gave nothing
            say("confirm", {"variant": outcome.variant.id})
            point = confirm(outcome)
            if point is not None:
                outcome.confirmations.append(point)
