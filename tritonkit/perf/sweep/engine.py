"""Sweep an LLM engine's own knobs: start it per variant, load-test it, pick the winner by the Triton
sweep's rules.

``tritonkit perf sweep MODEL --engine-cmd TEMPLATE --knob NAME=V1,V2*`` builds an
:class:`EngineSweepSettings` and calls :func:`run_engine_sweep`. For each variant of the grid
(:func:`~tritonkit.perf.sweep.engine_template.engine_grid`, the engine's default first) the
command is rendered with a free loopback port, started in its own process group
(:class:`~tritonkit.perf.llm.engine.EngineProcess`), waited for until ``/health`` (or
``/v1/models``) answers, load-tested with the OpenAI LLM load path (:func:`~tritonkit.perf.llm.loadtest.run_llm`,
a concurrency ladder, every step judged against the SLA by :func:`~tritonkit.perf.llm.judge.evaluate_llm`)
and stopped. A step's throughput is its output tokens per second (with its bootstrap interval), its
latency figure the TTFT p99; a variant whose best step could still be the top (within twice the
tie tolerance of the best so far, or whose interval reaches it) is measured once more at that
load while its engine is still up.

The winner comes from :func:`~tritonkit.perf.sweep.search.search` itself, with the engine's tie
rule (:data:`ENGINE_TIES`): the same confirmation averaging, tie tolerance, tie within the noise
and p99 tie break as the Triton sweep. It measures every variant: an engine gives no execution
cost per batch, so the Triton sweep's bounds and fitted model have nothing to prune with.

An engine that exits or does not answer in time is recorded as ``failed`` with its log's tail and
the sweep goes on. After every variant ``sweep.json`` and ``report.md`` are rewritten (atomically)
under the sweep folder, before anything is said of it; a variant's own result is
``variants/<id>/outcome.json``, and running the same sweep into the same folder reuses every
variant measured there (a failed one is tried again).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write, read_json
from tritonkit._lock import FolderLock
from tritonkit.errors import ConfigError, ServerError, StoredResultError, TritonKitError
from tritonkit.perf import SLA, load_sla
from tritonkit.perf.judge.verdict import Exit
from tritonkit.perf.llm.engine import EngineProcess
from tritonkit.perf.llm.judge import evaluate_llm
from tritonkit.perf.llm.result import LLMResult
from tritonkit.perf.sweep.engine_records import EngineRecord, EngineSweepSettings
from tritonkit.perf.sweep.engine_report import engine_report
from tritonkit.perf.sweep.engine_template import EngineVariant
from tritonkit.perf.sweep.outcome import STATUS_FAILED, STATUS_MEASURED, StepPoint, VariantOutcome
from tritonkit.perf.sweep.search import SearchResult, SearchSettings, TieRule, search
from tritonkit.server.ports import free_ports

__all__ = ["ENGINE_TIES", "EngineEvent", "EngineRecord", "EngineSweepResult", "EngineSweepSettings",
           "ReadyEngine", "run_engine_sweep"]


def _engine_tie_key(outcome: VariantOutcome) -> tuple[Any, ...]:
    variant = outcome.variant
    return variant.tie_key() if isinstance(variant, EngineVariant) else (True, (), variant.id)


#: Between engine variants tied on tokens/s and TTFT p99: the default, then the smaller values.
ENGINE_TIES = TieRule(_engine_tie_key, "lower TTFT p99, then the engine's default, then the smaller knob values",
                      "sweep again with more requests per step (--requests)")


class ReadyEngine(EngineProcess):
    """An :class:`EngineProcess` ready when ``/health`` answers 200, or, for a server without one,
    ``/v1/models``."""

    def _healthy(self) -> bool:
        return super()._healthy() or self._answers("/v1/models")

    def exit_status(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def tail(self, chars: int = 800) -> str:
        return self._tail()[-chars:]


@dataclass(frozen=True)
class EngineEvent:
    """Progress: ``kind`` (``start``, ``measured``, ``resumed``, ``failed``, ``confirm``), the variant, a sentence."""

    kind: str
    variant: str
    message: str


@dataclass
class EngineSweepResult:
    """The sweep's answer: the search's record (winner, ties, noise note), each variant's engine
    record, the folder, the wall time."""

    model: str
    settings: EngineSweepSettings
    search: SearchResult
    records: dict[str, EngineRecord]
    wall_s: float

    @property
    def out_dir(self) -> Path:
        return self.settings.out

    @property
    def failed(self) -> list[VariantOutcome]:
        return [o for o in self.search.outcomes if o.status != STATUS_MEASURED]

    @property
    def ratio_to_default(self) -> float | None:
        """Winner's tokens/s within the SLA over the default's (``None`` when either has none)."""
        winner, default = self.search.winner, self.search.default
        won = winner.score() if winner is not None else None
        base = default.score() if default is not None else None
        if won is None or base is None or base.throughput_per_s <= 0:
            return None
        return won.throughput_per_s / base.throughput_per_s

    @property
    def exit_code(self) -> int:
        """0 a variant meets the SLA and every variant was measured; 1 none does; 2 a variant could not be measured."""
        if self.failed:
            return Exit.UNMEASURED
        if self.search.winner is not None:
            return Exit.OK
        return Exit.SLA_MISSED if self.search.outcomes else Exit.UNMEASURED

    def headline(self) -> str:
        winner = self.search.winner
        score = winner.score() if winner is not None else None
        if winner is None or score is None:
            return f"no variant of the engine meets the SLA ({self.settings.sla})"
        ratio = self.ratio_to_default
        versus = (f"{ratio:.2f}× the engine's default" if ratio is not None and not winner.variant.is_default
                  else "the engine's default is the winner" if winner.variant.is_default
                  else "the default met the SLA nowhere")
        tie = f"; {self.search.noise_note}" if self.search.noise_note else ""
        return (f"winner: {winner.variant.describe()} — {score.throughput_per_s:,.1f} tokens/s within "
                f"{self.settings.sla} at concurrency {score.load:g} (TTFT p99 {score.p99_ms:,.1f} ms); {versus}{tie}")

    def to_dict(self) -> dict[str, Any]:
        winner = self.search.winner
        return {"model": self.model, "kind": "engine", "exit_code": self.exit_code, "sla": self.settings.sla,
                "fingerprint": self.settings.fingerprint(), "out_dir": str(self.out_dir),
                "winner": winner.variant.id if winner is not None else None,
                "tied": [o.variant.id for o in self.search.tied], "noise_note": self.search.noise_note,
                "ratio_to_default": self.ratio_to_default, "wall_s": round(self.wall_s, 2),
                "reused": [i for i, r in self.records.items() if r.resumed],
                "variants": [self.records[o.variant.id].to_dict() for o in self.search.outcomes
                             if o.variant.id in self.records]}


# ---- one variant ------------------------------------------------------------------------------


def _figures(result: LLMResult) -> dict[str, dict[str, float | None]]:
    found: dict[str, dict[str, float | None]] = {}
    for step in result.steps:
        m = step.metrics
        if m is not None:
            values = m.sla_values()
            found[f"{step.load_value:g}"] = {k: values.get(k) for k in ("tokens_per_s", "ttft_p99", "itl_p99",
                                                                         "requests_per_s")}
    return found


def step_points(result: LLMResult, sla: SLA) -> list[StepPoint]:
    """Each answered step of ``result`` as a :class:`StepPoint` judged against ``sla``: output tokens/s
    (its bootstrap interval) as the throughput, TTFT p99 as the latency the tie rule compares."""
    verdict = {s.load: s for s in evaluate_llm(sla, result).steps}
    points = []
    for step in result.steps:
        m = step.metrics
        if m is None or m.answered_count == 0:
            continue
        judged = verdict.get(step.load_value)
        ttft = m.sla_values().get("ttft_p99")
        points.append(StepPoint(
            load=step.load_value, throughput_per_s=m.output_token_throughput_per_s or 0.0,
            p99_ms=ttft if ttft is not None else math.inf, errors=step.failures.total, stable=True,
            meets_sla=judged is not None and judged.met_by_values,
            note="; ".join(judged.reasons) if judged is not None else "",
            throughput_interval_per_s=m.sla_intervals().get("tokens_per_s"),
            headroom={} if judged is None else {str(c.constraint): c.headroom for c in judged.checks
                                                 if c.headroom is not None}))
    return points


@dataclass
class _Sweep:
    """A sweep under way: what every variant shares, and the records so far."""

    model: str
    settings: EngineSweepSettings
    say: Callable[[EngineEvent], None]
    records: dict[str, EngineRecord] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return self.settings.out

    def stored(self, variant: EngineVariant) -> EngineRecord | None:
        path = self.folder / "variants" / variant.id / "outcome.json"
        if not path.exists():
            return None
        try:
            data = read_json(path, what="engine sweep result", hint="delete it to measure the variant again")
            if not isinstance(data, dict) or data.get("fingerprint") != self.settings.fingerprint():
                return None
            record = EngineRecord.from_dict(data, str(path))
        except (ConfigError, ValueError, StoredResultError) as exc:
            self.say(EngineEvent("note", variant.id, f"  {path} cannot be read ({exc}); measuring it again"))
            return None
        return record if record.outcome.status == STATUS_MEASURED else None

    def measure(self, variant_: Any, loads: tuple[float, ...]) -> VariantOutcome:
        variant: EngineVariant = variant_
        done, left = len(self.order), len(self.settings.grid()) - len(self.order)
        record = self.stored(variant)
        if record is not None:
            record.resumed = True
            self.say(EngineEvent("resumed", variant.id, f"[{done + 1}/{done + left}] {variant.describe()}: "
                                 "reused from the sweep folder"))
        else:
            self.say(EngineEvent("start", variant.id, f"[{done + 1}/{done + left}] {variant.describe()}: "
                                 "starting the engine"))
            record = self._run(variant, loads)
            atomic_write(self.folder / "variants" / variant.id / "outcome.json",
                         json.dumps({"fingerprint": self.settings.fingerprint(), **record.to_dict()}, indent=2))
        self.records[variant.id] = record
        self.order.append(variant.id)
        self.save()  # on disk before the variant's fate is said
        self.say(_told(variant, record))
        return record.outcome

    def _run(self, variant: EngineVariant, loads: tuple[float, ...]) -> EngineRecord:
        folder = self.folder / "variants" / variant.id
        port = free_ports(1)[0]
        argv = self.settings.template.render(variant.values, port=port, model=self.model)
        record = EngineRecord(VariantOutcome(variant), argv, log=str(folder / "engine.log"))
        env = {**os.environ, **self.settings.env}
        engine = ReadyEngine(argv, port=port, log=folder / "engine.log", env=env,
                             ready_timeout_s=self.settings.ready_timeout_s)
        began = time.monotonic()
        try:
            engine.start()
        except ServerError as exc:  # its group is stopped already
            record.outcome = VariantOutcome(variant, STATUS_FAILED, reason=f"the engine did not start: {exc.message}",
                                            duration_s=time.monotonic() - began)
            return record
        except BaseException:  # a Ctrl-C while it starts: stop what was started
            engine.stop()
            raise
        record.start_s = engine.start_s
        try:
            self._load(record, engine, folder, loads)
        except TritonKitError as exc:
            record.outcome = replace(record.outcome, status=STATUS_FAILED, reason=f"{exc.message}: {engine.tail()}")
        finally:
            engine.stop()
        record.outcome.duration_s = time.monotonic() - began
        return record

    def _load(self, record: EngineRecord, engine: ReadyEngine, folder: Path, loads: tuple[float, ...]) -> None:
        sla = load_sla(self.settings.sla)
        ladder = self._llm(engine, folder / "ladder", loads)
        record.figures = _figures(ladder)
        outcome = VariantOutcome(record.outcome.variant, STATUS_MEASURED, steps=step_points(ladder, sla))
        record.outcome = outcome
        best = outcome.best()
        if engine.exit_status() is not None:
            outcome.status = STATUS_FAILED
            outcome.reason = f"the engine exited with status {engine.exit_status()} under load: {engine.tail()}"
            return
        if best is not None and self._contender(best):
            self.say(EngineEvent("confirm", outcome.variant.id, f"  measuring concurrency {best.load:g} again"))
            again = step_points(self._llm(engine, folder / "confirm", (best.load,)), sla)
            outcome.confirmations.extend(again[:1])

    def _contender(self, best: StepPoint) -> bool:
        """Whether noise could put this variant on top: within twice the tie tolerance of the best
        so far, or its interval reaching the best's (the first variant always is)."""
        scores = [s for r in self.records.values() if (s := r.outcome.score()) is not None]
        if not scores:
            return True
        top = max(scores, key=lambda s: s.throughput_per_s)
        return (best.throughput_per_s >= top.throughput_per_s * (1.0 - 2 * self.settings.tie_tolerance)
                or best.band_per_s[1] >= top.band_per_s[0])

    def _llm(self, engine: ReadyEngine, into: Path, loads: tuple[float, ...]) -> LLMResult:
        from tritonkit.perf.llm.loadtest import run_llm

        llm = replace(self.settings.llm, concurrency=",".join(f"{int(v)}" for v in loads))
        prompts, source = llm.load_prompts()
        return run_llm(self.model, engine.url, prompts, llm.plan(load_sla(self.settings.sla)), results_dir=into,
                       metrics_url=f"http://{engine.url}/metrics", streaming=llm.stream, prompt_source=source,
                       tokenizer=llm.token_counter(), openai=llm.openai_target())

    def save(self, search: SearchResult | None = None) -> None:
        """``sweep.json`` and ``report.md`` as they stand (the winner once ``search`` is done)."""
        outcomes = [self.records[i].outcome for i in self.order]
        data = {"model": self.model, "kind": "engine", "sla": self.settings.sla,
                "fingerprint": self.settings.fingerprint(), "done": search is not None,
                "winner": search.winner.variant.id if search is not None and search.winner is not None else None,
                "variants": [self.records[i].to_dict() for i in self.order]}
        atomic_write(self.folder / "sweep.json", json.dumps(data, indent=2))
        atomic_write(self.folder / "report.md", engine_report(self.model, self.settings, outcomes, self.records, search))


