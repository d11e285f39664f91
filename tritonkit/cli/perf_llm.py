"""The ``--llm`` side of ``tritonkit perf run``: streaming LLM load tests.

``llm_options`` adds the LLM options to a click command; ``run_llm_command`` does the work
(prompts → perf_analyzer steps → metrics → SLA verdict → ``llm_result.json`` and
``llm_report.md``) and raises ``CommandExit`` with the verdict's exit status.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import click

from tritonkit._fs import atomic_write
from tritonkit.cli._common import CommandExit, echo_json, sigterm_as_interrupt
from tritonkit.errors import ConfigError
from tritonkit.repository.units import to_microseconds

__all__ = ["LLMOptions", "compare_llm_command", "find_llm_result", "llm_options", "reject_stray_llm_options",
           "report_llm_command", "run_llm_command"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class LLMOptions:
    """The ``--llm`` options as given on the command line."""

    prompts: Path | None = None
    input_tokens: str = "128"
    output_tokens: str = "64"
    num_prompts: int = 100
    seed: int = 0
    traffic: str | None = None
    requests: int = 32
    stream: bool | None = None
    client_deadline: str | None = None
    goodput: str | None = None
    settle_s: float = 2.0


_LLM_OPTIONS = [
    click.option("--llm", is_flag=True,
                 help="Measure as an LLM: streamed TTFT, inter-token latency, tokens/s, goodput (GenAI-Perf's definitions)."),
    click.option("--prompts", "llm_prompts", type=click.Path(dir_okay=False, path_type=Path), default=None,
                 help='--llm: JSONL prompts, one {"text": ..., "output_tokens": N} a line (default: synthetic).'),
    click.option("--input-tokens", "llm_input_tokens", default="128", show_default=True,
                 help="--llm synthetic prompts: input length MEAN[:STDDEV] in tokens."),
    click.option("--output-tokens", "llm_output_tokens", default="64", show_default=True,
                 help="--llm synthetic prompts: output length MEAN[:STDDEV] in tokens."),
    click.option("--num-prompts", "llm_num_prompts", type=int, default=100, show_default=True,
                 help="--llm: synthetic prompts to generate (requests cycle through them)."),
    click.option("--seed", "llm_seed", type=int, default=0, show_default=True, help="--llm: prompt generator seed."),
    click.option("--traffic", "llm_traffic", default=None,
                 help="--llm traffic shape instead of concurrency levels: 'ramp:1-8/s,4,10', "
                      "'spike:2/s,20/s,5,3,10', 'soak:4/s,600' or 'replay:log.jsonl[,SPEED]'."),
    click.option("--requests", "llm_requests", type=int, default=32, show_default=True,
                 help="--llm: requests sent at each concurrency level."),
    click.option("--stream/--no-stream", "llm_stream", default=None,
                 help="--llm: stream responses (default: on for decoupled models)."),
    click.option("--client-deadline", "llm_client_deadline", default=None,
                 help="--llm: requests slower than this (e.g. '2s') count as client time-outs."),
    click.option("--goodput", "llm_goodput", default=None,
                 help="--llm: per-request objectives for goodput, e.g. 'ttft=500ms,itl=40ms' "
                      "(default: the SLA's TTFT / ITL / latency bounds)."),
    click.option("--settle-s", "llm_settle_s", type=float, default=2.0, show_default=True,
                 help="--llm: seconds the server is still watched after a traffic shape, for its recovery."),
]


def llm_options(func: F) -> F:
    """Add the ``--llm`` options to a click command (they arrive as ``llm`` and ``llm_*`` keywords)."""
    for option in reversed(_LLM_OPTIONS):
        func = option(func)
    return func


def options_from_kwargs(kwargs: dict[str, Any]) -> LLMOptions:
    """Pop the ``llm_*`` keywords click passed into an ``LLMOptions``."""
    return LLMOptions(
        prompts=kwargs.pop("llm_prompts", None),
        input_tokens=kwargs.pop("llm_input_tokens", "128"),
        output_tokens=kwargs.pop("llm_output_tokens", "64"),
        num_prompts=kwargs.pop("llm_num_prompts", 100),
        seed=kwargs.pop("llm_seed", 0),
        traffic=kwargs.pop("llm_traffic", None),
        requests=kwargs.pop("llm_requests", 32),
        stream=kwargs.pop("llm_stream", None),
        client_deadline=kwargs.pop("llm_client_deadline", None),
        goodput=kwargs.pop("llm_goodput", None),
        settle_s=kwargs.pop("llm_settle_s", 2.0),
    )


def reject_stray_llm_options(kwargs: dict[str, Any]) -> None:
    """A ``--llm`` option given without ``--llm`` is a mistake, not something to ignore silently."""
    given = options_from_kwargs(dict(kwargs))
    stray = [f"--{f.name.replace('_', '-')}" for f in fields(LLMOptions) if getattr(given, f.name) != f.default]
    if stray:
        raise ConfigError(f"{', '.join(stray)} only apply to LLM load tests", hint="add --llm, or drop them")


def _mean_spread(text: str, what: str) -> tuple[float, float]:
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(?::\s*(\d+(?:\.\d*)?)\s*)?", text)
    if match is None:
        raise ConfigError(f"{what} {text!r} is not MEAN[:STDDEV]", hint="e.g. 128 or 128:16 (tokens)")
    return float(match.group(1)), float(match.group(2) or 0.0)


def _ms(text: str, what: str) -> float:
    return to_microseconds(text.strip(), field=what) / 1000.0


def parse_goodput(text: str) -> Any:
    """``'ttft=500ms,itl=40ms,latency=2s'`` → ``GoodputSLO``."""
    from tritonkit.perf.llm.metrics import GoodputSLO

    fields = {"ttft": "ttft_ms", "itl": "itl_ms", "latency": "latency_ms"}
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in fields:
            raise ConfigError(f"cannot read goodput objective {part!r}", hint="use ttft=500ms,itl=40ms,latency=2s")
        values[fields[key]] = _ms(value, f"--goodput {key}")
    return GoodputSLO(**values)


def run_llm_command(
    *,
    model: str,
    url: str | None,
    sla_text: str | None,
    concurrency: str | None,
    metrics_url: str | None,
    out_dir: Path | None,
    results_root: Path,
    perf_analyzer_path: str | None,
    dry_run: bool,
    as_json: bool,
    quiet: bool,
    options: LLMOptions,
    baseline_dir: Path | None = None,
    protocol: str = "grpc",
    timeout_s: float = 600.0,
) -> None:
    """Run ``perf run MODEL --llm``: measure, judge, write the report, exit with the verdict's status."""
    from tritonkit.perf.judge.sla import load_sla
    from tritonkit.perf.judge.verdict import EXIT_UNMEASURED
    from tritonkit.perf.llm.judge import evaluate_llm, goodput_slo_from_sla
    from tritonkit.perf.llm.prompts import load_prompts, synthetic_prompts
    from tritonkit.perf.llm.report import write_llm_report
    from tritonkit.perf.llm.run import LLMPlan, run_llm
    from tritonkit.perf.llm.shapes import parse_shape
    from tritonkit.perf.measure.plan import default_results_dir, levels_from_text
    from tritonkit.provision.perf_analyzer import locate_perf_analyzer

    if protocol != "grpc":
        raise ConfigError("--llm streams over gRPC only", hint="drop --protocol http")
    sla = load_sla(sla_text) if sla_text is not None else None
    if options.prompts is not None:
        prompts = load_prompts(options.prompts)
        source = str(options.prompts)
    else:
        isl, isl_sd = _mean_spread(options.input_tokens, "--input-tokens")
        osl, osl_sd = _mean_spread(options.output_tokens, "--output-tokens")
        prompts = synthetic_prompts(options.num_prompts, input_tokens_mean=isl, input_tokens_stddev=isl_sd,
                                    output_tokens_mean=osl, output_tokens_stddev=osl_sd, seed=options.seed)
        source = (f"synthetic (seed {options.seed}, {options.num_prompts} prompts, input {options.input_tokens}, "
                  f"output {options.output_tokens} tokens)")
    shape = parse_shape(options.traffic) if options.traffic else None
    levels = tuple(int(v) for v in levels_from_text(concurrency or "1")) if shape is None else (1,)
    if any(level < 1 for level in levels):
        raise ConfigError(f"concurrency levels must be >= 1, got {list(levels)}", hint="e.g. --concurrency 1,2,4")
    if options.requests < 1:
        raise ConfigError(f"--requests must be >= 1, got {options.requests}")
    goodput = parse_goodput(options.goodput) if options.goodput else goodput_slo_from_sla(sla)
    deadline = _ms(options.client_deadline, "--client-deadline") if options.client_deadline else None
    plan = LLMPlan(concurrency=levels, requests_per_level=options.requests, shape=shape, goodput_slo=goodput,
                   client_deadline_ms=deadline, settle_s=options.settle_s, step_timeout_s=timeout_s)
    folder = out_dir or default_results_dir(model, results_root)
    target = url or "127.0.0.1:8001"
    if dry_run:
        what = options.traffic or f"concurrency {', '.join(map(str, levels))} × {options.requests} requests"
        click.echo(f"would run an LLM load test on {model} at {target}: {what}; prompts: {source}; into {folder}")
        return
    tool = locate_perf_analyzer(perf_analyzer_path)
    say = (lambda _m: None) if quiet or as_json else (lambda m: click.echo(m, err=True))
    try:
        with sigterm_as_interrupt():
            result = run_llm(model, target, prompts, plan, results_dir=folder, metrics_url=metrics_url,
                             streaming=options.stream, prompt_source=source, perf_analyzer=tool, progress=say)
    except KeyboardInterrupt:
        click.echo(f"interrupted: files so far are in {folder}", err=True)
        raise CommandExit(EXIT_UNMEASURED) from None
    verdict = evaluate_llm(sla, result) if sla is not None else None
    report = write_llm_report(result, folder, verdict)
    if verdict is not None:
        data = result.to_dict()
        data["verdict"] = verdict.to_dict()
        atomic_write(folder / "llm_result.json", json.dumps(data, indent=1) + "\n")
    baseline = None
    if baseline_dir is not None:
        from tritonkit.perf.llm.compare import save_llm_baseline

        baseline = save_llm_baseline(result, baseline_dir)
    if as_json:
        echo_json({"result": str(folder / "llm_result.json"), "report": str(report),
                   "baseline": None if baseline is None else str(baseline),
                   "verdict": None if verdict is None else verdict.to_dict(), "steps": [s.to_dict() for s in result.steps]})
    else:
        for step in result.steps:
            click.echo(_summary_line(step))
        if verdict is not None:
            click.echo(verdict.summary())
        click.echo(f"report: {report}")
        if baseline is not None:
            click.echo(f"baseline: {baseline}")
    if verdict is not None:
        raise CommandExit(verdict.exit_code)
    # Without an SLA: 0 clean, 1 measured but some requests failed, 2 nothing measured.
    if not any(s.metrics is not None for s in result.steps):
        raise CommandExit(EXIT_UNMEASURED)
    raise CommandExit(0 if all(s.failures.total == 0 for s in result.steps) else 1)


