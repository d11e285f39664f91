"""``tritonkit perf``: load ladders against SLAs with the real perf_analyzer, reports, baselines.

Output is made for build servers: on a terminal, progress lines (rich) on stderr and a readable
summary; piped or under CI, one ``key=value`` line per step and per result on stdout, nothing
else; ``--json`` prints one JSON document. Exit codes: 0 SLA met / no regression, 1 SLA missed /
regression, 2 could not measure (or any other error).
"""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import click

from tritonkit.cli._common import CommandExit, ErrorHandlingGroup, echo_json
from tritonkit.errors import ConfigError, MissingComponentError
from tritonkit.perf.compare import (
    DEFAULT_BASELINE_ROOT,
    compare_results,
    load_result,
    parse_percent,
)
from tritonkit.perf.compare import save_baseline as keep_baseline
from tritonkit.perf.install import (
    PERF_ANALYZER_ENV,
    PERF_ANALYZER_VERSION,
    install_perf_analyzer,
    locate_perf_analyzer,
)
from tritonkit.perf.ladder import LadderPlan, default_results_dir, levels_from_text
from tritonkit.perf.run import PerfRun, StepEvent, planned_commands, rejudge, run_perf
from tritonkit.perf.sla import SLA, format_metric, load_sla
from tritonkit.perf.spec import PerfSpec
from tritonkit.perf.verdict import EXIT_UNMEASURED, Verdict

_SLA_HELP = (
    "SLA as an expression, e.g. 'p99<=50ms,throughput>=200/s,errors==0' "
    "(metrics p50 p90 p95 p99 mean queue throughput errors error_rate; units ms us s, /s, %), "
    "or a YAML file. errors==0 is added unless errors or error_rate is bounded."
)


# --------------------------------------------------------------------------- output


class _Output:
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
        """One finished step."""
        if self.as_json:
            return
        step = event.step
        sla = event.verdict.status if event.verdict else None
        if self.tty:
            colour = {"pass": "green", "fail": "red", "unmeasured": "yellow"}.get(sla or "", "white")
            if step.error_count:
                body = f"{step.error_count} failed request(s)"
            elif step.throughput_per_s is None or step.latency is None:
                body = "nothing measured (unstable)"
            else:
                body = (
                    f"{step.throughput_per_s:8.1f} infer/s   p50 {step.latency.p50_ms:7.2f} ms"
                    f"   p99 {step.latency.p99_ms:7.2f} ms"
                )
            flag = "" if step.stable else "  (unstable)"
            tag = f"  {sla.upper()}" if sla else ""
            click.secho(f"  {step.load_mode} {step.load_value:<6g} {body}{flag}{tag}", fg=colour)
            for warning in step.warnings:
                click.secho(f"    warning: {warning}", fg="yellow")
            return
        _kv(
            sys.stdout,
            "step",
            mode=step.load_mode,
            load=f"{step.load_value:g}",
            name=event.name,
            throughput_per_s=_num(step.throughput_per_s),
            p50_ms=_num(step.latency.p50_ms if step.latency else None),
            p99_ms=_num(step.latency.p99_ms if step.latency else None),
            errors=step.error_count,
            stable=str(step.stable).lower(),
            sla=sla or "-",
        )
        for warning in step.warnings:
            _kv(sys.stdout, "warning", load=f"{step.load_value:g}", message=warning)


def _escape(text: str) -> str:
    from rich.markup import escape

    return str(escape(text))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _kv(stream: TextIO, kind: str, **fields: object) -> None:
    parts = [kind] + [f"{key}={shlex.quote(str(value))}" for key, value in fields.items()]
    stream.write(" ".join(parts) + "\n")
    stream.flush()


def _print_verdict(out: _Output, verdict: Verdict | None) -> None:
    if verdict is None:
        return
    if out.tty:
        colour = {"pass": "green", "fail": "red", "unmeasured": "yellow"}[verdict.status]
        click.secho(verdict.summary(), fg=colour, bold=True)
        return
    binding = verdict.binding
    _kv(
        sys.stdout,
        "verdict",
        status=verdict.status,
        exit_code=verdict.exit_code,
        sla=str(verdict.sla),
        knee_load=_num(verdict.knee_load),
        knee_throughput_per_s=_num(verdict.knee_throughput_per_s),
        binding=str(binding.constraint) if binding else "-",
        binding_measured=(
            format_metric(binding.constraint.metric, binding.measured).replace(" ", "")
            if binding and binding.measured is not None
            else "-"
        ),
        headroom=_num(verdict.headroom),
    )


