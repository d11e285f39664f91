"""``tritonkit perf sweep MODEL --engine-cmd TEMPLATE --knob NAME=V1,V2*``: sweep an LLM engine's knobs.

:func:`engine_sweep_options` adds the engine sweep's options to ``perf sweep`` and routes a call
that names an engine (``--engine-cmd`` or ``--engine``) here, before the Triton sweep sees it.
Every option of the Triton sweep that does not apply to an engine (its knobs, ``--window-ms``,
``--warmup-s``, ``--headroom``, ``--exhaustive``, ``--url``, a REPO, ...) is refused when given
with an engine, and every engine option is refused without one: nothing is silently ignored.
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tritonkit._values import REQUESTS, SECONDS
from tritonkit.cli._common import CommandExit, UserPath, Words, echo_json, number, sigterm_as_interrupt
from tritonkit.perf.judge.verdict import Exit
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.measure.folders import run_folder

__all__ = ["engine_sweep_options", "run_engine_command"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: The ``perf sweep`` parameters an engine sweep reads; any other one given with an engine is refused.
ENGINE_APPLIES = frozenset({"names", "sla_text", "concurrency", "tie_tolerance", "out_dir", "results_root",
                            "as_json", "quiet"})
#: This module's parameters and their defaults (given without an engine, refused).
_ENGINE_PARAMS = ("engine_cmd", "engine", "engine_model_dir", "engine_python", "knobs", "default_only", "engine_env",
                  "engine_ready_timeout_s", "requests", "input_tokens", "output_tokens", "endpoint")
_VLLM_PYTHON = Path(".venv-vllm/bin/python")


def _options() -> list[Callable[[_F], _F]]:
    return [
        click.option("--engine-cmd", type=Words(example="vllm serve DIR --port {port}"), default=None,
                     help="Sweep an LLM engine instead: its command, with {port} (a free loopback port tritonkit "
                          "picks), {model} (MODEL) and each --knob as {NAME}; started per variant in its own "
                          "process group and load-tested on its OpenAI endpoint (llm-engine-sweep.md)."),
        click.option("--engine", type=click.Choice(["vllm"]), default=None,
                     help="A preset of --engine-cmd: vLLM's CPU build serving --engine-model-dir; knobs "
                          "max_num_seqs, max_num_batched_tokens, chunked_prefill (on/off)."),
        click.option("--engine-model-dir", type=UserPath(exists=True, file_okay=False, path_type=Path), default=None,
                     help="With --engine vllm: the model folder it serves."),
        click.option("--engine-python", type=UserPath(path_type=Path), default=None,
                     help="With --engine vllm: the Python of vLLM's environment (default .venv-vllm/bin/python "
                          "when there, else python3)."),
        click.option("--knob", "knobs", type=Words(example="max_num_seqs=4,16*,64"), multiple=True,
                     help="An engine knob to sweep, NAME=V1,V2*,V3 (* marks the engine's default; repeat)."),
        click.option("--default", "default_only", is_flag=True,
                     help="With an engine: measure the default variant (every knob at its *) alone, a baseline."),
        click.option("--engine-env", type=Words(example="VLLM_CPU_KVCACHE_SPACE=1"), multiple=True,
                     help="With an engine: K=V added to its environment (repeat)."),
        click.option("--engine-ready-timeout-s", type=number(SECONDS), default=None,
                     help="With an engine: how long one start may take before the variant fails [default: 300]."),
        click.option("--requests", type=number(REQUESTS), default=None,
                     help="With an engine: requests per load step [default: 32]."),
        click.option("--input-tokens", type=Words(example="128"), default=None,
                     help="With an engine: prompt length, MEAN[:STDDEV] tokens [default: 128]."),
        click.option("--output-tokens", type=Words(example="64"), default=None,
                     help="With an engine: output length, MEAN[:STDDEV] tokens [default: 64]."),
        click.option("--endpoint", type=click.Choice(["v1/chat/completions", "v1/completions"]), default=None,
                     help="With an engine: the OpenAI endpoint load-tested [default: v1/chat/completions]."),
    ]


def engine_sweep_options(command: _F) -> _F:
    """Add the engine sweep's options to ``command`` (``perf sweep``'s function, decorated before its
    own options) and route a call that names an engine to :func:`run_engine_command`."""

    @functools.wraps(command)
    def routed(**kwargs: Any) -> Any:
        engine = {name: kwargs.pop(name) for name in _ENGINE_PARAMS}
        ctx = click.get_current_context()
        if engine["engine_cmd"] is not None or engine["engine"] is not None:
            _refuse(ctx, [n for n in kwargs if n not in ENGINE_APPLIES], "does not apply to an engine sweep "
                    "(--engine-cmd/--engine)", "leave it out; an engine's own knobs are swept with --knob NAME=V1,V2*")
            run_engine_command(kwargs, engine)
        _refuse(ctx, [n for n in _ENGINE_PARAMS if n not in ("engine_cmd", "engine")],
                "is for an engine sweep", "add --engine-cmd TEMPLATE (or --engine vllm), or leave it out")
        return command(**kwargs)

    for option in reversed(_options()):
        routed = option(routed)
    return routed  # type: ignore[return-value]


def _refuse(ctx: click.Context, names: list[str], why: str, fix: str) -> None:
    """A usage error for the first of ``names`` given on the command line (not left at its default)."""
    for param in ctx.command.params:
        if param.name in names and ctx.get_parameter_source(param.name) not in (
                None, click.core.ParameterSource.DEFAULT):
            shown = param.opts[0] if param.opts and param.opts[0].startswith("-") else (
                "REPO" if param.name == "names" else param.name)
            raise click.UsageError(f"{shown} {why}; {fix}")


def _pairs(values: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for text in values:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="--engine-env")
        env[name.strip()] = value
    return env


def _template(engine: dict[str, Any], knobs: list[Any]) -> Any:
    from tritonkit.perf.sweep.engine_template import EngineTemplate, vllm_template

    if engine["engine_cmd"] is not None and engine["engine"] is not None:
        raise click.UsageError("--engine-cmd and --engine both give the engine's command; give one")
    if engine["engine"] is None:
        if engine["engine_model_dir"] is not None or engine["engine_python"] is not None:
            raise click.UsageError("--engine-model-dir and --engine-python are for --engine vllm; with --engine-cmd "
                                   "the command names its model and Python itself")
        return EngineTemplate.parse(engine["engine_cmd"], [k.name for k in knobs])
    if engine["engine_model_dir"] is None:
        raise click.UsageError("--engine vllm needs --engine-model-dir DIR, the model folder vLLM serves")
    python = engine["engine_python"] or (_VLLM_PYTHON.resolve() if _VLLM_PYTHON.exists() else Path("python3"))
    return vllm_template(str(python), str(engine["engine_model_dir"].resolve()), knobs)


def run_engine_command(kwargs: dict[str, Any], engine: dict[str, Any]) -> None:
    """Run the engine sweep ``perf sweep``'s parsed options ask for; exits with its status."""
    from tritonkit.perf.sweep.engine import EngineSweepSettings, run_engine_sweep
    from tritonkit.perf.sweep.engine_template import parse_knob

    names = kwargs["names"]
    if len(names) != 1:
        raise click.UsageError(f"an engine sweep takes one MODEL, the name the engine serves (no REPO: the engine "
                               f"is given by --engine-cmd), not {len(names)} names")
    if kwargs["sla_text"] is None:
        raise click.UsageError("--sla is required, e.g. --sla 'ttft_p99<=500ms,itl_p99<=50ms'")
    if not engine["knobs"]:
        raise click.UsageError("an engine sweep needs at least one --knob NAME=V1,V2* placed in the command")
    model = names[0]
    knobs = [parse_knob(text) for text in engine["knobs"]]
    llm = LLMSettings(protocol="openai", concurrency=kwargs["concurrency"] or "1:8",
                      requests=engine["requests"] or 32, input_tokens=engine["input_tokens"] or "128",
                      output_tokens=engine["output_tokens"] or "64", endpoint=engine["endpoint"])
    out = kwargs["out_dir"] or run_folder(model, kwargs["results_root"], kind="engine-sweep")
    settings = EngineSweepSettings(
        template=_template(engine, knobs), knobs=tuple(knobs), sla=kwargs["sla_text"], out=Path(out), llm=llm,
        env=_pairs(engine["engine_env"]), ready_timeout_s=engine["engine_ready_timeout_s"] or 300.0,
        tie_tolerance=kwargs["tie_tolerance"] / 100.0, default_only=engine["default_only"])
    quiet = kwargs["quiet"] or kwargs["as_json"]
    try:
        with sigterm_as_interrupt():
            result = run_engine_sweep(model, settings,
                                      on_event=None if quiet else lambda e: click.echo(e.message, err=True))
    except KeyboardInterrupt:
        click.echo(f"interrupted: measured variants are kept in {out}; run the same command with "
                   f"--out {shlex.quote(str(out))} to resume", err=True)
        raise CommandExit(Exit.UNMEASURED) from None
    if kwargs["as_json"]:
        echo_json(result.to_dict())
    else:
        click.echo(result.headline())
        failed = len(result.failed)
        click.echo(f"report: {os.path.join(out, 'report.md')}; {len(result.search.outcomes) - failed} measured, "
                   f"{failed} failed, {sum(r.resumed for r in result.records.values())} reused, {result.wall_s:.1f} s")
    raise CommandExit(result.exit_code)

