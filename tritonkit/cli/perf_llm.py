"""The ``--llm`` side of ``tritonkit perf``: streaming LLM load tests, their comparisons and reports.

``llm_options`` adds the LLM options to a click command; ``options_from_kwargs`` turns them into
the library's :class:`~tritonkit.perf.llm.settings.LLMSettings`; ``run_llm_command`` hands that to
:func:`tritonkit.perf.command.llm_load_test` (checks, dry run, measure → judge → ``llm_result.json``
with its verdict → ``llm_report.md`` → baseline), prints, and raises ``CommandExit`` with the run's
exit status. ``print_llm_comparison`` and ``print_llm_report`` print what ``perf compare`` and
``perf report`` found for an LLM run (:mod:`tritonkit.perf.stored`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

import click

from tritonkit.cli._common import CommandExit, UserPath, Words, echo_json, number, sigterm_as_interrupt
from tritonkit.cli.ci import ci_report
from tritonkit.errors import ConfigError
from tritonkit.perf.command import LoadTestSettings, llm_load_test
from tritonkit.perf.llm.compare import LLMComparison
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.pipeline import LLMRun

__all__ = ["LLMOptions", "llm_options", "options_from_kwargs", "print_llm_comparison", "print_llm_report",
           "reject_stray_llm_options", "run_llm_command"]

F = TypeVar("F", bound=Callable[..., Any])


#: The ``--llm`` options as given: the library's settings value, built once from click's keywords.
LLMOptions = LLMSettings
#: The options' defaults are the settings' own, so the command line and the library cannot drift.
_DEFAULT = LLMSettings()


_LLM_OPTIONS = [
    click.option("--llm", is_flag=True,
                 help="Measure as an LLM: streamed TTFT, inter-token latency, tokens/s, goodput (GenAI-Perf's definitions)."),
    click.option("--prompts", "llm_prompts", type=UserPath(dir_okay=False, path_type=Path), default=None,
                 help='--llm: JSONL prompts, one {"text": ..., "output_tokens": N} a line (default: synthetic).'),
    click.option("--input-tokens", "llm_input_tokens", type=Words(example="128:16"), default=_DEFAULT.input_tokens, show_default=True,
                 help="--llm synthetic prompts: input length MEAN[:STDDEV] in tokens."),
    click.option("--output-tokens", "llm_output_tokens", type=Words(example="64"), default=_DEFAULT.output_tokens, show_default=True,
                 help="--llm synthetic prompts: output length MEAN[:STDDEV] in tokens."),
    click.option("--num-prompts", "llm_num_prompts", type=number(LLMSettings, "num_prompts"), default=_DEFAULT.num_prompts, show_default=True,
                 help="--llm: synthetic prompts to generate (requests cycle through them)."),
    click.option("--seed", "llm_seed", type=number(LLMSettings, "seed"), default=_DEFAULT.seed, show_default=True, help="--llm: prompt generator seed."),
    click.option("--traffic", "llm_traffic", type=Words(example="ramp:1-8/s,4,10"), default=None,
                 help="--llm traffic shape instead of concurrency levels: 'ramp:1-8/s,4,10', "
                      "'spike:2/s,20/s,5,3,10', 'soak:4/s,600' or 'replay:log.jsonl[,SPEED]'."),
    click.option("--requests", "llm_requests", type=number(LLMSettings, "requests"), default=_DEFAULT.requests, show_default=True,
                 help="--llm: requests sent at each concurrency level."),
    click.option("--stream/--no-stream", "llm_stream", default=None,
                 help="--llm: stream responses (default: on for decoupled models)."),
    click.option("--client-deadline", "llm_client_deadline", type=Words(example="2s"), default=None,
                 help="--llm: requests slower than this (e.g. '2s') count as client time-outs."),
    click.option("--goodput", "llm_goodput", type=Words(example="ttft=500ms,itl=40ms"), default=None,
                 help="--llm: per-request objectives for goodput, e.g. 'ttft=500ms,itl=40ms' "
                      "(default: the SLA's TTFT / ITL / latency bounds)."),
    click.option("--interface", "llm_interface", default=None,
                 type=click.Choice(["text", "ids", "llmapi", "vllm", "text_io", "generic"]),
                 help="--llm: the request interface (default: from the model's inputs; a decoupled model of none "
                      "of them is timed per response as 'generic')."),
    click.option("--tokenizer", "llm_tokenizer", type=UserPath(exists=True, path_type=Path), default=None,
                 help="--llm: the model's tokenizer.json (or its folder): prompt lengths in its tokens, not words "
                      "(default: a TensorRT-LLM pipeline's own, its preprocessing model's tokenizer_dir); with "
                      "--protocol openai also the output lengths where the server sends no usage."),
    click.option("--trtllm-version", "llm_trtllm_version", type=Words(example="0.19"), default=None,
                 help="--llm: the TensorRT-LLM line requests are written for (0.17, 0.18, 0.19, 1.x; default: read "
                      "from the served models' inputs)."),
    click.option("--token-output", "llm_token_output", type=Words(example="output_ids"), default=None,
                 help="--llm: the model's output whose elements are its tokens (default: output_ids or an integer "
                      "output named like ids, else one token per response with new output)."),
    click.option("--endpoint", "llm_endpoint", type=click.Choice(["v1/chat/completions", "v1/completions"]),
                 default=None, help="--llm --protocol openai: the endpoint requests go to (default v1/chat/completions)."),
    click.option("--api-key-env", "llm_api_key_env", type=Words(example="OPENAI_API_KEY"), default=None,
                 help="--llm --protocol openai: the environment variable holding the server's API key (the key is "
                      "never printed or written; the saved command names the variable)."),
    click.option("--shared-prefix", "llm_shared_prefix", type=Words(example="4:512"), default=None,
                 help="--llm: N:L, each prompt starts with one of N system prompts of L tokens, shared on purpose "
                      "(default: none; every prompt is salted, so no prefix is cached)."),
    click.option("--client-cpus", "llm_client_cpus", type=Words(example="1"), default=None,
                 help="--llm: the cores perf_analyzer runs on (e.g. 1 or 2-3), away from an engine on this machine "
                      "(pin the engine to the others: the docs' one-machine benchmarks)."),
    click.option("--settle-s", "llm_settle_s", type=number(LLMSettings, "settle_s"), default=_DEFAULT.settle_s, show_default=True,
                 help="--llm: seconds the server is still watched after a traffic shape, for its recovery."),
]


def llm_options(func: F) -> F:
    """Add the ``--llm`` options to a click command (they arrive as ``llm`` and ``llm_*`` keywords)."""
    for option in reversed(_LLM_OPTIONS):
        func = option(func)
    return func


def options_from_kwargs(kwargs: dict[str, Any]) -> LLMOptions:
    """Pop the ``llm_*`` keywords click passed into an ``LLMOptions`` (``--x`` arrives as ``llm_x``,
    the settings field ``x``; a field with no option keeps its default)."""
    return LLMOptions(**{f.name: kwargs.pop(f"llm_{f.name}") for f in fields(LLMOptions) if f"llm_{f.name}" in kwargs})


def reject_stray_llm_options(given: LLMOptions) -> None:
    """A ``--llm`` option given without ``--llm`` is a mistake, not something to ignore silently."""
    stray = [f"--{f.name.replace('_', '-')}" for f in fields(LLMOptions) if getattr(given, f.name) != f.default]
    if stray:
        raise ConfigError(f"{', '.join(stray)} only apply to LLM load tests", hint="add --llm, or drop them")


def run_llm_command(model: str, settings: LoadTestSettings, llm: LLMSettings, *, dry_run: bool, as_json: bool,
                    quiet: bool, runner: Any = None) -> None:
    """Run ``perf run MODEL --llm``: call :func:`~tritonkit.perf.command.llm_load_test` (or ``runner``, a
    cluster's in its shape), print, exit."""
    say = (lambda _m: None) if quiet or as_json else (lambda m: click.echo(m, err=True))
    with sigterm_as_interrupt():
        test = (runner or llm_load_test)(model, llm, settings, dry_run=dry_run, progress=say)
    if test.dry_run:
        click.echo(test.plan_line())
        return
    if test.interrupted or test.run is None:
        click.echo(f"interrupted: files so far are in {test.results_dir}", err=True)
        raise CommandExit(test.exit_code)
    run = test.run
    if as_json:
        echo_json(run.to_dict())
    else:
        for step in run.result.steps:
            click.echo(_summary_line(step))
        if run.verdict is not None:
            click.echo(run.verdict.summary())
        if run.report is not None:
            click.echo(f"report: {run.report}")
        if run.baseline_path is not None:
            click.echo(f"baseline: {run.baseline_path}")
    ci_report(run)
    if run.error is not None:
        raise run.error  # reported after the results were saved and printed
    raise CommandExit(test.exit_code)


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


def print_llm_comparison(comparison: LLMComparison, base_path: Path, new_path: Path, saved: Path | None, *,
                         as_json: bool) -> None:
    """``perf compare`` on LLM results: one line per compared metric, the summary, the baseline kept."""
    if as_json:
        echo_json({**comparison.to_dict(), "base": str(base_path), "new": str(new_path),
                   "baseline": None if saved is None else str(saved)})
        return
    for row in comparison.rows:
        change = "unmeasured" if row.change is None else f"{row.change * 100:+.1f}%"
        band = ("figures alone" if row.change_interval is None else
                f"95% {row.change_interval[0] * 100:+.1f}..{row.change_interval[1] * 100:+.1f}%")
        flag = {"regression": " REGRESSION", "inside the noise": " INSIDE THE NOISE"}.get(row.outcome, "")
        click.echo(f"{row.step}: {row.metric} {row.base:.4g} -> "
                   f"{'–' if row.new is None else f'{row.new:.4g}'} ({change}, {band}; limit {row.limit * 100:g}% "
                   f"{row.worse_when}){flag}")
    for step, figure, base, new in comparison.engine:
        click.echo(f"{step}: the engine's own {figure} {base:.4g} -> {new:.4g} ({(new - base) / base * 100 if base else 0:+.1f}%, "
                   "not gated)")
    click.echo(comparison.summary())
    if saved is not None:
        click.echo(f"baseline: {saved}")


def print_llm_report(run: LLMRun, *, as_json: bool) -> None:
    """``perf report`` on an LLM result: the verdict and where the report went."""
    if as_json:
        echo_json({"report": str(run.report), "verdict": None if run.verdict is None else run.verdict.to_dict()})
        return
    if run.verdict is not None:
        click.echo(run.verdict.summary())
    if run.report is not None:
        click.echo(f"report: {run.report}")
