"""``tritonkit perf``: load ladders against SLAs with the real perf_analyzer, reports, baselines.

Each command parses its options, calls one function of :mod:`tritonkit.perf` and prints the
outcome with :class:`tritonkit.perf.report.terminal.Terminal`. Output is made for build servers: on a terminal, progress lines (rich) on stderr and a readable
summary; piped or under CI, one ``key=value`` line per step and per result on stdout, nothing
else; ``--json`` prints one JSON document. Exit codes: 0 SLA met / no regression, 1 SLA missed /
regression, 2 could not measure (or any other error).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from tritonkit.cli._common import (
    HOST_PORT,
    CommandExit,
    ErrorHandlingGroup,
    echo_json,
    rate_tolerance_option,
    sigterm_as_interrupt,
    sla_option,
)
from tritonkit.cli.perf_llm import (
    compare_llm_command,
    find_llm_result,
    llm_options,
    options_from_kwargs,
    reject_stray_llm_options,
    report_llm_command,
    run_llm_command,
)
from tritonkit.cli.sweep import sweep_command
from tritonkit.errors import ConfigError, MissingComponentError
from tritonkit.perf.judge.compare import (
    DEFAULT_BASELINE_ROOT,
    compare_results,
    load_result,
    parse_percent,
)
from tritonkit.perf.judge.compare import save_baseline as keep_baseline
from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.judge.sla import SLA, load_sla
from tritonkit.perf.judge.verdict import EXIT_UNMEASURED
from tritonkit.perf.measure.input_data import DEFAULT_SEQ_LEN, SeqLen, prepare_run_inputs
from tritonkit.perf.measure.output_check import EXIT_WRONG_OUTPUTS, output_checker, preflight
from tritonkit.perf.measure.plan import LadderPlan, default_results_dir
from tritonkit.perf.measure.spec import PerfSpec
from tritonkit.perf.pipeline import planned_commands, rejudge, run_perf
from tritonkit.perf.report.terminal import Terminal
from tritonkit.provision.perf_analyzer import (
    PERF_ANALYZER_ENV,
    PERF_ANALYZER_VERSION,
    install_perf_analyzer,
    locate_perf_analyzer,
)

#: What ``perf run`` judges: every metric of the registry, and an implied errors==0.
_SLA_TERMS = (
    "Metrics p50 p90 p95 p99 mean queue throughput errors error_rate; with --llm also ttft_p99 "
    "itl_p99 (p50 p90 p95 mean too) tokens_per_s user_tokens_per_s goodput; units ms us s, /s, %. "
    "errors==0 is added unless errors or error_rate is bounded."
)




def _out_option(help_text: str) -> Any:
    """The ``--out FOLDER`` option (``out_dir``) of ``perf run`` and ``perf report``."""
    return click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                        help=help_text)


#: ``--baseline-dir`` of ``perf run`` and ``perf compare``.
_baseline_dir_option = click.option(
    "--baseline-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_BASELINE_ROOT,
    show_default=True,
    help="Baselines folder (one subfolder per model).",
)


@click.group("perf", cls=ErrorHandlingGroup)
def perf() -> None:
    """Load-test a served model with the real perf_analyzer and judge it against an SLA.

    \b
    Example:
      tritonkit perf run resnet --url 127.0.0.1:8001 --sla 'p99<=50ms,throughput>=200/s'
    """


@perf.command("run")
@click.argument("model")
@click.option(
    "--url", type=HOST_PORT, default=None, help="Server host:port (default 127.0.0.1:8001 for gRPC, :8000 for HTTP)."
)
@click.option("--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True)
@sla_option(_SLA_TERMS)
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
@rate_tolerance_option()
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
@click.option(
    "--repo", "model_repo", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="Model repository holding MODEL's model.onnx: valid input data is derived from it "
         "(token ids within the vocabulary, masks of ones, finite floats). Default: ./model_repository if it has MODEL. "
         "With --llm: the served repository on this machine, where the preprocessing model's tokenizer_dir is "
         "read when the server's path is not a folder here.",
)
@click.option(
    "--seq-len", default=None,
    help=f"Length of variable dims in derived data: N or LOW:HIGH (default {DEFAULT_SEQ_LEN}).",
)
@click.option(
    "--keep-outputs", is_flag=True,
    help="Let perf_analyzer receive (and keep) response outputs; by default a local run puts them in "
         "shared memory so its memory and profile export stay bounded.",
)
@click.option(
    "--check-outputs", is_flag=True,
    help="While the load runs, compare a sample of responses with ONNX Runtime on the model file "
         "(needs --repo) and with the declared dtypes and shapes; wrong answers exit 1.",
)
@click.option("--metrics-url", default=None, help="Server /metrics URL to scrape during each step.")
@_out_option("Run folder (default results/<UTC>-<model>); an earlier run there is resumed.")
@click.option(
    "--results-root",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="Where timestamped run folders go.",
)
@click.option("--save-baseline", is_flag=True, help="Also keep the run as a timestamped baseline.")
@_baseline_dir_option
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
@llm_options
def run_command(
    model: str,
    url: str | None,
    protocol: str,
    sla_text: str | None,
    concurrency: str | None,
    request_rate: str | None,
    distribution: str,
    rate_tolerance: float,
    duration_s: float,
    max_trials: int,
    warmup_s: float,
    stop_after: int,
    batch_size: int,
    input_data: str | None,
    shapes: tuple[str, ...],
    model_repo: Path | None,
    seq_len: str | None,
    keep_outputs: bool,
    check_outputs: bool,
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
    llm: bool = False,
    **llm_kwargs: Any,
) -> None:
    """Climb a load ladder against MODEL, judge it against the SLA, write results and a report.

    Results go to results/<UTC timestamp>-<model>/: raw perf_analyzer files, result.json,
    report.md and report.html. Exit status: 0 SLA met at some load, 1 SLA missed (or outputs wrong:
    dtype or shape unlike the config, or unlike ONNX Runtime with --check-outputs),
    2 nothing could be measured (or an error, failed requests included).

    \b
    Example:
      tritonkit perf run resnet --url 127.0.0.1:8001 \\
          --sla 'p99<=50ms,throughput>=200/s,errors==0' --concurrency 1:16 --duration-s 6
      tritonkit perf run ensemble --llm --sla 'ttft_p99<=500ms,itl_p99<=40ms' --concurrency 1,4

    With --llm: a streaming LLM load test (TTFT, inter-token latency, tokens/s, goodput;
    --traffic ramp/spike/soak/replay); results in llm_result.json and llm_report.md.
    """
    if llm:
        if model_repo is not None and not model_repo.is_dir():
            raise ConfigError(f"--repo {model_repo}: no such folder",
                              hint="give the served model repository as it is on this machine, or leave --repo out")
        run_llm_command(
            model=model, url=url, sla_text=sla_text, concurrency=concurrency, metrics_url=metrics_url,
            out_dir=out_dir, results_root=results_root, perf_analyzer_path=perf_analyzer_path, dry_run=dry_run,
            as_json=as_json, quiet=quiet, options=replace(options_from_kwargs(llm_kwargs), repo=model_repo),
            baseline_dir=baseline_dir if save_baseline else None, protocol=protocol, timeout_s=timeout_s,
        )
        return
    reject_stray_llm_options(llm_kwargs)
    sla: SLA | None = load_sla(sla_text) if sla_text is not None else None
    spec = PerfSpec(
        model=model,
        url=url or ("127.0.0.1:8001" if protocol == "grpc" else "127.0.0.1:8000"),
        protocol=protocol,  # type: ignore[arg-type]  # click.Choice limits it
        batch_size=batch_size,
        input_data=input_data,
        shapes=PerfSpec.shapes_from_text(shapes),
    )
    plan = LadderPlan.from_duration(
        duration_s,
        concurrency=concurrency,
        request_rate=request_rate,
        distribution=distribution,
        max_trials=max_trials,
        warmup_s=warmup_s,
        stop_after_sla_breaks=stop_after,
        total_timeout_s=timeout_s,
    )
    out = Terminal(as_json=as_json, quiet=quiet)
    folder = out_dir or default_results_dir(model, results_root)
    if model_repo is None and (Path("model_repository") / model).is_dir():
        model_repo = Path("model_repository")
    prepared = prepare_run_inputs(spec, folder, repo=model_repo, seq_len=SeqLen.parse(seq_len),
                                  keep_outputs=keep_outputs, write=not dry_run)
    spec = prepared.spec
    if dry_run:
        try:
            planned_tool = locate_perf_analyzer(perf_analyzer_path)
        except MissingComponentError as exc:
            planned_tool = None
            click.echo(f"note: {exc.message}; showing 'perf_analyzer' in its place", err=True)
        commands = planned_commands(spec, plan, folder, planned_tool)
        out.dry_run(folder, sla.with_zero_errors() if sla else None, commands)
        return
    tool = locate_perf_analyzer(perf_analyzer_path)
    if sla is not None:
        out.progress(f"SLA: {sla.with_zero_errors()}")
    checker = output_checker(prepared, check_outputs)
    if prepared.samples:
        wrong = preflight(spec.url, model, prepared.samples[0], version=spec.model_version or "")
        for problem in wrong:
            click.echo(f"error: model '{model}': {problem}", err=True)
        if wrong:
            click.echo("  fix: make the model return what its config declares (or fix the config); "
                       "nothing was measured", err=True)
            raise CommandExit(EXIT_WRONG_OUTPUTS)
    try:
        with sigterm_as_interrupt():
            if checker is not None:
                checker.start()
            run = run_perf(
                spec,
                plan,
                sla=sla,
                judging=JudgeSettings(rate_tolerance=rate_tolerance),
                results_dir=folder,
                perf_analyzer=tool,
                metrics_url=metrics_url,
                baseline_root=baseline_dir if save_baseline else None,
                progress=out.progress,
                on_step=out.step,
                input_notes=[f"input data: {note}" for note in prepared.notes],
            )
    except KeyboardInterrupt:
        click.echo(f"interrupted: the steps measured so far are saved in {folder}", err=True)
        raise CommandExit(EXIT_UNMEASURED) from None
    finally:
        check = checker.stop() if checker is not None else None
    out.run(run)
    if run.error is not None:
        raise run.error  # reported after the results were saved and printed
    if check is not None:
        click.echo(check.summary(), err=True)
        if not check.ok:
            raise CommandExit(EXIT_WRONG_OUTPUTS if check.problems else EXIT_UNMEASURED)
    raise CommandExit(run.exit_code)


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
@_baseline_dir_option
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
    if find_llm_result(new) is not None:
        # LLM runs: TTFT / ITL p99 may rise by --max-p99-rise, tokens/s and goodput drop by --max-throughput-drop.
        compare_llm_command(base, new, max_rise=rise, max_drop=drop, save_baseline=save_baseline,
                            baseline_dir=baseline_dir, as_json=as_json)
    base_result, base_path = load_result(base)
    new_result, new_path = load_result(new)
    comparison = compare_results(base_result, new_result, max_throughput_drop=drop, max_p99_rise=rise)
    saved = keep_baseline(new_result, baseline_dir) if save_baseline and not comparison.regressed else None
    Terminal(as_json=as_json, quiet=True).comparison(
        comparison, base_path, new_path, saved=saved, save_requested=save_baseline
    )
    raise CommandExit(comparison.exit_code)


@perf.command("report")
@click.argument("result", type=click.Path(exists=True, path_type=Path))
@sla_option("The steps are judged again against it. " + _SLA_TERMS)
@_out_option("Where to write report.md / report.html (default: next to RESULT).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and paths as JSON.")
def report_command(result: Path, sla_text: str | None, out_dir: Path | None, as_json: bool) -> None:
    """Re-render report.md and report.html from a saved RESULT (result.json or its run folder).

    With --sla the steps are judged again; the exit status is the verdict's (0, 1, 2).

    \b
    Example:
      tritonkit perf report results/20261129T101500Z-resnet/result.json --sla 'p99<=40ms'
    """
    if find_llm_result(result) is not None:
        report_llm_command(result, sla_text=sla_text, out_dir=out_dir, as_json=as_json)
    sla = load_sla(sla_text) if sla_text is not None else None
    run = rejudge(result, sla, out_dir=out_dir)
    Terminal(as_json=as_json, quiet=True).run(run)
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


perf.add_command(sweep_command)

COMMANDS: list[click.Command] = [perf]