def _print_run(out: _Output, run: PerfRun) -> None:
    if out.as_json:
        echo_json(run.to_dict())
        return
    for note in run.notes:
        out.progress(note)
    _print_verdict(out, run.verdict)
    report_html = run.report.html if run.report else None
    if out.tty:
        click.echo(f"results: {run.results_dir}")
        if report_html:
            click.echo(f"report:  {report_html}")
        if run.baseline_path:
            click.echo(f"baseline: {run.baseline_path}")
    else:
        _kv(
            sys.stdout,
            "results",
            dir=run.results_dir,
            result=run.result_path,
            report_md=run.report.markdown if run.report else "-",
            report_html=report_html or "-",
            baseline=run.baseline_path or "-",
            stop_reason=run.result.stop_reason,
            exit_code=run.exit_code,
        )


# --------------------------------------------------------------------------- commands


@click.group("perf", cls=ErrorHandlingGroup)
def perf() -> None:
    """Load-test a served model with the real perf_analyzer and judge it against an SLA.

    \b
    Example:
      tritonkit perf run resnet --url 127.0.0.1:8001 --sla 'p99<=50ms,throughput>=200/s'
    """


def _shapes(values: tuple[str, ...]) -> dict[str, list[int]]:
    shapes: dict[str, list[int]] = {}
    for value in values:
        name, sep, dims = value.partition(":")
        try:
            parsed = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            parsed = []
        if not sep or not name or not parsed:
            raise ConfigError(
                f"--shape {value!r} is not NAME:D1,D2,...", hint="e.g. --shape INPUT0:3,224,224"
            )
        shapes[name] = parsed
    return shapes


def _plan(
    concurrency: str | None,
    request_rate: str | None,
    distribution: str,
    duration_s: float,
    max_trials: int,
    warmup_s: float,
    timeout_s: float,
    stop_after: int,
) -> LadderPlan:
    if concurrency and request_rate:
        raise ConfigError(
            "--concurrency and --request-rate both given", hint="a ladder steps one kind of load: choose one"
        )
    if duration_s <= 0:
        raise ConfigError(f"--duration-s must be > 0, got {duration_s:g}", hint="e.g. --duration-s 6")
    mode = "request_rate" if request_rate else "concurrency"
    levels = levels_from_text(request_rate or concurrency or "1:8")
    # perf_analyzer needs three agreeing windows per step: a step measures at least duration_s.
    window_ms = max(100, int(duration_s * 1000 / 3))
    return LadderPlan(
        levels=tuple(levels),
        mode=mode,
        step_window_ms=window_ms,
        max_trials=max_trials,
        warmup_s=warmup_s,
        stop_after_sla_breaks=stop_after,
        request_distribution=distribution,
        total_timeout_s=timeout_s,
    )


