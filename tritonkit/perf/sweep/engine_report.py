"""The engine sweep's ``report.md``: each variant's figures, the winner against the engine's default."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tritonkit.perf.sweep.outcome import STATUS_MEASURED, VariantOutcome

if TYPE_CHECKING:
    from tritonkit.perf.sweep.engine_records import EngineRecord, EngineSweepSettings
    from tritonkit.perf.sweep.search import SearchResult

__all__ = ["engine_report"]


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}"


def _row(outcome: VariantOutcome, record: EngineRecord, winner: str | None) -> str:
    variant = outcome.variant
    name = f"**{variant.id}** (winner)" if variant.id == winner else variant.id
    start = "—" if record.start_s is None else f"{record.start_s:.1f}"
    if outcome.status != STATUS_MEASURED:
        reason = " ".join(outcome.reason.split())[-300:].replace("|", "\\|")
        return f"| {name} | failed | — | — | — | — | {start} | {reason} |"
    score = outcome.score()
    if score is None:
        notes = "; ".join(s.note for s in outcome.steps if s.note)[:300].replace("|", "\\|")
        return f"| {name} | no step met the SLA | — | — | — | — | {start} | {notes} |"
    figures = record.figures.get(f"{score.load:g}", {})
    low, high = score.band_per_s
    again = f"{len(outcome.confirmations)} re-measurement(s)" if outcome.confirmations else ""
    return (f"| {name} | measured | {score.load:g} | {score.throughput_per_s:,.1f} ({low:,.1f} – {high:,.1f}) | "
            f"{_ms(score.p99_ms)} | {_ms(figures.get('itl_p99'))} | {start} | {again} |")


def engine_report(model: str, settings: EngineSweepSettings, outcomes: Sequence[VariantOutcome],
                  records: Mapping[str, EngineRecord], search: SearchResult | None) -> str:
    """The report as Markdown: the command, the SLA, a row per variant, the winner and its ratio to the default."""
    winner = search.winner if search is not None else None
    lines = [f"# Engine sweep of {model}", "",
             f"- command: `{settings.template.text}`",
             "- knobs: " + "; ".join(f"{k.name} = {', '.join(v + ('*' if v == k.default else '') for v in k.values)}"
                                     for k in settings.knobs) + " (* the engine's default)",
             f"- SLA: `{settings.sla}` (errors==0 added); load: concurrency {settings.llm.concurrency}, "
             f"{settings.llm.requests} requests a step, input {settings.llm.input_tokens} / output "
             f"{settings.llm.output_tokens} tokens",
             f"- tie tolerance {100 * settings.tie_tolerance:g} %: then lower TTFT p99, then the engine's default, "
             "then the smaller knob values", "",
             "| variant | status | concurrency | tokens/s (95 % interval) | TTFT p99 ms | ITL p99 ms | engine start s | note |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [_row(o, records[o.variant.id], winner.variant.id if winner else None) for o in outcomes]
    lines.append("")
    if search is None:
        lines.append("The sweep is under way (or was stopped): the rows above are what it measured so far.")
    elif winner is None:
        lines.append(f"No variant meets the SLA `{settings.sla}`.")
    else:
        won, default = winner.score(), search.default.score() if search.default is not None else None
        assert won is not None
        lines.append(f"**Winner: {winner.variant.describe()}**, {won.throughput_per_s:,.1f} tokens/s at concurrency "
                     f"{won.load:g}.")
        if default is not None and default.throughput_per_s > 0:
            lines.append(f"Against the engine's default ({default.throughput_per_s:,.1f} tokens/s at concurrency "
                         f"{default.load:g}): **{won.throughput_per_s / default.throughput_per_s:.2f}×**.")
        else:
            lines.append("The engine's default met the SLA at no load of the ladder: no ratio to it.")
        if search.noise_note:
            lines.append(f"Note: {search.noise_note}.")
        record = records.get(winner.variant.id)
        if record is not None and record.argv:
            lines.append(f"\nThe winner's command (its port was picked for the sweep): `{shlex.join(record.argv)}`")
    return "\n".join(lines) + "\n"
