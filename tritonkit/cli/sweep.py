"""``tritonkit perf sweep``: the configuration that carries the most load within an SLA.

Registered on the ``perf`` group (``tritonkit.cli.perf`` imports this module). On a terminal,
one progress line per variant with an ETA on stderr and a summary on stdout; piped or under CI,
one ``key=value`` line per variant and one for the result on stdout; ``--json`` prints one JSON
document. Exit codes: 0 a configuration meets the SLA, 1 none does, 2 could not measure.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import click

from tritonkit.cli._common import CommandExit, echo_json, sigterm_as_interrupt
from tritonkit.perf import PerfSpec, load_sla
from tritonkit.perf.measure.input_data import sweep_spec
from tritonkit.perf.sweep import (
    EXIT_UNMEASURED,
    SweepEvent,
    SweepGrid,
    SweepResult,
    parse_instances,
    parse_max_batch_sizes,
    parse_preferred,
    parse_windows,
    run_sweep,
)

__all__ = ["SweepPrinter", "sweep_command"]


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = int(round(seconds))
    return f"{whole // 60}:{whole % 60:02d}"


def _kv(kind: str, **fields: object) -> None:
    parts = [kind] + [f"{k}={shlex.quote(str(v))}" for k, v in fields.items() if v is not None]
    click.echo(" ".join(parts))


class SweepPrinter:
    """Progress on a terminal (stderr, with an ETA); ``key=value`` lines when piped; nothing with --json."""

    def __init__(self, *, as_json: bool, quiet: bool) -> None:
        self.as_json = as_json
        self.tty = sys.stderr.isatty() and not as_json and not quiet
        self.lines = not as_json and not sys.stdout.isatty()

    def event(self, event: SweepEvent) -> None:
        if self.tty:
            if event.kind == "written":
                return  # the summary says it, with the restore command
            counted = event.kind in ("start", "measured", "resumed", "load_failed", "failed")
            counter = f"[{event.done}/{event.done + event.left}] " if counted else "  "
            eta = f" — ETA ≤ {_clock(event.eta_s)}" if event.kind == "start" and event.eta_s is not None else ""
            click.echo(f"{counter}{event.message}{eta}".rstrip() if event.kind != "server" else event.message,
                       err=True)
        elif self.lines and event.kind not in ("start", "note", "server"):
            _kv("sweep_" + event.kind, variant=event.variant, done=event.done, left=event.left,
                eta_s=None if event.eta_s is None else round(event.eta_s, 1),
                **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in event.data.items()
                   if not isinstance(v, (dict, list)) and k not in ("variant", "done", "left", "eta_s")})

    def result(self, result: SweepResult) -> None:
        if self.as_json:
            echo_json(result.to_dict())
            return
        winner = result.search.winner
        score = winner.score() if winner else None
        if self.lines:
            _kv("sweep_result", exit_code=result.exit_code, winner=winner.variant.id if winner else "none",
                throughput_per_s=round(score.throughput_per_s, 2) if score else None,
                p99_ms=round(score.p99_ms, 3) if score else None, load=score.load if score else None,
                ratio_to_default=round(result.ratio_to_default, 3) if result.ratio_to_default else None,
                measured=result.counts()["measured"], pruned=result.counts()["pruned"],
                load_failed=result.counts()["load_failed"], resumed=len(result.resumed),
                wall_s=round(result.wall_s, 1), report=result.report_path,
                config=result.write_back.config_path if result.write_back else None,
                backup=result.write_back.backup_path if result.write_back else None)
            return
        click.echo(result.headline())
        if result.write_back is not None and result.write_back.backup_path is not None:
            click.echo(f"written: {result.write_back.config_path}")
            click.echo(f"previous config kept: {result.write_back.backup_path}")
            click.echo(f"restore it with: {result.write_back.restore_command}")
        elif result.write_back is not None:
            click.echo(f"{result.write_back.config_path} already holds the winner; nothing written")
        click.echo(f"report: {result.report_path} (plot {result.plot_path}); "
                   f"{result.counts()['measured']} measured, {result.counts()['pruned']} pruned, "
                   f"{len(result.resumed)} reused, {result.wall_s:.1f} s")


@click.command("sweep")
@click.argument("repo", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("model")
@click.option("--sla", "sla_text", required=True,
              help="SLA the winner must meet, e.g. 'p99<=50ms' (as in `perf run`; errors==0 is added).")
@click.option("--instances", default=None, help="Instance counts to try, e.g. 1,2,4 (default: the model's).")
@click.option("--max-batch-size", "max_batch", default=None, help="Max batch sizes to try, e.g. 1,2,4,8.")
@click.option("--batch-window", default=None,
              help="Dynamic batching windows to try, e.g. 0,5ms,10ms,20ms ('off': no dynamic batcher).")
@click.option("--preferred-batch", default=None,
              help="Preferred batch size options: none, a size, sizes joined by + (2+8), or max.")
@click.option("--concurrency", default=None, help="Load ladder: '1,2,4,8', '1:64' (doubling). Default 1:8.")
@click.option("--request-rate", default=None, help="Request-rate ladder (req/s) instead, e.g. '50:400'.")
@click.option("--window-ms", type=int, default=500, show_default=True,
              help="perf_analyzer measurement window; a step needs three agreeing windows.")
@click.option("--warmup-s", type=float, default=0.5, show_default=True,
              help="Unrecorded load after each variant is loaded.")
@click.option("--exhaustive", is_flag=True, help="Measure every variant instead of pruning those that cannot win.")
@click.option("--tie-tolerance", type=float, default=5.0, show_default=True,
              help="Throughputs within this many percent are a tie (then lower p99, then fewer instances).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Sweep folder (default results/<UTC>-<model>-sweep); re-running into it resumes.")
@click.option("--results-root", type=click.Path(file_okay=False, path_type=Path), default=Path("results"),
              show_default=True)
@click.option("--no-write-back", is_flag=True, help="Leave the repository's config.pbtxt as it is.")
@click.option("--input-data", default=None, help="'zero', 'random', or a perf_analyzer JSON data file.")
@click.option("--shape", "shapes", multiple=True, help="Shape of a variable-size input: NAME:D1,D2 (repeat).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
@click.option("--quiet", is_flag=True, help="No progress lines on a terminal.")
def sweep_command(
    repo: Path, model: str, sla_text: str, instances: str | None, max_batch: str | None,
    batch_window: str | None, preferred_batch: str | None, concurrency: str | None, request_rate: str | None,
    window_ms: int, warmup_s: float, exhaustive: bool, tie_tolerance: float, out_dir: Path | None,
    results_root: Path, no_write_back: bool, input_data: str | None, shapes: tuple[str, ...],
    as_json: bool, quiet: bool,
) -> None:
    """Find the configuration of MODEL (in REPO) that carries the most load within the SLA.

    One tritonserver serves REPO with explicit model control for the whole sweep; each variant
    is loaded with its config, warmed up, load-tested with the real perf_analyzer and unloaded.
    The default config is measured first, then a first guess, then only variants that could
    still win; --exhaustive measures them all. The winner is written into REPO/MODEL/config.pbtxt
    (the old file kept beside it as config.pbtxt.orig-<UTC>) and a report with a
    throughput-vs-p99 plot goes to the sweep folder. Exit status: 0 a configuration meets the
    SLA, 1 none does, 2 could not measure.

    \b
    Example:
      tritonkit perf sweep model_repository resnet --sla 'p99<=50ms' \\
          --instances 1,2 --max-batch-size 1,4,8 --batch-window 0,5ms,10ms --concurrency 1:32
    """
    grid = SweepGrid(
        instances=parse_instances(instances) if instances else None,
        max_batch_sizes=parse_max_batch_sizes(max_batch) if max_batch else None,
        windows_us=parse_windows(batch_window) if batch_window else None,
        preferred=parse_preferred(preferred_batch) if preferred_batch else None,
    )
    spec = PerfSpec(model=model, url="127.0.0.1:8001", input_data=input_data,
                    shapes=PerfSpec.shapes_from_text(shapes))
    printer = SweepPrinter(as_json=as_json, quiet=quiet)
    folder = out_dir or results_root / (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{model}-sweep")
    # Valid data from the model file (ids within the vocabulary, finite floats), as perf run derives it.
    spec = sweep_spec(spec, repo, model, folder, max_batch_sizes=grid.max_batch_sizes).spec
    try:
        with sigterm_as_interrupt():
            result = run_sweep(
                repo, model, sla=load_sla(sla_text), grid=grid, concurrency=concurrency, request_rate=request_rate,
                step_window_ms=window_ms, warmup_s=warmup_s, exhaustive=exhaustive, out=folder,
                results_root=results_root, write_back=not no_write_back, tie_tolerance=tie_tolerance / 100.0,
                spec=spec, on_event=printer.event,
            )
    except KeyboardInterrupt:
        click.echo(f"interrupted: finished variants are kept in {folder}; run the same command with "
                   f"--out {shlex.quote(str(folder))} to resume", err=True)
        raise CommandExit(EXIT_UNMEASURED) from None
    printer.result(result)
    raise CommandExit(result.exit_code)