def _summary_line(step: Any) -> str:
    m = step.metrics
    label = f"concurrency={step.load_value:g}" if step.load_mode == "concurrency" else f"traffic={step.load_mode}"
    parts = [label]
    if m is not None and m.ttft_ms is not None:
        parts += [f"ttft_p50_ms={m.ttft_ms.p50:.1f}", f"ttft_p99_ms={m.ttft_ms.p99:.1f}"]
        if m.itl_ms is not None:
            parts += [f"itl_p50_ms={m.itl_ms.p50:.2f}", f"itl_p99_ms={m.itl_ms.p99:.2f}"]
        parts += [f"tokens_per_s={m.output_token_throughput_per_s or 0:.1f}",
                  f"requests_per_s={m.request_throughput_per_s or 0:.2f}"]
        if m.goodput_per_s is not None:
            parts.append(f"goodput_per_s={m.goodput_per_s:.2f}")
    if step.recovery is not None:
        parts.append(f"recovery_s={'none' if step.recovery.recovery_s is None else f'{step.recovery.recovery_s:.2f}'}")
    parts.append(f"failures={step.failures.total}")
    if step.failures.hit:
        parts.append(f"failure_class={step.failures.hit}")
    return " ".join(parts)


def find_llm_result(path: Path) -> Path | None:
    """The LLM result ``path`` names: the file itself, a run folder's ``llm_result.json``, or the
    newest ``llm-*.json`` baseline in a model's baseline folder; ``None`` when it holds none."""
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None
        return path if isinstance(data, dict) and data.get("kind") == "llm" else None
    if (path / "llm_result.json").is_file():
        return path / "llm_result.json"
    found = sorted(path.glob("llm-*.json"))
    return found[-1] if found else None


