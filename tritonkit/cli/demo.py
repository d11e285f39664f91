"""``tritonkit demo``: the main job on the built-in default model."""

from __future__ import annotations

from pathlib import Path

import click

from tritonkit.cli._common import CommandExit
from tritonkit.demo import DEFAULT_DEMO_LEVELS, DEFAULT_DEMO_SLA, run_demo
from tritonkit.perf.measure.plan import levels_from_text
from tritonkit.perf.report.terminal import Terminal


@click.command("demo")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("model_repository"),
              show_default=True, help="Repository to build the default model into.")
@click.option("--results-root", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Where the timestamped run folder goes.")
@click.option("--sla", "sla_text", default=DEFAULT_DEMO_SLA, show_default=True, help="SLA to judge against.")
@click.option("--concurrency", default=",".join(str(n) for n in DEFAULT_DEMO_LEVELS), show_default=True,
              help="Concurrency levels of the ladder.")
@click.option("--duration-s", type=float, default=6.0, show_default=True, help="Measuring time per step.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
def demo(repo: Path, results_root: Path, sla_text: str, concurrency: str, duration_s: float, as_json: bool) -> None:
    """Build the default ONNX model, serve it, load-test it with perf_analyzer, print the SLA verdict.

    Exit status: 0 SLA met, 1 SLA missed, 2 could not measure.

    \b
    Example:
      tritonkit demo --sla 'p99<=20ms,throughput>=100/s'
    """
    out = Terminal(as_json=as_json, quiet=False)

    def say(message: str) -> None:
        if not as_json:
            click.echo(f"[demo] {message}", err=True)

    levels = tuple(int(level) for level in levels_from_text(concurrency))
    result = run_demo(
        repo=repo,
        results_root=results_root,
        sla=sla_text,
        levels=levels,
        duration_s=duration_s,
        progress=say,
        on_step=out.step,
    )
    out.run(result.perf)
    if result.perf.error is not None:
        raise result.perf.error
    raise CommandExit(result.perf.exit_code)


COMMANDS: list[click.Command] = [demo]