@perf.command("run")
@click.argument("model")
@click.option(
    "--url", default=None, help="Server host:port (default 127.0.0.1:8001 for gRPC, :8000 for HTTP)."
)
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@click.option("--sla", "sla_text", default=None, help=_SLA_HELP)
@click.option(
    "--concurrency",
    default=None,
    help="Concurrency levels: '1,2,4,8', a doubling range '1:16', or 'start:end:step'. Default 1:8.",
)
@click.option(
    "--request-rate", default=None, help="Request-rate levels (req/s) instead, e.g. '50:400' or '50,100'."
)
@click.option(
    "--distribution",
    type=click.Choice(["constant", "poisson"]),
    default="constant",
    show_default=True,
    help="Request-rate arrival process.",
)
@click.option(
    "--duration-s",
    type=float,
    default=6.0,
    show_default=True,
    help="Measuring time per step (three windows of a third each; an unstable step takes longer).",
)
@click.option(
    "--max-trials", type=int, default=6, show_default=True, help="Windows per step before it is unstable."
)
@click.option(
    "--warmup-s", type=float, default=5.0, show_default=True, help="Unrecorded warm-up before the ladder."
)
@click.option(
    "--stop-after", type=int, default=2, show_default=True, help="Stop after this many SLA-breaking steps."
)
@click.option("--batch-size", type=int, default=1, show_default=True)
@click.option("--input-data", default=None, help="'zero', 'random', or a perf_analyzer JSON data file.")
@click.option("--shape", "shapes", multiple=True, help="Shape of a variable-size input: NAME:D1,D2 (repeat).")
@click.option("--metrics-url", default=None, help="Server /metrics URL to scrape during each step.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run folder (default results/<UTC>-<model>); an earlier run there is resumed.",
)
@click.option(
    "--results-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Where timestamped run folders go.",
)
@click.option("--save-baseline", is_flag=True, help="Also keep the run as a timestamped baseline.")
@click.option(
    "--baseline-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_BASELINE_ROOT,
    show_default=True,
    help="Baselines folder (one subfolder per model).",
)
@click.option(
    "--perf-analyzer",
    "perf_analyzer_path",
    default=None,
    help=f"perf_analyzer binary to run (default: ${PERF_ANALYZER_ENV}, else the installed one).",
)
@click.option(
    "--timeout-s", type=float, default=1800.0, show_default=True, help="Limit for the whole ladder."
)
@click.option("--dry-run", is_flag=True, help="Print the perf_analyzer commands; run nothing, write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
@click.option("--quiet", is_flag=True, help="No progress lines on a terminal.")
def run_command(
    model: str,
    url: str | None,
    protocol: str,
    sla_text: str | None,
    concurrency: str | None,
    request_rate: str | None,
    distribution: str,
    duration_s: float,
    max_trials: int,
    warmup_s: float,
    stop_after: int,
    batch_size: int,
    input_data: str | None,
    shapes: tuple[str, ...],
    metrics_url: str | None,
    out_dir: Path | None,
    results_root: Path,
    save_baseline: bool,
    baseline_dir: Path,
    perf_analyzer_path: str | None,
    timeout_s: float,
    dry_run: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Climb a load ladder against MODEL, judge it against the SLA, write results and a report.

    Results go to results/<UTC timestamp>-<model>/: raw perf_analyzer files, result.json,
    report.md and report.html. Exit status: 0 SLA met at some load, 1 SLA missed,
    2 nothing could be measured (or an error).

    \b
    Example:
      tritonkit perf run resnet --url 127.0.0.1:8001 \\
          --sla 'p99<=50ms,throughput>=200/s,errors==0' --concurrency 1:16 --duration-s 6
    """
    sla: SLA | None = load_sla(sla_text) if sla_text else None
    spec = PerfSpec(
        model=model,
        url=url or ("127.0.0.1:8001" if protocol == "grpc" else "127.0.0.1:8000"),
        protocol=protocol,  # type: ignore[arg-type]  # click.Choice limits it
        batch_size=batch_size,
        input_data=input_data,
        shapes=_shapes(shapes),
    )
    plan = _plan(
        concurrency, request_rate, distribution, duration_s, max_trials, warmup_s, timeout_s, stop_after
    )
    out = _Output(as_json=as_json, quiet=quiet)
    if dry_run:
        _dry_run(
            spec, plan, sla, out_dir or default_results_dir(model, results_root), perf_analyzer_path, as_json
        )
        return
    tool = locate_perf_analyzer(perf_analyzer_path)
    if sla is not None:
        out.progress(f"SLA: {sla.with_zero_errors()}")
    folder = out_dir or default_results_dir(model, results_root)
    # A CI job cancelled with SIGTERM gets the same treatment as Ctrl-C: the perf_analyzer group
    # is stopped and every measured step is judged, saved and reported before exiting.
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt) if on_main_thread else None
    try:
        run = run_perf(
            spec,
            plan,
            sla=sla,
            results_dir=folder,
            perf_analyzer=tool,
            metrics_url=metrics_url,
            baseline_root=baseline_dir if save_baseline else None,
            progress=out.progress,
            on_step=out.step,
        )
    except KeyboardInterrupt:
        click.echo(f"interrupted: the steps measured so far are saved in {folder}", err=True)
        raise CommandExit(EXIT_UNMEASURED) from None
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous)
    _print_run(out, run)
    if run.error is not None:
        raise run.error  # reported after the results were saved and printed
    raise CommandExit(run.exit_code)


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _dry_run(
    spec: PerfSpec,
    plan: LadderPlan,
    sla: SLA | None,
    folder: Path,
    perf_analyzer_path: str | None,
    as_json: bool,
) -> None:
    try:
        tool = locate_perf_analyzer(perf_analyzer_path)
    except MissingComponentError as exc:
        tool = None
        click.echo(f"note: {exc.message}; showing 'perf_analyzer' in its place", err=True)
    commands = planned_commands(spec, plan, folder, tool)
    if as_json:
        echo_json(
            {
                "results_dir": str(folder),
                "sla": str(sla.with_zero_errors()) if sla else None,
                "commands": [{"name": c.name, "recorded": c.recorded, "argv": c.argv} for c in commands],
            }
        )
        return
    click.echo(f"# results would go to {folder}")
    if sla is not None:
        click.echo(f"# SLA: {sla.with_zero_errors()}")
    for command in commands:
        click.echo(f"# {command.name}{'' if command.recorded else ' (warm-up, not recorded)'}")
        click.echo(shlex.join(command.argv))


@perf.command("compare")
@click.argument("base", type=click.Path(exists=True, path_type=Path))
@click.argument("new", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--max-throughput-drop", default="5%", show_default=True, help="Largest allowed throughput drop."
)
@click.option("--max-p99-rise", default="10%", show_default=True, help="Largest allowed p99 latency rise.")
@click.option(
    "--save-baseline", is_flag=True, help="When NEW does not regress, keep it as the newest baseline."
)
@click.option(
    "--baseline-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_BASELINE_ROOT,
    show_default=True,
    help="Baselines folder (one subfolder per model).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_command(
    base: Path,
    new: Path,
    max_throughput_drop: str,
    max_p99_rise: str,
    save_baseline: bool,
    baseline_dir: Path,
    as_json: bool,
) -> None:
    """Compare run NEW against BASE; exit 1 on a regression.

    BASE and NEW are result.json files, run folders, or a model's baseline folder (its newest
    baseline is used). Steps are matched by load; a regression is a throughput drop or p99 rise
    past the limits at any matched load or at peak throughput, or failed requests appearing.

    \b
    Example:
      tritonkit perf compare results/baselines/resnet results/20261129T101500Z-resnet \\
          --max-throughput-drop 5% --max-p99-rise 10%
    """
    drop = parse_percent(max_throughput_drop, option="--max-throughput-drop")
    rise = parse_percent(max_p99_rise, option="--max-p99-rise")
    base_result, base_path = load_result(base)
    new_result, new_path = load_result(new)
    comparison = compare_results(base_result, new_result, max_throughput_drop=drop, max_p99_rise=rise)
    saved = keep_baseline(new_result, baseline_dir) if save_baseline and not comparison.regressed else None
    if as_json:
        echo_json(
            {"base": str(base_path), "new": str(new_path), "baseline_saved": saved, **comparison.to_dict()}
        )
    else:
        click.echo(f"base: {base_path}")
        click.echo(f"new:  {new_path}")
        click.echo(comparison.table())
        for note in comparison.notes:
            click.echo(f"note: {note}")
        click.secho(comparison.summary(), fg="red" if comparison.regressed else "green")
        if saved:
            click.echo(f"baseline saved: {saved}")
        elif save_baseline:
            click.echo("baseline not saved: the new run regressed")
    raise CommandExit(comparison.exit_code)


@perf.command("report")
@click.argument("result", type=click.Path(exists=True, path_type=Path))
@click.option("--sla", "sla_text", default=None, help="Judge the steps again against this SLA. " + _SLA_HELP)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write report.md / report.html (default: next to RESULT).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and paths as JSON.")
def report_command(result: Path, sla_text: str | None, out_dir: Path | None, as_json: bool) -> None:
    """Re-render report.md and report.html from a saved RESULT (result.json or its run folder).

    With --sla the steps are judged again; the exit status is the verdict's (0, 1, 2).

    \b
    Example:
      tritonkit perf report results/20261129T101500Z-resnet/result.json --sla 'p99<=40ms'
    """
    sla = load_sla(sla_text) if sla_text else None
    run = rejudge(result, sla, out_dir=out_dir)
    out = _Output(as_json=as_json, quiet=True)
    _print_run(out, run)
    raise CommandExit(run.verdict.exit_code if run.verdict else 0)


@perf.command("install")
@click.option(
    "--version",
    "version",
    default=PERF_ANALYZER_VERSION,
    show_default=True,
    help="perf_analyzer wheel version to fetch.",
)
@click.option(
    "--wheel",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Install from a local perf_analyzer wheel instead of downloading one.",
)
@click.option("--force", is_flag=True, help="Reinstall even when the same version is installed.")
@click.option("--quiet", is_flag=True, help="No progress lines; print only what runs.")
@click.option("--json", "as_json", is_flag=True, help="Print what was installed as JSON.")
def install_command(version: str, wheel: Path | None, force: bool, as_json: bool, quiet: bool) -> None:
    """Install the real perf_analyzer into this environment (natively, or with private runtime libraries).

    Never touches the system's libraries or apt sources. Idempotent.

    \b
    Example:
      tritonkit perf install
    """
    progress = None if as_json or quiet else (lambda message: click.echo(message, err=True))
    installed = install_perf_analyzer(version=version, wheel=wheel, force=force, progress=progress)
    if as_json:
        echo_json(
            {
                "binary": str(installed.binary),
                "argv": list(installed.argv),
                "mode": installed.mode,
                "version": installed.version,
                "source": installed.source,
                "install_dir": str(installed.install_dir) if installed.install_dir else None,
            }
        )
    else:
        click.echo(installed.describe())


COMMANDS: list[click.Command] = [perf]