def _told(variant: EngineVariant, record: EngineRecord) -> EngineEvent:
    outcome = record.outcome
    if outcome.status != STATUS_MEASURED:
        return EngineEvent("failed", variant.id, f"  {variant.id} failed: {outcome.reason}")
    score = outcome.score()
    started = f", engine up in {record.start_s:.1f} s" if record.start_s is not None else ""
    if score is None:
        return EngineEvent("measured", variant.id, f"  {variant.id}: no step met the SLA{started}")
    return EngineEvent("measured", variant.id, f"  {variant.id}: {score.throughput_per_s:,.1f} tokens/s at concurrency "
                       f"{score.load:g} (TTFT p99 {score.p99_ms:,.1f} ms){started}")


def run_engine_sweep(model: str, settings: EngineSweepSettings, *,
                     on_event: Callable[[EngineEvent], None] | None = None) -> EngineSweepResult:
    """Sweep the engine serving ``model`` (the name it serves, ``{model}`` in the template) over
    ``settings``' knobs; see the module docstring. The sweep folder is locked while it runs."""
    began = time.monotonic()
    levels = tuple(float(v) for v in settings.llm.levels())
    search_settings = SearchSettings(levels=levels, load_mode="concurrency", exhaustive=True,
                                     tie_tolerance=settings.tie_tolerance, max_concurrency=max(levels))
    with FolderLock(settings.out, what="sweep folder", purpose=f"engine sweep of {model}"):
        sweep = _Sweep(model, settings, on_event or (lambda _event: None))
        found = search(settings.grid(), sweep.measure, None, search_settings, ties=ENGINE_TIES)
        sweep.save(found)
    return EngineSweepResult(model, settings, found, sweep.records, time.monotonic() - began)
