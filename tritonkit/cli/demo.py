"""``tritonkit demo``: the main job on the built-in default model."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from tritonkit._values import WINDOW_MS
from tritonkit.cli._common import (
    CommandExit,
    UserPath,
    Words,
    backend_dir_option,
    echo_json,
    levels_type,
    number,
    sigterm_as_interrupt,
    sla_option,
)
from tritonkit.cli.sweep import SweepPrinter
from tritonkit.demo import (
    DEFAULT_DEMO_INSTANCES,
    DEFAULT_DEMO_LEVELS,
    DEFAULT_DEMO_SLA,
    run_demo,
)
from tritonkit.perf.sweep import Exit, parse_instances, parse_windows


@click.command("demo")
@click.option("--repo", type=UserPath(file_okay=False, path_type=Path), default=Path("model_repository"),
              show_default=True, help="Repository to build the default model into (the sweep runs on a copy).")
@click.option("--results-root", type=UserPath(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True, help="Where the timestamped sweep folder goes.")
@sla_option("The winner must meet it.", default=DEFAULT_DEMO_SLA)
@click.option("--concurrency", type=levels_type("concurrency"), default=",".join(str(n) for n in DEFAULT_DEMO_LEVELS), show_default=True,
              help="Concurrency levels of each variant's ladder.")
@click.option("--instances", type=Words(example="1,2"), default=",".join(str(n) for n in DEFAULT_DEMO_INSTANCES), show_default=True,
              help="Instance counts to try.")
@click.option("--batch-window", type=Words(example="0,5ms"), default="0,5ms", show_default=True, help="Batching windows to try.")
@click.option("--window-ms", type=number(WINDOW_MS), default=500, show_default=True,
              help="perf_analyzer measurement window; a step needs three agreeing windows.")
@backend_dir_option("Backends the demo builds for and serves with (an onnxruntime backend there serves the "
                    "model with it)")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
def demo(repo: Path, results_root: Path, sla_text: str, concurrency: str, instances: str, batch_window: str,
         window_ms: int, backend_dir: Path | None, as_json: bool) -> None:
    """Build the default ONNX model, serve it, sweep its configurations, keep the winner, print the verdict.

    The model is built into --repo (model_repository/) exactly as the builder writes it; the sweep
    runs on a copy in the sweep folder (results/<UTC>-demo_mlp-sweep/model_repository), where the
    winner is written with the old config kept beside it. Prints how much load the winner carries
    within the SLA and how that compares with the default config. Exit status: 0 a configuration
    meets the SLA, 1 none does, 2 could not measure.

    \b
    Example:
      tritonkit demo --sla 'p99<=20ms,throughput>=100/s'
    """
    printer = SweepPrinter(as_json=as_json, quiet=False)

    def say(message: str) -> None:
        if printer.tty:
            click.echo(f"[demo] {message}", err=True)

    counts = parse_instances(instances)
    windows = parse_windows(batch_window)
    try:
        with sigterm_as_interrupt():
            result = run_demo(repo=repo, results_root=results_root, sla=sla_text, levels=concurrency, instances=counts,
                              windows_us=windows, step_window_ms=window_ms, backend_dir=backend_dir, progress=say,
                              on_event=printer.event,
                              install_progress=lambda message: click.echo(f"[install] {message}", err=True))
    except KeyboardInterrupt:
        click.echo("interrupted: the server and perf_analyzer are stopped; finished variants are kept under "
                   f"{results_root}", err=True)
        raise CommandExit(Exit.UNMEASURED) from None
    if as_json:
        echo_json(result.to_dict())
        raise CommandExit(result.exit_code)
    printer.result(result.sweep)
    verdict = result.status
    tuned = shlex.quote(str(result.tuned_repository))
    if printer.lines:
        click.echo(f"verdict status={verdict} tuned_repository={tuned} holds={shlex.quote(result.sweep.holds())}")
    else:
        click.echo(f"verdict: {verdict} — the tuned repository is {tuned}, holding {result.sweep.holds()} "
                   f"(serve it: tritonkit serve {tuned})")
    raise CommandExit(result.exit_code)


COMMANDS: list[click.Command] = [demo]
