"""Run an LLM load test with perf_analyzer and turn its export into an ``LLMResult``.

Each step is one perf_analyzer invocation that sends an exact number of requests
(``--request-count``) from the prompts we wrote (``--input-data``), streaming from decoupled
models (``--streaming``), either closed-loop at a concurrency or on a traffic shape's schedule
(``--request-intervals``): a :class:`~tritonkit.perf.measure.spec.PerfSpec` rendered by the same
``to_argv`` as every ladder step. Its ``--profile-export-file`` holds every request's send time and
every response's time and outputs; the metrics come from there (``tritonkit.perf.llm.metrics``).
The server's ``/metrics`` is scraped during the step and for ``settle_s`` after it, for the time
line, the recovery time and the failure classes.

WAR: when a streamed request fails (e.g. a full queue), perf_analyzer 2.60 prints "Failed to
retrieve results from inference request." and then waits forever for the missing response. The
runner watches for that line, stops the process group, and classifies the failure from the
server's counters and the model's queue policy.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tritonkit._dial import dial_for
from tritonkit.errors import ConfigError, TritonKitError
from tritonkit.perf.llm._keyed import headers_command
from tritonkit.perf.llm.engine import cpu_list, pinned_argv
from tritonkit.perf.llm.engine_metrics import ENGINES, engine_figures
from tritonkit.perf.llm.metrics import (
    GoodputSLO,
    RequestRecord,
    TokenSource,
    compute_metrics,
    drift,
    load_export_records,
)
from tritonkit.perf.llm.openai import (
    OpenAITarget,
    check_openai_server,
    load_openai_records,
    write_openai_input_data,
)
from tritonkit.perf.llm.prompts import Prompt, RequestLayout, detect_layout, write_llm_input_data
from tritonkit.perf.llm.result import LLMResult, LLMStep, timeline_points
from tritonkit.perf.llm.served import TrtllmChoice, trtllm_layout
from tritonkit.perf.llm.shapes import Schedule, Shape, Spike, write_intervals
from tritonkit.perf.llm.timeline import (
    FailureReport,
    ServerPoint,
    classify_failures,
    in_flight,
    recovery,
    server_timeline,
)
from tritonkit.perf.llm.tokens import TokenCounter
from tritonkit.perf.measure.analyzer import Invocation, PerfAnalyzer, utc_now
from tritonkit.perf.measure.failures import Failure, StepError, classify
from tritonkit.perf.measure.metrics import MetricsSnapshot, counter_delta
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, RequestIntervals, to_argv
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall, locate_perf_analyzer
from tritonkit.triton_metrics import QUEUE_DURATION_US, REASON_REJECTED, REQUEST_FAILURE, REQUEST_SUCCESS

if TYPE_CHECKING:
    from tritonkit.client._model import ModelMetadata

__all__ = ["COLD_HIT_RATE", "STALL_MARKER", "LLMPlan", "run_llm"]

#: A prefix-cache hit rate above this, on prompts salted to be cold, is warned of.
COLD_HIT_RATE = 0.05
#: What perf_analyzer prints before it hangs on a failed streamed request.
STALL_MARKER = "Failed to retrieve results from inference request."

_ERROR_LINE_RE = re.compile(r"^(?:Thread \[\d+\] had error: .*|error: .*)$", re.MULTILINE | re.IGNORECASE)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LLMPlan:
    """How to drive the model: closed-loop ``concurrency`` levels, or one traffic ``shape``.

    ``requests_per_level`` requests are sent at each concurrency (a shape sends its schedule).
    ``warmup_rounds`` × the concurrency requests go out before each level, unmeasured, a perf_analyzer
    run of their own (not before a shape: they would shift its schedule).
    ``client_deadline_ms``: requests slower than this count as client time-outs.
    ``settle_s``: how long the server is still watched after the load, for the recovery time.
    ``salted``: each request's prompt starts with a salt of its own (cold: no prefix cached); ``False``
    sends the prompts as given (a user's file). ``shared_prefix``: (N, L), each request's prompt
    starts with one of N system prompts of L tokens, in turn (salted per test: shared within it only).
    ``client_cpus``: the cores perf_analyzer runs on (``--client-cpus``), away from an engine's.
    """

    concurrency: tuple[int, ...] = (1,)
    requests_per_level: int = 32
    shape: Shape | None = None
    warmup_rounds: int = 1
    goodput_slo: GoodputSLO | None = None
    client_deadline_ms: float | None = None
    settle_s: float = 2.0
    metrics_interval_s: float = 0.25
    step_timeout_s: float = 600.0
    salted: bool = True
    shared_prefix: tuple[int, int] | None = None
    client_cpus: str | None = None


def _input_data(path: Path, prompts: Sequence[Prompt], target: _Target, stream: bool) -> Path | None:
    """The ``--input-data`` file for the target's layout (``None`` when perf_analyzer makes the inputs)."""
    if target.openai is not None:
        return write_openai_input_data(path, prompts, target.meta.name, target.openai)
    if target.layout is None or not target.layout.sends_prompts:
        return None
    return write_llm_input_data(path, prompts, target.layout, streaming=stream)


def _stalled(paths: Sequence[Path]) -> bool:
    """perf_analyzer printed the line after which it waits forever (see the module's WAR)."""
    return any(STALL_MARKER in p.read_text(errors="replace") for p in paths if p.exists())


def _mean_queue_ms(snapshots: Sequence[MetricsSnapshot], model: str) -> float | None:
    queue = counter_delta(snapshots, QUEUE_DURATION_US.name, model=model)
    done = counter_delta(snapshots, REQUEST_SUCCESS.name, model=model)
    return queue / done / 1000.0 if queue is not None and done else None


def run_llm(model: str, url: str, prompts: Sequence[Prompt], plan: LLMPlan, *,
            results_dir: str | os.PathLike[str], metrics_url: str | None = None,
            streaming: bool | None = None, prompt_source: str = "synthetic",
            perf_analyzer: PerfAnalyzerInstall | None = None, progress: Progress | None = None,
            interface: str | None = None, tokenizer: TokenCounter | None = None,
            trtllm_version: str | None = None, tokenizer_from: tuple[str, str] | None = None,
            token_output: str | None = None, analyzer: PerfAnalyzer | None = None,
            openai: OpenAITarget | None = None) -> LLMResult:
    """Measure ``model`` at ``url`` under ``plan``; write raw files and ``llm_result.json`` to ``results_dir``.

    ``streaming=None`` streams exactly when the model is decoupled. ``interface`` names the request
    interface (:data:`~tritonkit.perf.llm.prompts.INTERFACES`, or ``"generic"``) instead of choosing
    it from the model's inputs; a decoupled model of no known interface is timed per response.
    ``tokenizer`` (the model's, see :func:`~tritonkit.perf.llm.tokens.load_tokenizer`) counts input
    lengths in its tokens, for replayed prompts and for the reported ISL. A traffic shape with
    per-request lengths (a replay) replaces ``prompts`` with prompts of the recorded lengths.
    A TensorRT-LLM model gets requests in its line's names (``trtllm_version``, else read from
    the served models: :func:`~tritonkit.perf.llm.served.trtllm_layout`). ``tokenizer_from``:
    (the tokenizer's path, where it came from), recorded in :attr:`LLMResult.served`.
    ``token_output``: the model's output whose elements are its tokens (checked against its outputs).
    ``analyzer``: what runs each step's perf_analyzer command (default: perf_analyzer here, into
    ``results_dir``; a cluster's runs it on several machines and merges their exports).
    ``openai``: the server at ``url`` speaks OpenAI's HTTP API instead (:mod:`tritonkit.perf.llm.openai`):
    ``model`` is the name it serves, the endpoint and key are ``openai``'s, and it streams unless
    ``streaming`` is ``False``.
    """
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    if openai is None:
        from tritonkit.perf.measure.target import check_target  # lazy: the client pulls in grpc

        spec = PerfSpec(model=model, url=url)
        check_target(spec)
        target = _ask_target(model, url, interface=interface, trtllm_version=trtllm_version, token_output=token_output)
        stream = target.meta.decoupled if streaming is None else streaming
    else:
        openai = replace(openai, stream=openai.stream if streaming is None else streaming)
        spec, target, stream = _openai_target(model, url, openai)
    pa = perf_analyzer or locate_perf_analyzer()
    if analyzer is not None and plan.client_cpus:
        raise ConfigError("--client-cpus pins perf_analyzer on this machine; a cluster's clients run on its nodes",
                          hint="drop --client-cpus, or run without --cluster")
    if openai is not None and metrics_url is None:  # the engine's own /metrics, beside its API
        metrics_url = f"{url if '://' in url else 'http://' + url}/metrics"
    analyzer = analyzer or PerfAnalyzer(folder, perf_analyzer=pa, metrics_url=metrics_url,
                                        metrics_interval_s=plan.metrics_interval_s)
    started = utc_now()
    # Every step: async, streaming from a decoupled model, an exact request count, the profile export.
    notes = _notes(target, stream)
    runs = _planned_runs(folder, prompts, plan, replace(spec, streaming=stream and openai is None, async_mode=True),
                         target, tokenizer, notes)
    result = LLMResult(
        model=model, url=url, streaming=stream, layout=target.description, prompt_source=prompt_source,
        steps=[], started_utc=started, finished_utc=utc_now(), client_deadline_ms=plan.client_deadline_ms,
        notes=notes, served=_served(target.line, tokenizer_from, token_output),
    )
    prefix = headers_command(dial_for(url).headers,
                             pinned_argv(pa.argv if openai is None else openai.command_prefix(pa.argv), plan.client_cpus))
    measuring = _Measuring(folder, plan, spec, target.meta, analyzer, prefix, tokenizer, token_output,
                           metrics_url, progress or (lambda _m: None), openai)
    for run in runs:
        step = _measure(measuring, run)
        result.steps.append(step)
        measuring.say(_describe(run.name, step))
        result.finished_utc = utc_now()
        result.save(folder / "llm_result.json")  # after every step: a later failure loses none of it
    if metrics_url and not any(step.engine for step in result.steps):
        result.notes.append(f"no engine view: {metrics_url} served none of the engine metrics read "
                            f"({', '.join(e.engine for e in ENGINES)})")
        result.save(folder / "llm_result.json")
    return result


# ---- the stages, in the order run_llm takes them ------------------------------------------------


@dataclass(frozen=True)
class _Target:
    """What the server says of the model: its metadata, the request layout that fits its inputs,
    and its TensorRT-LLM line (``None`` for any other model); or, for an OpenAI-compatible server,
    the endpoint it is asked on (``openai``; no layout, no line)."""

    meta: ModelMetadata
    layout: RequestLayout | None
    line: TrtllmChoice | None
    openai: OpenAITarget | None = None

    @property
    def description(self) -> str:
        """The request layout in words, as the result records it."""
        if self.openai is not None:
            return f"OpenAI {self.openai.endpoint} over HTTP ({'streamed' if self.openai.stream else 'one answer'})"
        return self.layout.description if self.layout is not None else "unknown"


def _openai_target(model: str, url: str, openai: OpenAITarget) -> tuple[PerfSpec, _Target, bool]:
    """An OpenAI-compatible server's step spec (perf_analyzer's OpenAI service kind over HTTP; the
    body asks for the stream) and target, after checking it serves ``model``."""
    from tritonkit.client._model import ModelMetadata

    check_openai_server(model, url, openai)
    spec = PerfSpec(model=model, url=url, protocol="http", extra_args=openai.analyzer_args())
    meta = ModelMetadata(name=model, version="", max_batch_size=0, inputs=(), outputs=(), decoupled=openai.stream,
                         platform="openai")
    return spec, _Target(meta, None, None, openai), openai.stream


def _ask_target(model: str, url: str, *, interface: str | None, trtllm_version: str | None,
                token_output: str | None) -> _Target:
    """The model's metadata and request layout, read from the server (see :func:`run_llm`)."""
    from tritonkit.client import Client  # lazy: grpc is heavy

    with Client(url) as client:
        meta = client.model_metadata(model)
    layout: RequestLayout = detect_layout((t.name for t in meta.inputs), max_batch_size=meta.max_batch_size, model=model,
                                          decoupled=meta.decoupled, interface=interface)
    layout, line = trtllm_layout(layout, (t.name for t in meta.inputs), model=model, url=url, requested=trtllm_version)
    outputs = [t.name for t in meta.outputs]
    if token_output is not None and token_output not in outputs:
        raise ConfigError(f"model {model!r} has no output {token_output!r} to count tokens in; it has "
                          f"{', '.join(outputs) or 'none'}", hint="name one of its outputs with --token-output")
    return _Target(meta, layout, line)


def _notes(target: _Target, stream: bool) -> list[str]:
    notes = [] if target.line is None else [target.line.describe()]
    if target.meta.decoupled and not stream:
        notes.append("the model is decoupled but streaming was turned off: perf_analyzer may refuse it")
    return notes


@dataclass(frozen=True)
class _Run:
    """One perf_analyzer run of the test: its name (the stem of its files), its load, its options
    (without the binary) and, for a traffic shape, the schedule it follows."""

    name: str
    mode: str
    value: float
    argv: list[str]
    schedule: Schedule | None = None
    #: Its unmeasured requests first, a perf_analyzer run of their own with prompts of their own (one
    #: run's ``--warmup-request-count`` comes from its file's first entries, which it then sends again).
    warmup: list[str] | None = None
    #: Whether every prompt was salted to find a cold cache (a hit rate above :data:`COLD_HIT_RATE` is warned of).
    cold: bool = True


def _planned_runs(folder: Path, prompts: Sequence[Prompt], plan: LLMPlan, step_spec: PerfSpec, target: _Target,
                  tokenizer: TokenCounter | None, notes: list[str]) -> list[_Run]:
    """The runs ``plan`` makes, each with an input file of its own: one per concurrency level, or the
    shape's one. Every request's prompt is salted afresh (:func:`~tritonkit.perf.llm.prompts.salted`,
    a nonce per test) unless the plan sends ``prompts`` as given; twice the requests a step sends, as
    perf_analyzer's worker threads each step through the file on their own."""
    from tritonkit.perf.llm.prompts import prompts_for_lengths, salted, trace_prompts

    nonce, used = secrets.randbits(32), [0]
    if plan.shared_prefix is not None:
        (count, length), isl = plan.shared_prefix, sum(p.input_tokens for p in prompts) / len(prompts)
        system = salted(prompts_for_lengths([length], [1], tokenizer=tokenizer), count, nonce=nonce, start=1 << 23)
        notes.append(f"each request's prompt starts with one of {count} shared system prompts of {length} tokens, in "
                     f"turn: after the first {count} requests, {100 * length / (length + isl):.1f} "
                     "% of each prompt's tokens are a prefix sent before (the most a prefix cache can serve)")

    def data(name: str, pool: Sequence[Prompt], count: int, salt: bool = plan.salted) -> Path | None:
        if salt and not used[0]:
            notes.append(f"cold: each request's prompt starts with a salt of its own (test {nonce:08x}), so none "
                         "shares a prefix with another request of this test or an earlier one")
        chosen = salted(pool, count, nonce=nonce, start=used[0]) if salt else [pool[i % len(pool)] for i in range(count)]
        used[0] += count
        if plan.shared_prefix is not None:
            chosen = [Prompt(f"{system[i % len(system)].text} {p.text}", p.input_tokens + plan.shared_prefix[1],
                             p.output_tokens) for i, p in enumerate(chosen)]
        return _input_data(folder / f"{name}.inputs.json", chosen, target, step_spec.streaming)

    cold = plan.salted and plan.shared_prefix is None
    if plan.shape is None:
        runs = []
        for level in plan.concurrency:
            name, count, warm = f"c{level}", max(plan.requests_per_level, level), plan.warmup_rounds * level
            load = replace(step_spec, load=ConcurrencyRange(level))
            runs.append(_Run(name, "concurrency", float(level), to_argv(replace(
                load, request_count=count, input_data=data(name, prompts, 2 * count),
                profile_export_file=folder / f"{name}.json")), cold=cold, warmup=to_argv(replace(
                    load, request_count=warm, input_data=data(f"{name}.warmup", prompts, 2 * warm))) if warm else None))
        return runs
    schedule, salt = plan.shape.schedule(), plan.salted
    if schedule.hash_ids is not None and schedule.input_tokens is not None and schedule.output_tokens is not None:
        prompts, reuse = trace_prompts(schedule.hash_ids, schedule.input_tokens, schedule.output_tokens,
                                       block_tokens=schedule.block_tokens, nonce=nonce, tokenizer=tokenizer)
        salt = False
        notes.append(f"the trace's requests share prompt blocks of {schedule.block_tokens} tokens by hash id: "
                     f"{100 * reuse:.1f} % of its prompt tokens are a prefix an earlier request sent (the most a "
                     "prefix cache can serve)")
    elif schedule.input_tokens is not None and schedule.output_tokens is not None:
        prompts, salt = prompts_for_lengths(schedule.input_tokens, schedule.output_tokens, tokenizer=tokenizer), True
    argv = to_argv(replace(step_spec, load=RequestIntervals(write_intervals(folder / "intervals.txt", schedule)),
                           input_data=data(plan.shape.kind, prompts, schedule.request_count, salt),
                           request_count=schedule.request_count,
                           profile_export_file=folder / f"{plan.shape.kind}.json"))
    return [_Run(plan.shape.kind, plan.shape.kind, float(schedule.request_count), argv, schedule,
                 cold=cold and salt)]


@dataclass(frozen=True)
class _Measuring:
    """What every step of one test shares: where it writes, the plan, the target and what it is
    served as, the load generator (``prefix``: perf_analyzer's binary argv), how tokens are counted."""

    folder: Path
    plan: LLMPlan
    spec: PerfSpec
    meta: ModelMetadata
    analyzer: PerfAnalyzer
    prefix: list[str]
    tokenizer: TokenCounter | None
    token_output: str | None
    metrics_url: str | None
    say: Progress
    openai: OpenAITarget | None = None

    def read_export(self, export: Path) -> tuple[list[RequestRecord], TokenSource, list[str]]:
        """A step's requests, how their tokens were counted, and its failed streams (OpenAI only)."""
        if self.openai is None:
            records, source = load_export_records(export, count_text=self.tokenizer, token_output=self.token_output)
            return records, source, []
        found = load_openai_records(export, count_text=self.tokenizer)
        return found.records, found.token_source, found.problems

    def server_answers(self) -> bool:
        """Whether the server still answers (asked after a troubled step)."""
        from tritonkit.perf.measure.target import server_answers

        if self.openai is None:
            return server_answers(self.spec)
        try:
            check_openai_server(self.spec.model, self.spec.url, self.openai)
        except ConfigError:
            return True  # it answered
        except (TritonKitError, OSError):
            return False
        return True


def _measure(ctx: _Measuring, run: _Run) -> LLMStep:
    """One step: perf_analyzer run and watched, its export read into metrics, its failures
    classified, the server's time line, and for a traffic shape its recovery and phases."""
    inv = _invoke(ctx, run)
    export = ctx.folder / f"{run.name}.json"
    records, source, broken = (ctx.read_export(export) if export.exists() and inv.returncode == 0
                               else ([], "output_ids", []))
    answered = any(r.answered for r in records)
    metrics = compute_metrics(records, goodput_slo=ctx.plan.goodput_slo, token_source=source) if answered else None
    errors = [*_ERROR_LINE_RE.findall(inv.console), *broken]
    troubled = bool(errors) or inv.stopped or inv.returncode not in (0, None)
    reachable = ctx.server_answers() if troubled else True
    request_failed = inv.stopped or any("had error" in e for e in errors)
    if inv.returncode not in (0, None) and not records and not request_failed and reachable:
        raise _refused(ctx, run.name, inv, errors)
    failures = _failures(ctx, inv, records, errors, reachable)
    first_ns = min((r.sent_ns for r in records), default=inv.wall0_ns)
    t0_mono = inv.mono0_s + (first_ns - inv.wall0_ns) / 1e9
    points = server_timeline(inv.snapshots, ctx.spec.model, t0_monotonic_s=t0_mono)
    step = LLMStep(
        load_mode=run.mode, load_value=run.value, metrics=metrics, failures=failures,
        timeline=timeline_points(points, in_flight(records, [p.t_s for p in points])),
        requests=[((r.sent_ns - first_ns) / 1e9, r.ttft_ms, r.latency_ms) for r in records],
        server_ttft_ms=([r.server_ttft_ms for r in records] if any(r.server_ttft_ms is not None for r in records)
                        else []),
        wall_s=inv.duration_s, generator_cpu_pct=inv.cpu_pct, argv=[*ctx.prefix, *run.argv],
        raw_files=[p.name for p in ctx.folder.glob(f"{run.name}.*")],
        engine=engine_figures(inv.snapshots, ctx.spec.model),
        output_tokens_asked=sum(asked) if (asked := [r.asked_tokens for r in records if r.answered
                                                     and r.asked_tokens]) else None,
    )
    _warn(ctx, run.name, inv, step, reachable, run.cold)
    if run.schedule is not None and ctx.plan.shape is not None:
        _shape_facts(step, run.schedule, ctx.plan.shape, points, records)
    return step


def _invoke(ctx: _Measuring, run: _Run) -> Invocation:
    """``run``'s perf_analyzer, stopped when it stalls (see the module's WAR); the server watched after
    it for the plan's ``settle_s`` (a shape's recovery), at most half a second after a level."""
    (ctx.folder / f"{run.name}.json").unlink(missing_ok=True)  # an earlier run's file must not pass for this one's
    count = run.argv[run.argv.index("--request-count") + 1]
    ctx.say(f"[{run.name}] {run.mode} {run.value:g}: sending {count} requests")
    plan = ctx.plan
    if run.warmup is not None:  # unmeasured, and outside the step's own scrapes
        ctx.analyzer.invoke([*ctx.prefix, *run.warmup], f"{run.name}.warmup", timeout_s=plan.step_timeout_s, settle_s=0.0,
                            stop_when=partial(_stalled, [ctx.folder / f"{run.name}.warmup.{o}" for o in ("stdout", "stderr")]))
    console_paths = (ctx.folder / f"{run.name}.stdout", ctx.folder / f"{run.name}.stderr")
    return ctx.analyzer.invoke([*ctx.prefix, *run.argv], run.name, timeout_s=plan.step_timeout_s,
                               stop_when=partial(_stalled, console_paths),
                               settle_s=plan.settle_s if run.schedule is not None else min(plan.settle_s, 0.5))


def _refused(ctx: _Measuring, name: str, inv: Invocation, errors: list[str]) -> StepError:
    """Nothing was sent: perf_analyzer refused its input or options — a usage error, not a load result."""
    found = classify(inv.console, returncode=inv.returncode, server_reachable=True, model=ctx.spec.model,
                     option_error=errors[-1].strip() if errors else None)
    return StepError(f"perf_analyzer exited with status {inv.returncode} ({found.failure}): {found.message}",
                     failure=found.failure, server_message=found.message, returncode=inv.returncode,
                     stderr_tail=inv.console[-2000:],
                     hint=f"see {ctx.folder / (name + '.stdout')}; the command is in {name}.argv.json")


def _failures(ctx: _Measuring, inv: Invocation, records: Sequence[RequestRecord], errors: list[str],
              reachable: bool) -> FailureReport:
    """The step's failed requests by class: the client's view, the server's counters, the queue policy."""
    model, meta = ctx.spec.model, ctx.meta
    return classify_failures(
        records, client_deadline_ms=ctx.plan.client_deadline_ms, analyzer_errors=[e.strip() for e in errors],
        analyzer_stalled=inv.stopped, server_reachable=reachable,
        server_rejected=counter_delta(inv.snapshots, REQUEST_FAILURE.name, model=model, reason=REASON_REJECTED),
        server_failed=counter_delta(inv.snapshots, REQUEST_FAILURE.name, model=model),
        max_queue_size=meta.max_queue_size, mean_queue_ms=_mean_queue_ms(inv.snapshots, model),
        queue_timeout_rejects=meta.queue_timeout_rejects and meta.queue_timeout_us > 0,
    )


def _warn(ctx: _Measuring, name: str, inv: Invocation, step: LLMStep, reachable: bool, cold: bool) -> None:
    """The step's warnings (a busy generator, failed scrapes) and, when perf_analyzer did not end the
    step itself, its failure: whatever it wrote is then no measurement."""
    cores = len(cpu_list(ctx.plan.client_cpus, "--client-cpus")) if ctx.plan.client_cpus else 1
    if inv.cpu_pct is not None and inv.cpu_pct >= 90.0 * cores:
        step.warnings.append(f"the load generator used {inv.cpu_pct:.0f} % of a core, near {cores} core(s)' worth: it, "
                             "not the engine, may be the limit; give it cores of its own (--client-cpus)")
    if inv.scrape_errors:
        step.warnings.append(f"could not scrape {ctx.metrics_url}: {inv.scrape_errors[-1]} (the engine's own "
                             "figures are not known)")
    made = step.metrics.output_tokens_total if step.metrics is not None else 0
    if step.output_tokens_asked and made < 0.9 * step.output_tokens_asked:
        step.warnings.append(f"the requests asked for {step.output_tokens_asked} output tokens and got {made} "
                             f"({100 * made / step.output_tokens_asked:.0f} %): the engine stopped early, so ITL and "
                             "tokens/s are not those of the lengths asked")
    hit = step.engine.get("prefix_cache_hit_rate")
    if cold and hit is not None and hit > COLD_HIT_RATE:
        step.warnings.append(f"the engine served {100 * hit:.1f} % of the prompt tokens from its prefix cache "
                             "although every prompt was salted: a cache warmed by other traffic")
    if inv.returncode not in (0, None) or inv.stopped:
        found = classify(inv.console, returncode=inv.returncode, server_reachable=reachable, model=ctx.spec.model)
        step.failure = (found.failure if inv.returncode is not None else Failure.REQUEST_ERRORS).value
        step.failure_note = found.message if inv.returncode is not None else (
            f"a streamed request failed ({step.failures.hit or 'unknown class'}); perf_analyzer was stopped")
        step.warnings.append(f"perf_analyzer exited with status {inv.returncode}; see {name}.stdout / {name}.stderr")


def _shape_facts(step: LLMStep, schedule: Schedule, shape: Shape, points: Sequence[ServerPoint],
                 records: Sequence[RequestRecord]) -> None:
    """A traffic shape's step: the server's recovery after the load (a spike's burst, else the whole
    schedule), the drift, the phases; all on the requests' clock (s from the first request)."""
    offset = schedule.intervals_us[0] / 1e6
    burst = schedule.phase("burst") if isinstance(shape, Spike) else None
    start_s, end_s = (burst.start_s, burst.end_s) if burst is not None else (offset, schedule.duration_s)
    step.recovery = (recovery(points, load_start_s=max(0.0, start_s - offset), load_end_s=max(0.0, end_s - offset))
                     if points else None)
    step.drift = drift(records) if records else None
    step.phases = [{**asdict(p), "start_s": max(0.0, p.start_s - offset), "end_s": max(0.0, p.end_s - offset)}
                   for p in schedule.phases]


def _served(line: TrtllmChoice | None, tokenizer_from: tuple[str, str] | None,
            token_output: str | None) -> dict[str, str]:
    tokenizer, origin = tokenizer_from or (None, None)
    served = {"trtllm_version": line.interface.version if line and line.interface else None,
              "trtllm_version_from": line.origin if line else None, "tokenizer": tokenizer, "tokenizer_from": origin,
              "min_tokens_input": line.min_tokens_input if line else None, "token_output": token_output}
    return {key: value for key, value in served.items() if value is not None}


def _describe(name: str, step: LLMStep) -> str:
    m = step.metrics
    if m is None or m.ttft_ms is None:
        hit = step.failures.hit or "nothing measured"
        return f"[{name}] no metrics ({hit}; {step.wall_s:.1f} s)"
    itl = f"ITL p50 {m.itl_ms.p50:.1f} ms, " if m.itl_ms else ""
    tps = f"{m.output_token_throughput_per_s:.1f} tok/s" if m.output_token_throughput_per_s else "n/a tok/s"
    fail = f", failures: {step.failures.hit} ×{step.failures.total}" if step.failures.total else ""
    return f"[{name}] TTFT p50 {m.ttft_ms.p50:.1f} ms, {itl}{tps}{fail} ({step.wall_s:.1f} s)"
