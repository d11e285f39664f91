"""What ``tritonkit perf`` (and ``tritonkit demo``) print, in one place.

Made for build servers: on a terminal, progress lines (rich) on stderr and a readable summary;
piped or under CI, one ``key=value`` line per step and per result on stdout and nothing else;
with ``as_json``, one JSON document.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click

from tritonkit.perf.judge.compare import BaselineComparison
from tritonkit.perf.judge.sla import SLA, format_metric
from tritonkit.perf.judge.verdict import Verdict

if TYPE_CHECKING:  # the orchestration imports the report package: only the types are needed here
    from tritonkit.perf.pipeline import PlannedCommand
    from tritonkit.perf.run_record import PerfRun, StepEvent

__all__ = ["Terminal"]


def _echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def _escape(text: str) -> str:
    from rich.markup import escape

    return str(escape(text))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _band(band: tuple[float, float] | None) -> str:
    """An interval as ``low..high`` (``-`` without one)."""
    return "-" if band is None else f"{band[0]:.4g}..{band[1]:.4g}"


_COLOURS = {"pass": "green", "fail": "red", "noise": "magenta", "unmeasured": "yellow"}


def _kv(stream: TextIO, kind: str, **fields: object) -> None:
    parts = [kind] + [f"{key}={shlex.quote(str(value))}" for key, value in fields.items()]
    stream.write(" ".join(parts) + "\n")
    stream.flush()


class Terminal:
    """Where progress and results go: rich on a terminal, ``key=value`` lines when piped."""

    def __init__(self, *, as_json: bool, quiet: bool) -> None:
        self.as_json = as_json
        self.quiet = quiet
        self.tty = sys.stdout.isatty() and not as_json
        self._console: Any = None
        if sys.stderr.isatty() and not quiet:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False)

    def progress(self, message: str) -> None:
        """A progress line: shown on a terminal, dropped when piped (quiet and parseable)."""
        if self._console is not None:
            self._console.print(f"[dim]{_escape(message)}[/dim]")

    def step(self, event: StepEvent) -> None:
        """One finished step: a ``step`` line per load; a try of an unstable step that was measured
        again is an ``attempt`` line."""
        if self.as_json:
            return
        step = event.step
        if event.attempt:
            self._attempt(event)
            return
        kind = "step" if event.run is None else "run_step"  # a repeated run's own steps, before the combined ones
        judged = event.verdict
        sla = judged.status if judged else None
        margin = judged.margin_check if judged else None
        machine = step.machine
        if self.tty:
            colour = _COLOURS.get(sla or "", "white")
            if step.error_count:
                body = f"{step.error_count} failed request(s)"
            elif step.throughput_per_s is None or step.latency is None:
                body = "nothing measured (unstable)"
            else:
                body = (f"{step.throughput_per_s:8.1f} infer/s   p50 {step.latency.p50_ms:7.2f} ms"
                        f"   p99 {step.latency.p99_ms:7.2f} ms")
            flag = "  (noisy)" if step.noisy else ("" if step.stable else "  (unstable)")
            tag = f"  {'INSIDE THE NOISE' if sla == 'noise' else sla.upper()}" if sla else ""
            why = f": {'; '.join(judged.reasons)}" if judged and judged.reasons else ""
            run = f"run {event.run}: " if event.run is not None else ("all runs: " if step.runs else "")
            click.secho(f"  {run}{step.load_mode} {step.load_value:<6g} {body}{flag}{tag}{why}", fg=colour)
            for warning in step.warnings:
                click.secho(f"    warning: {warning}", fg="yellow")
            return
        _kv(sys.stdout, kind, **({"run": event.run} if event.run is not None else {}), mode=step.load_mode,
            load=f"{step.load_value:g}", name=event.name, throughput_per_s=_num(step.throughput_per_s),
            p50_ms=_num(step.latency.p50_ms if step.latency else None),
            p99_ms=_num(step.latency.p99_ms if step.latency else None),
            errors=step.error_count, stable=str(step.stable).lower(), sla=sla or "-",
            reasons="; ".join(judged.reasons) if judged and judged.reasons else "-",
            noisy=str(step.noisy).lower(), attempts=step.attempts,
            throughput_interval_per_s=_band(step.interval("throughput")), p99_interval_ms=_band(step.interval("p99")),
            interval_basis=step.interval_basis or "-",
            margin=f"{margin.constraint}:{margin.margin:+.4g}" if margin is not None and margin.margin is not None
            else "-",
            headroom=_num(judged.headroom if judged else None),
            other_cores=_num(machine.other_cores if machine else None),
            generator_cores=_num(machine.generator_cores if machine else None))
        for warning in step.warnings:
            _kv(sys.stdout, "warning", load=f"{step.load_value:g}", message=warning)

    def _attempt(self, event: StepEvent) -> None:
        """A try of an unstable step that the ladder measured again (never counted as a step)."""
        step = event.step
        why = step.unstable_note or ("unstable" if not step.stable else "measured again")
        if self.tty:
            click.secho(f"  {step.load_mode} {step.load_value:<6g} attempt {step.attempts}: {why}; measuring again",
                        fg="yellow")
            return
        _kv(sys.stdout, "attempt", **({"run": event.run} if event.run is not None else {}), mode=step.load_mode,
            load=f"{step.load_value:g}", name=event.name, attempt=step.attempts, stable=str(step.stable).lower(),
            note=why)

    def verdict(self, verdict: Verdict | None) -> None:
        """The verdict's one-line summary (terminal) or its ``verdict`` line (piped)."""
        if verdict is None:
            return
        if self.tty:
            click.secho(verdict.summary(), fg=_COLOURS[verdict.status], bold=True)
            return
        binding = verdict.binding
        measured = (format_metric(binding.constraint.metric, binding.measured).replace(" ", "")
                    if binding and binding.measured is not None else "-")
        _kv(sys.stdout, "verdict", status=verdict.status, exit_code=verdict.exit_code, sla=str(verdict.sla),
            knee_load=_num(verdict.knee_load), knee_throughput_per_s=_num(verdict.knee_throughput_per_s),
            binding=str(binding.constraint) if binding else "-", binding_measured=measured,
            headroom=_num(verdict.headroom), noisy_loads=",".join(f"{v:g}" for v in verdict.noisy_loads) or "-")

    def run(self, run: PerfRun) -> None:
        """A finished run: notes, verdict, where the files are."""
        if self.as_json:
            _echo_json(run.to_dict())
            return
        for note in run.notes:
            self.progress(note)
        self.verdict(run.verdict)
        report_html = run.report.html if run.report else None
        if self.tty:
            click.echo(f"results: {run.results_dir}")
            if report_html:
                click.echo(f"report:  {report_html}")
            if run.baseline_path:
                click.echo(f"baseline: {run.baseline_path}")
        else:
            _kv(sys.stdout, "results", dir=run.results_dir, result=run.result_path,
                report_md=run.report.markdown if run.report else "-", report_html=report_html or "-",
                baseline=run.baseline_path or "-", stop_reason=run.result.stop_reason, exit_code=run.exit_code)

    def dry_run(self, folder: Path, sla: SLA | None, commands: list[PlannedCommand]) -> None:
        """The perf_analyzer commands a run would make, as shell lines (or JSON)."""
        if self.as_json:
            _echo_json({"results_dir": str(folder), "sla": str(sla) if sla else None,
                        "commands": [{"name": c.name, "recorded": c.recorded, "argv": c.argv} for c in commands]})
            return
        click.echo(f"# results would go to {folder}")
        if sla is not None:
            click.echo(f"# SLA: {sla}")
        for command in commands:
            click.echo(f"# {command.name}{'' if command.recorded else ' (warm-up, not recorded)'}")
            click.echo(shlex.join(command.argv))

    def comparison(self, comparison: BaselineComparison, base_path: Path, new_path: Path, *, saved: Path | None,
                   save_requested: bool) -> None:
        """A baseline comparison: the table, notes, the summary line, whether a baseline was kept."""
        if self.as_json:
            _echo_json({"base": str(base_path), "new": str(new_path), "baseline_saved": saved, **comparison.to_dict()})
            return
        click.echo(f"base: {base_path}")
        click.echo(f"new:  {new_path}")
        click.echo(comparison.table())
        for note in comparison.notes:
            click.echo(f"note: {note}")
        colour = {"regression": "red", "inside the noise": "magenta"}.get(comparison.outcome, "green")
        click.secho(comparison.summary(), fg=colour)
        if saved:
            click.echo(f"baseline saved: {saved}")
        elif save_requested:
            click.echo("baseline not saved: the new run " + (
                "regressed" if comparison.regressed else "is inside the noise of the baseline"))