def compare_llm_command(
    base: Path, new: Path, *, max_rise: float, max_drop: float, save_baseline: bool, baseline_dir: Path, as_json: bool
) -> None:
    """``perf compare`` on LLM results: TTFT / ITL p99 may rise by ``max_rise``, tokens/s and goodput
    fall by ``max_drop``; exits 0 (no regression) or 1."""
    from tritonkit.perf.llm.compare import compare_llm_results, save_llm_baseline
    from tritonkit.perf.llm.result import LLMResult

    base_path, new_path = find_llm_result(base), find_llm_result(new)
    if base_path is None or new_path is None:
        missing = base if base_path is None else new
        raise ConfigError(f"{missing} holds no LLM result (llm_result.json)",
                          hint="compare two LLM runs, or two classic runs, not one of each")
    base_result, new_result = LLMResult.load(base_path), LLMResult.load(new_path)
    comparison = compare_llm_results(base_result, new_result, max_ttft_rise=max_rise, max_itl_rise=max_rise,
                                     max_tokens_drop=max_drop)
    saved = save_llm_baseline(new_result, baseline_dir) if save_baseline and comparison.passed else None
    if as_json:
        echo_json({**comparison.to_dict(), "base": str(base_path), "new": str(new_path),
                   "baseline": None if saved is None else str(saved)})
    else:
        for row in comparison.rows:
            change = "unmeasured" if row.change is None else f"{row.change * 100:+.1f}%"
            flag = " REGRESSION" if row.regressed else ""
            click.echo(f"{row.step}: {row.metric} {row.base:.4g} -> "
                       f"{'–' if row.new is None else f'{row.new:.4g}'} ({change}, limit {row.limit * 100:g}% "
                       f"{row.worse_when}){flag}")
        click.echo(comparison.summary())
        if saved is not None:
            click.echo(f"baseline: {saved}")
    raise CommandExit(comparison.exit_code)


def report_llm_command(result_path: Path, *, sla_text: str | None, out_dir: Path | None, as_json: bool) -> None:
    """``perf report`` on an LLM result: re-render ``llm_report.md`` (judged again with ``--sla``)."""
    from tritonkit.perf.judge.sla import load_sla
    from tritonkit.perf.judge.verdict import Verdict
    from tritonkit.perf.llm.judge import evaluate_llm
    from tritonkit.perf.llm.report import write_llm_report
    from tritonkit.perf.llm.result import LLMResult

    path = find_llm_result(result_path)
    if path is None:
        raise ConfigError(f"{result_path} holds no LLM result", hint="pass an llm_result.json or its run folder")
    result = LLMResult.load(path)
    verdict: Verdict | None = evaluate_llm(load_sla(sla_text), result) if sla_text is not None else None
    report = write_llm_report(result, out_dir or path.parent, verdict)
    if as_json:
        echo_json({"report": str(report), "verdict": None if verdict is None else verdict.to_dict()})
    else:
        if verdict is not None:
            click.echo(verdict.summary())
        click.echo(f"report: {report}")
    raise CommandExit(verdict.exit_code if verdict is not None else 0)
