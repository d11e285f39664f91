"""``tritonkit perf``: load ladders against SLAs with the real perf_analyzer, reports, baselines.

Each command parses its options, calls one function of :mod:`tritonkit.perf` and prints the
outcome with :class:`tritonkit.perf.report.terminal.Terminal`. Output is made for build servers: on a terminal, progress lines (rich) on stderr and a readable
summary; piped or under CI, one ``key=value`` line per step and per result on stdout, nothing
else; ``--json`` prints one JSON document. Exit codes: 0 SLA met / no regression, 1 SLA missed /
regression, 2 could not measure (or any other error), 3 inside the noise (no load clearly meets
the SLA and some is within its measurement noise of it / the change is within the runs' noise).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from tritonkit._values import check_http_url
from tritonkit.cli._common import (
    HOST_PORT,
    CommandExit,
    ErrorHandlingGroup,
    Percent,
    UserPath,
    Words,
    check_model_name,
    dial_options,
    echo_result,
    levels_type,
    number,
    rate_tolerance_option,
    sigterm_as_interrupt,
    sla_option,
)
from tritonkit.cli.ci import ci_report
from tritonkit.cli.perf_cluster import cluster_load_tests, cluster_run_options
from tritonkit.cli.perf_llm import (
    llm_options,
    options_from_kwargs,
    print_llm_comparison,
    print_llm_report,
    reject_stray_llm_options,
    run_llm_command,
)
from tritonkit.cli.sweep import sweep_command
from tritonkit.perf.command import LoadTestSettings, load_test
from tritonkit.perf.judge.compare import DEFAULT_BASELINE_ROOT, BaselineComparison, parse_percent
from tritonkit.perf.judge.sla import load_sla
from tritonkit.perf.measure.input_data import DEFAULT_SEQ_LEN
from tritonkit.perf.measure.spec import PerfSpec
from tritonkit.perf.pipeline import LLMRun
from tritonkit.perf.report.terminal import Terminal
from tritonkit.perf.stored import (
    DEFAULT_MAX_P99_RISE,
    DEFAULT_MAX_THROUGHPUT_DROP,
    DEFAULT_RUN_NOISE,
    DEFAULT_TAIL_RUN_NOISE,
    ENGINE_RUN_NOISE,
    ENGINE_TAIL_RUN_NOISE,
    compare_stored,
    rerender,
)
from tritonkit.provision.perf_analyzer import PERF_ANALYZER_ENV, PERF_ANALYZER_VERSION, install_perf_analyzer

#: What ``perf run`` judges: every metric of the registry, and an implied errors==0.
_SLA_TERMS = (
    "Metrics p50 p90 p95 p99 mean queue throughput errors error_rate; with --llm also ttft_p99 "
    "itl_p99 (p50 p90 p95 mean too) tokens_per_s user_tokens_per_s goodput; units ms us s, /s, %. "
    "errors==0 is added unless errors or error_rate is bounded."
)
#: ``perf run``'s option defaults are the library's (:class:`LoadTestSettings`), so the two cannot drift.
_D = LoadTestSettings.default


def _out_option(help_text: str) -> Any:
    """The ``--out FOLDER`` option (``out_dir``) of ``perf run`` and ``perf report``."""
    return click.option("--out", "out_dir", type=UserPath(file_okay=False, path_type=Path), default=None,
                        help=help_text)


#: ``--baseline-dir`` of ``perf run`` and ``perf compare``.
_baseline_dir_option = click.option(
    "--baseline-dir",
    type=UserPath(file_okay=False, path_type=Path),
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
@click.argument("model", type=Words(check_model_name, example="resnet"))
@click.option(
    "--url", type=HOST_PORT, default=None, help="Server host:port (default 127.0.0.1:8001 for gRPC, :8000 for HTTP)."
)
@click.option("--protocol", type=click.Choice(["grpc", "http", "openai"]), default=_D("protocol"), show_default=True,
              help="Triton over gRPC or HTTP; with --llm also 'openai': an OpenAI-compatible HTTP server "
                   "(vLLM, SGLang, trtllm-serve, Triton's OpenAI frontend; MODEL is the name it serves).")
@sla_option(_SLA_TERMS)
@click.option(
    "--concurrency",
    type=levels_type("concurrency"),
    default=None,
    help="Concurrency levels: '1,2,4,8', a doubling range '1:16', or 'start:end:step'. Default 1:8.",
)
@click.option(
    "--request-rate", type=levels_type("request_rate"), default=None, help="Request-rate levels (req/s) instead, e.g. '50:400' or '50,100'."
)
@click.option(
    "--distribution",
    type=click.Choice(["constant", "poisson"]),
    default=_D("distribution"),
    show_default=True,
    help="Request-rate arrival process.",
)
@rate_tolerance_option()
@click.option(
    "--duration-s",
    type=number(LoadTestSettings, "duration_s"),
    default=_D("duration_s"),
    show_default=True,
    help="Measuring time per step (three windows of a third each; an unstable step takes longer).",
)
@click.option(
    "--max-trials", type=number(LoadTestSettings, "max_trials"), default=_D("max_trials"), show_default=True, help="Windows per step before it is unstable."
)
@click.option(
    "--warmup-s", type=number(LoadTestSettings, "warmup_s"), default=_D("warmup_s"), show_default=True, help="Unrecorded warm-up before the ladder."
)
@click.option(
    "--stop-after", type=number(LoadTestSettings, "stop_after"), default=_D("stop_after"), show_default=True, help="Stop after this many SLA-breaking steps."
)
@click.option("--batch-size", type=number(LoadTestSettings, "batch_size"), default=_D("batch_size"), show_default=True)
@click.option("--input-data", type=Words(example="random"), default=None,
              help="'zero', 'random', or a perf_analyzer JSON data file.")
@click.option("--shape", "shapes", type=Words(example="INPUT0:3,224,224"), multiple=True, help="Shape of a variable-size input: NAME:D1,D2 (repeat).")
@click.option(
    "--repo", "model_repo", type=UserPath(file_okay=False, path_type=Path), default=None,
    help="Model repository holding MODEL's model.onnx: valid input data is derived from it "
         "(token ids within the vocabulary, masks of ones, finite floats). Default: ./model_repository if it has MODEL. "
         "With --llm: the served repository on this machine, where the preprocessing model's tokenizer_dir is "
         "read when the server's path is not a folder here.",
)
@click.option(
    "--seq-len", type=Words(example="128"), default=None,
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
@click.option("--metrics-url", type=Words(check_http_url, example="http://127.0.0.1:8002/metrics"), default=None,
              help="Server /metrics URL to scrape during each step.")
@_out_option("Run folder (default results/<UTC>-<model>); an earlier run there is resumed.")
@click.option(
    "--results-root",
    type=UserPath(file_okay=False, path_type=Path),
    default=_D("results_root"),
    show_default=True,
    help="Where timestamped run folders go.",
)
@click.option("--save-baseline", is_flag=True, help="Also keep the run as a timestamped baseline.")
@_baseline_dir_option
@click.option(
    "--perf-analyzer",
    "perf_analyzer_path",
    type=Words(example="/usr/local/bin/perf_analyzer"),
    default=None,
    help=f"perf_analyzer binary to run (default: ${PERF_ANALYZER_ENV}, else the installed one).",
)
@click.option(
    "--timeout-s", type=number(LoadTestSettings, "timeout_s"), default=_D("timeout_s"), show_default=True, help="Limit for the whole ladder."
)
@click.option(
    "--repeat", type=number(LoadTestSettings, "repeat"), default=_D("repeat"), show_default=True,
    help="Run the ladder this many times (each into run-<i>/) and judge each figure's median over the runs, "
         "with its 95 % interval over them: the spread from run to run, not only within one run.",
)
@click.option("--dry-run", is_flag=True, help="Print the perf_analyzer commands; run nothing, write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
@click.option("--quiet", is_flag=True, help="No progress lines on a terminal.")
@llm_options
@cluster_run_options
@dial_options
def run_command(
    model: str,
    sla_text: str | None,
    shapes: tuple[str, ...],
    model_repo: Path | None,
    out_dir: Path | None,
    save_baseline: bool,
    baseline_dir: Path,
    perf_analyzer_path: str | None,
    dry_run: bool,
    as_json: bool,
    quiet: bool,
    llm: bool = False,
    cluster: str | None = None,
    clients: int | None = None,
    **options: Any,
) -> None:
    """Climb a load ladder against MODEL, judge it against the SLA, write results and a report.

    Results go to results/<UTC timestamp>-<model>/: raw perf_analyzer files, result.json,
    report.md and report.html. Each step is judged on its 95 % interval. Exit status: 0 SLA met
    at some load, 1 SLA missed (or outputs wrong: dtype or shape unlike the config, or unlike ONNX
    Runtime with --check-outputs), 2 nothing could be measured (or an error, failed requests
    included), 3 inside the noise: no load clearly meets the SLA, and at some load its bound lies
    inside the measured interval (measure again: longer --duration-s, or --repeat N).
    A step perf_analyzer cannot call stable is measured once more over fixed windows and kept as
    a noisy measurement (the medians of its windows), never dropped.

    \b
    Example:
      tritonkit perf run resnet --url 127.0.0.1:8001 \\
          --sla 'p99<=50ms,throughput>=200/s,errors==0' --concurrency 1:16 --duration-s 6
      tritonkit perf run ensemble --llm --sla 'ttft_p99<=500ms,itl_p99<=40ms' --concurrency 1,4

      tritonkit perf run tiny-llama --llm --protocol openai --url 127.0.0.1:8000 --concurrency 1,8

    With --llm: a streaming LLM load test (TTFT, inter-token latency, tokens/s, goodput;
    --traffic ramp/spike/soak/replay); results in llm_result.json and llm_report.md.

    With --cluster ADDR --clients N (a Ray cluster): every step from N nodes at once against the one
    --url, each with its share of the load, started together; every request merged (exact
    percentiles, throughput over the common window); result.json names each client and its node:

    \b
      tritonkit perf run resnet --url 10.0.0.9:8001 --cluster 10.0.0.5:6379 --clients 4 \\
          --concurrency 8:64 --sla 'p99<=50ms'
    """
    on_cluster, llm_on_cluster = cluster_load_tests(cluster, clients)
    llm_settings = options_from_kwargs(options)
    if not llm:
        reject_stray_llm_options(llm_settings)
    # The other options are named as LoadTestSettings' fields (url, protocol, concurrency, duration_s, …).
    settings = LoadTestSettings(
        sla=sla_text, shapes=PerfSpec.shapes_from_text(shapes) if not llm else {}, repo=model_repo, out=out_dir,
        baseline_root=baseline_dir if save_baseline else None, perf_analyzer=perf_analyzer_path, **options,
    )
    if llm:
        # --concurrency, --timeout-s and --repo describe the LLM load too: they are LLMSettings' own there.
        load = replace(llm_settings, repo=model_repo, timeout_s=settings.timeout_s,
                       concurrency=options["concurrency"] or llm_settings.concurrency)
        run_llm_command(model, settings, load, dry_run=dry_run, as_json=as_json, quiet=quiet, runner=llm_on_cluster)
        return
    out = Terminal(as_json=as_json, quiet=quiet)
    with sigterm_as_interrupt():
        test = (on_cluster or load_test)(model, settings, dry_run=dry_run, progress=out.progress, on_step=out.step)
    for note in test.notes:
        click.echo(f"note: {note}", err=True)
    if test.planned is not None:
        out.dry_run(test.results_dir, test.sla, test.planned)
        return
    if test.wrong_outputs:
        for problem in test.wrong_outputs:
            click.echo(f"error: model '{model}': {problem}", err=True)
        click.echo("  fix: make the model return what its config declares (or fix the config); "
                   "nothing was measured", err=True)
        raise CommandExit(test.exit_code)
    if test.interrupted or test.run is None:
        click.echo(f"interrupted: the steps measured so far are saved in {test.results_dir}", err=True)
        raise CommandExit(test.exit_code)
    out.run(test.run)
    ci_report(test.run)
    if test.run.error is not None:
        raise test.run.error  # reported after the results were saved and printed
    if test.output_check is not None:
        click.echo(test.output_check.summary(), err=True)
    raise CommandExit(test.exit_code)


@perf.command("compare")
@click.argument("base", type=UserPath(exists=True, path_type=Path))
@click.argument("new", type=UserPath(exists=True, path_type=Path))
@click.option(
    "--max-throughput-drop", type=Words(example="5%"), default=f"{DEFAULT_MAX_THROUGHPUT_DROP:.0%}", show_default=True,
    help="Largest allowed throughput drop.",
)
@click.option("--max-p99-rise", type=Words(example="10%"), default=f"{DEFAULT_MAX_P99_RISE:.0%}", show_default=True,
              help="Largest allowed p99 latency rise.")
@click.option(
    "--save-baseline", is_flag=True, help="When NEW does not regress, keep it as the newest baseline."
)
@click.option("--per-step", is_flag=True,
              help="Also gate every load both runs measured (throughput and p99), not only peak throughput.")
@click.option("--run-noise", type=Percent(), default=None,
              show_default=f"{DEFAULT_RUN_NOISE:.0%}; LLM runs on an OpenAI endpoint {ENGINE_RUN_NOISE:.0%}",
              help="How far single runs of one build spread between fresh servers (a coefficient of "
                   "variation), added to a run measured once; 0% trusts its windows alone. Measure "
                   "yours with benchmarks/gate_truth.py (LLM: llm_gate_truth.py, llm_gate_vllm.py).")
@click.option("--tail-run-noise", type=Percent(), default=None,
              show_default=f"{DEFAULT_TAIL_RUN_NOISE:.0%}; on an OpenAI endpoint {ENGINE_TAIL_RUN_NOISE:.0%}",
              help="LLM runs: the same spread for a latency percentile (TTFT, ITL p99), which moves more "
                   "between runs than a rate. Measure yours with benchmarks/llm_gate_truth.py.")
@_baseline_dir_option
@click.option("--accept-runtime-change", is_flag=True,
              help="Compare runs measured on different runtimes (backend, stand-in, engine version) instead of "
                   "refusing; the comparison then says so.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_command(
    base: Path,
    new: Path,
    max_throughput_drop: str,
    max_p99_rise: str,
    save_baseline: bool,
    per_step: bool,
    run_noise: float | None,
    tail_run_noise: float | None,
    baseline_dir: Path,
    accept_runtime_change: bool,
    as_json: bool,
) -> None:
    """Compare run NEW against BASE: regression (exit 1), no regression (0), inside the noise (3).

    BASE and NEW are result.json files, run folders, or a model's baseline folder (its newest
    baseline is used). Classic runs are gated on each run's peak throughput within its SLA
    (without an SLA: its peak throughput), decided by the 95 % interval of the change from the
    runs' windows, widened by --run-noise for a run measured once (with --repeat, its runs
    measure that spread): a regression when the drop is past --max-throughput-drop and the interval
    excludes no change, no regression when the whole interval is above the limit, inside the noise
    otherwise. --per-step gates every matched load's throughput and p99 the same way. Failed
    requests appearing are always a regression. LLM runs (llm_result.json) are judged by the same
    rule at every load: TTFT and ITL p99 against --max-p99-rise, tokens/s and goodput against
    --max-throughput-drop, each on the interval of its change from the runs' requests (bootstrap),
    widened by --run-noise (rates) and --tail-run-noise (percentiles); a percentile of too few
    requests (a p99 of fewer than 381) is inside the noise. Runs on an OpenAI endpoint spread far more
    between runs: unless both spreads are named they get the engine's (measured on vLLM), and a change
    inside that spread is inside the noise, with the advice to repeat (perf run --llm --repeat 3).

    \b
    Example:
      tritonkit perf compare results/baselines/resnet results/20261129T101500Z-resnet \\
          --max-throughput-drop 5% --max-p99-rise 10%
    """
    stored = compare_stored(base, new, max_throughput_drop=parse_percent(max_throughput_drop, option="--max-throughput-drop"),
                            max_p99_rise=parse_percent(max_p99_rise, option="--max-p99-rise"),
                            baseline_root=baseline_dir if save_baseline else None, per_step=per_step,
                            accept_runtime_change=accept_runtime_change,
                            run_noise=run_noise, tail_run_noise=tail_run_noise)
    if isinstance(stored.comparison, BaselineComparison):
        Terminal(as_json=as_json, quiet=True).comparison(
            stored.comparison, stored.base_path, stored.new_path, saved=stored.saved, save_requested=save_baseline
        )
    else:
        print_llm_comparison(stored.comparison, stored.base_path, stored.new_path, stored.saved, as_json=as_json)
    ci_report(stored)
    raise CommandExit(stored.exit_code)


@perf.command("report")
@click.argument("result", type=UserPath(exists=True, path_type=Path))
@sla_option("The steps are judged again against it. " + _SLA_TERMS)
@_out_option("Where to write report.md / report.html (default: next to RESULT).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict and paths as JSON.")
def report_command(result: Path, sla_text: str | None, out_dir: Path | None, as_json: bool) -> None:
    """Re-render report.md and report.html from a saved RESULT (result.json or its run folder).

    With --sla the steps are judged again; the exit status is the verdict's (0 met, 1 missed,
    2 could not measure, 3 inside the noise).

    \b
    Example:
      tritonkit perf report results/20261129T101500Z-resnet/result.json --sla 'p99<=40ms'
    """
    run = rerender(result, load_sla(sla_text) if sla_text is not None else None, out_dir=out_dir)
    if isinstance(run, LLMRun):
        print_llm_report(run, as_json=as_json)
        if run.error is not None:
            raise run.error  # the verdict is saved; only the report is missing
    else:
        Terminal(as_json=as_json, quiet=True).run(run)
    raise CommandExit(run.verdict.exit_code if run.verdict else 0)


@perf.command("install")
@click.option(
    "--version",
    "version",
    type=Words(example=PERF_ANALYZER_VERSION),
    default=PERF_ANALYZER_VERSION,
    show_default=True,
    help="perf_analyzer wheel version to fetch.",
)
@click.option(
    "--wheel",
    type=UserPath(exists=True, dir_okay=False, path_type=Path),
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
    echo_result(installed, as_json, installed.describe)


perf.add_command(sweep_command)

COMMANDS: list[click.Command] = [perf]
