"""``tritonkit perf run`` as one library call: what the command does, a library caller gets too.

:func:`~tritonkit.perf.pipeline.run_perf` climbs a ladder, judges and reports it. :func:`load_test`
is the whole command around it, in this order::

    LoadTestSettings (one frozen value: the command's options)
      → the model repository: ``repo``, else ./model_repository when it holds the model
      → input data: derived from the model file there, or a refusal naming the options that
        supply variable dims (:func:`~tritonkit.perf.measure.input_data.prepare_run_inputs`)
      → dry run: the perf_analyzer commands the run would make; nothing starts, nothing is written
      → perf_analyzer located
      → preflight: one request, its answer checked against the declared dtypes and shapes
        (a wrong answer ends it here: nothing is measured, exit 1)
      → run_perf, with ``check_outputs`` answers compared with ONNX Runtime while the load runs

:func:`llm_load_test` is ``perf run --llm``: the same settings say where (server, SLA, folders,
perf_analyzer), an :class:`~tritonkit.perf.llm.settings.LLMSettings` says what load; it checks
everything before anything starts, has a dry run, and then calls
:func:`~tritonkit.perf.pipeline.run_llm_perf`.

Both return what happened as a value (:class:`LoadTest`, :class:`LLMLoadTest`) with the exit
status the command ends with. A Ctrl-C during the load is not re-raised: the steps measured
before it are saved and judged, and the value says ``interrupted`` (exit 2).

Example::

    from tritonkit.perf import LoadTestSettings, load_test

    test = load_test("resnet", LoadTestSettings(url="127.0.0.1:8001", sla="p99<=50ms", concurrency="1:16"))
    print(test.run.verdict.summary() if test.run and test.run.verdict else test.exit_code)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tritonkit._settings import field_default
from tritonkit._values import (
    COUNT,
    REPEATS,
    SECONDS,
    SECONDS_OR_ZERO,
    STEPS,
    TOLERANCE,
    bounded,
    check_choice,
    check_fields,
)
from tritonkit.errors import ConfigError, MissingComponentError
from tritonkit.perf.judge.criteria import DEFAULT_RATE_TOLERANCE, JudgeSettings
from tritonkit.perf.judge.sla import SLA, load_sla
from tritonkit.perf.judge.verdict import EXIT_PASS, EXIT_UNMEASURED
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.measure.input_data import SeqLen, prepare_run_inputs
from tritonkit.perf.measure.output_check import EXIT_WRONG_OUTPUTS, OutputCheck, output_checker, preflight
from tritonkit.perf.measure.plan import LadderPlan, default_results_dir
from tritonkit.perf.measure.spec import PerfSpec, Protocol
from tritonkit.perf.pipeline import PlannedCommand, planned_commands, run_llm_perf, run_perf
from tritonkit.perf.run_record import LLMRun, LoadGenerator, PerfRun, StepEvent
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall, locate_perf_analyzer

__all__ = ["DEFAULT_REPOSITORY", "LLMLoadTest", "LoadTest", "LoadTestSettings", "llm_load_test", "load_test"]

Progress = Callable[[str], None]

#: The repository a load test reads the model file from when none is given, if it holds the model.
DEFAULT_REPOSITORY = Path("model_repository")
#: Where the server listens when no URL is given, by protocol (Triton's default ports).
_DEFAULT_URLS: dict[str, str] = {"grpc": "127.0.0.1:8001", "http": "127.0.0.1:8000", "openai": "127.0.0.1:8000"}


@dataclass(frozen=True)
class LoadTestSettings:
    """Everything ``perf run`` is asked, except the model: its options, one field each.

    Where: ``url`` (default ``127.0.0.1:8001`` for gRPC, ``:8000`` for HTTP) and ``protocol``;
    ``out`` the run folder (default ``<results_root>/<UTC>-<model>``; an earlier run there is
    resumed); ``baseline_root`` keeps the run as a baseline there; ``metrics_url`` is scraped
    during each step; ``perf_analyzer`` a binary or an install (default: located).
    What: ``sla`` (an :class:`SLA`, an expression or a YAML file; ``errors==0`` is added unless
    errors are bounded); the ladder's ``concurrency`` or ``request_rate`` levels (numbers, or
    text as ``'1,2,4'``, ``'1:16'``; default concurrency ``1:8``) with ``distribution`` and
    ``rate_tolerance`` (with request-rate levels a step meets the SLA only if the server carried
    the offered rate less this fraction; see :class:`JudgeSettings`), ``duration_s`` per step, ``max_trials``, ``warmup_s``, ``stop_after`` SLA-breaking steps and
    ``timeout_s`` for the whole ladder (see :meth:`LadderPlan.from_duration`); ``repeat`` runs
    the ladder that many times and judges each figure's median over the runs with its interval
    over them (the spread from run to run; see :func:`~tritonkit.perf.pipeline.run_perf`).
    Data: ``batch_size``, ``input_data`` (``'zero'``, ``'random'`` or a perf_analyzer JSON file),
    ``shapes`` of variable-size inputs; ``repo`` the model repository holding the model file that
    valid data is derived from (default: ./model_repository when it holds the model), with
    ``seq_len`` (``N`` or ``LOW:HIGH``) for variable dims; ``keep_outputs`` lets perf_analyzer
    receive response outputs instead of leaving them in shared memory; ``check_outputs`` compares
    a sample of answers with ONNX Runtime on the model file while the load runs.
    """

    url: str | None = None
    protocol: Protocol | Literal["openai"] = "grpc"
    sla: SLA | str | None = None
    concurrency: str | Sequence[float] | None = None
    request_rate: str | Sequence[float] | None = None
    distribution: str = "constant"
    rate_tolerance: float = bounded(DEFAULT_RATE_TOLERANCE, TOLERANCE)
    duration_s: float = bounded(6.0, SECONDS)
    max_trials: int = bounded(6, STEPS)
    warmup_s: float = bounded(5.0, SECONDS_OR_ZERO)
    stop_after: int = bounded(2, STEPS)
    batch_size: int = bounded(1, COUNT)
    input_data: str | Path | None = None
    shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    repo: Path | None = None
    seq_len: str | None = None
    keep_outputs: bool = False
    check_outputs: bool = False
    metrics_url: str | None = None
    out: Path | None = None
    results_root: Path = Path("results")
    baseline_root: Path | None = None
    perf_analyzer: str | os.PathLike[str] | PerfAnalyzerInstall | None = None
    timeout_s: float = bounded(1800.0, SECONDS)
    repeat: int = bounded(1, REPEATS)

    def __post_init__(self) -> None:
        check_fields(self)
        check_choice(self.protocol, "LoadTestSettings.protocol", ("grpc", "http", "openai"))
        check_choice(self.distribution, "LoadTestSettings.distribution", ("constant", "poisson"))
        self.ladder_plan()  # the levels, held to their bounds before anything starts

    @staticmethod
    def default(name: str) -> Any:
        """The default of field ``name`` (the command line's option defaults are read from here)."""
        return field_default(LoadTestSettings, name)

    def target_url(self) -> str:
        """``url``, else the local server's default port for ``protocol``."""
        return self.url or _DEFAULT_URLS[self.protocol]

    def parsed_sla(self) -> SLA | None:
        """The SLA as given (``None`` without one); a text is an expression or a YAML file."""
        return load_sla(self.sla) if isinstance(self.sla, str) else self.sla

    def spec(self, model: str) -> PerfSpec:
        """What perf_analyzer measures, before input data is derived (Triton's protocols; ``openai`` is
        an LLM run's, refused by :func:`load_test` before it gets here)."""
        if self.protocol == "openai":
            raise ConfigError("--protocol openai measures an LLM endpoint: it needs --llm",
                              hint="add --llm (TTFT, inter-token latency, tokens/s over the OpenAI API)")
        return PerfSpec(model=model, url=self.target_url(), protocol=self.protocol, batch_size=self.batch_size,
                        input_data=None if self.input_data is None else str(self.input_data),
                        shapes={name: list(dims) for name, dims in self.shapes.items()})

    def judging(self) -> JudgeSettings:
        """What a step must meet beyond the SLA's bounds (checked: a tolerance outside [0, 1) is refused)."""
        return JudgeSettings(rate_tolerance=self.rate_tolerance)

    def ladder_plan(self) -> LadderPlan:
        """How the ladder climbs (checked: both kinds of levels, or a duration of 0, are refused)."""
        return LadderPlan.from_duration(self.duration_s, concurrency=self.concurrency, request_rate=self.request_rate,
                                        distribution=self.distribution, max_trials=self.max_trials,
                                        warmup_s=self.warmup_s, stop_after_sla_breaks=self.stop_after,
                                        total_timeout_s=self.timeout_s)

    def results_dir(self, model: str) -> Path:
        """``out``, else a new ``<results_root>/<UTC timestamp>-<model>``."""
        return Path(self.out) if self.out is not None else default_results_dir(model, self.results_root)

    def model_repository(self, model: str) -> Path | None:
        """The repository holding ``model``'s file: ``repo``, else ./model_repository when it has
        ``model``, else ``None`` (no data is derived then)."""
        if self.repo is not None:
            return Path(self.repo)
        return DEFAULT_REPOSITORY if (DEFAULT_REPOSITORY / model).is_dir() else None

    def locate_perf_analyzer(self) -> PerfAnalyzerInstall:
        """The perf_analyzer to run (``MissingComponentError`` when there is none)."""
        if isinstance(self.perf_analyzer, PerfAnalyzerInstall):
            return self.perf_analyzer
        return locate_perf_analyzer(self.perf_analyzer)


@dataclass
class LoadTest:
    """What :func:`load_test` did. Exactly one of these tells how it ended: ``planned`` (a dry
    run), ``wrong_outputs`` (the preflight's answer was wrong: nothing measured), ``interrupted``,
    or ``run`` (the run, with ``output_check`` when answers were compared under load).

    ``sla``: as judged (``errors==0`` added). ``notes``: what the caller should be told besides
    (a dry run without perf_analyzer shows ``perf_analyzer`` in its commands). When interrupted,
    the steps measured before are saved in ``results_dir`` (``run`` is ``None``).
    """

    model: str
    results_dir: Path
    sla: SLA | None
    run: PerfRun | None = None
    planned: list[PlannedCommand] | None = None
    wrong_outputs: list[str] = field(default_factory=list)
    output_check: OutputCheck | None = None
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 SLA met (or a dry run), 1 SLA missed or answers wrong, 2 could not measure.

        Answers compared under load overrule the run's verdict: wrong answers are 1, none
        compared is 2 (the check could not be made); a run that failed mid-way is 2.
        """
        if self.wrong_outputs:
            return EXIT_WRONG_OUTPUTS
        if self.interrupted or self.run is None:
            return EXIT_PASS if self.planned is not None else EXIT_UNMEASURED
        if self.run.error is not None:
            return self.run.exit_code
        if self.output_check is not None and not self.output_check.ok:
            return EXIT_WRONG_OUTPUTS if self.output_check.problems else EXIT_UNMEASURED
        return self.run.exit_code


def load_test(
    model: str,
    settings: LoadTestSettings,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
    load_generator: LoadGenerator | None = None,
) -> LoadTest:
    """Load-test ``model`` as ``tritonkit perf run MODEL`` does (see the module docstring).

    ``dry_run``: plan the perf_analyzer commands and return them in :attr:`LoadTest.planned`;
    nothing starts and nothing is written (not even the derived input data). ``progress`` gets a
    line per step as the run goes, ``on_step`` each finished step. ``load_generator``: what runs
    each step (see :class:`~tritonkit.perf.run_record.RunSetup`; a cluster's, for ``perf run --cluster``).

    Raises before anything is measured: ``ConfigError`` (bad settings, an SLA that does not
    parse, variable dims with no data, ``check_outputs`` without the model file, a folder
    holding another run), ``MissingComponentError`` (no perf_analyzer, on a real run),
    ``ConnectError`` / ``ModelNotReadyError`` (server or model not there). Failures after launch
    come back in the run (:attr:`PerfRun.error`), everything measured before them saved.
    """
    settings.spec(model)  # --protocol openai without --llm is refused here, before anything else
    sla = settings.parsed_sla()
    if sla is not None:
        sla.check_measurable("classic")
    judged = sla.with_zero_errors() if sla is not None else None
    spec = settings.spec(model)
    plan = settings.ladder_plan()
    folder = settings.results_dir(model)
    prepared = prepare_run_inputs(spec, folder, repo=settings.model_repository(model),
                                  seq_len=SeqLen.parse(settings.seq_len) if settings.seq_len is not None else None,
                                  keep_outputs=settings.keep_outputs,
                                  write=not dry_run)
    spec = prepared.spec
    test = LoadTest(model, folder, judged)
    if dry_run:
        try:
            planned_tool: PerfAnalyzerInstall | None = settings.locate_perf_analyzer()
        except MissingComponentError as exc:
            planned_tool = None
            test.notes.append(f"{exc.message}; showing 'perf_analyzer' in its place")
        test.planned = planned_commands(spec, plan, folder, planned_tool, repeat=settings.repeat)
        return test
    tool = settings.locate_perf_analyzer()
    say = progress or (lambda _message: None)
    if judged is not None:
        say(f"SLA: {judged}")
    checker = output_checker(prepared, settings.check_outputs)
    if prepared.samples:
        test.wrong_outputs = preflight(spec.url, model, prepared.samples[0], version=spec.model_version or "")
        if test.wrong_outputs:
            return test
    try:
        if checker is not None:
            checker.start()
        test.run = run_perf(spec, plan, sla=sla, results_dir=folder, perf_analyzer=tool,
                            metrics_url=settings.metrics_url, baseline_root=settings.baseline_root,
                            progress=progress, on_step=on_step, judging=settings.judging(),
                            load_generator=load_generator,
                            input_notes=[f"input data: {note}" for note in prepared.notes], repeat=settings.repeat)
    except KeyboardInterrupt:
        test.interrupted = True  # run_perf saved and judged the steps measured so far
    finally:
        test.output_check = checker.stop() if checker is not None else None
    return test


# --------------------------------------------------------------------------- LLM mode


@dataclass
class LLMLoadTest:
    """What :func:`llm_load_test` did: ``run`` (``None`` on a dry run, or when interrupted: the
    files written so far are in ``results_dir``). ``load`` and ``prompts`` say, in words, what
    was (or on a dry run would be) sent; ``tokenizer_on_server``: no tokenizer was given, so a
    TensorRT-LLM pipeline's own is looked up on the server when the run starts."""

    model: str
    url: str
    results_dir: Path
    load: str
    prompts: str
    tokenizer_on_server: bool
    dry_run: bool = False
    run: LLMRun | None = None
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        """0 SLA met (or a dry run), 1 SLA missed, 2 could not measure (see :attr:`LLMRun.exit_code`)."""
        if self.run is not None:
            return self.run.exit_code
        return EXIT_PASS if self.dry_run and not self.interrupted else EXIT_UNMEASURED

    def plan_line(self) -> str:
        """The dry run in one line: the model, the server, the load, the prompts and the folder."""
        found = ("; a TensorRT-LLM pipeline's own tokenizer is looked up on the server when the run starts"
                 if self.tokenizer_on_server else "")
        return (f"would run an LLM load test on {self.model} at {self.url}: {self.load}; prompts: {self.prompts}"
                f"{found}; into {self.results_dir}")


def llm_load_test(
    model: str,
    llm: LLMSettings,
    settings: LoadTestSettings | None = None,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    load_generator: LoadGenerator | None = None,
) -> LLMLoadTest:
    """Load-test ``model`` as an LLM, as ``tritonkit perf run MODEL --llm`` does.

    ``llm`` says what load (its concurrency levels or traffic shape, prompts, step limit
    ``timeout_s``, the served repository ``repo``); ``settings`` says where, and only these of
    its fields are read: ``url``, ``repeat`` (the whole test that many times, combined), ``protocol``
    (``grpc``: Triton's stream; ``openai``: an OpenAI-compatible
    server, ``llm.endpoint`` / ``llm.api_key_env``), ``sla``, ``metrics_url``,
    ``out``, ``results_root``, ``baseline_root``, ``perf_analyzer``. Every option is checked
    (the repository folder, the prompts, the plan) before anything starts, dry run or not;
    ``dry_run`` then returns the plan without contacting the server or writing anything.
    Then :func:`~tritonkit.perf.pipeline.run_llm_perf` (served tokenizer, measure, judge, report).
    """
    where = settings or LoadTestSettings()
    if llm.repo is not None and not Path(llm.repo).is_dir():
        raise ConfigError(f"--repo {llm.repo}: no such folder",
                          hint="give the served model repository as it is on this machine, or leave --repo out")
    if where.protocol == "http":
        raise ConfigError("--llm streams over gRPC (Triton) or OpenAI's HTTP API, not Triton's HTTP",
                          hint="drop --protocol http, or use --protocol openai for an OpenAI-compatible server")
    if where.protocol != "openai" and (llm.endpoint is not None or llm.api_key_env is not None):
        raise ConfigError("--endpoint and --api-key-env only apply to an OpenAI-compatible server",
                          hint="add --protocol openai, or drop them")
    llm = replace(llm, protocol="openai" if where.protocol == "openai" else "grpc")
    sla = where.parsed_sla()
    _prompts, source = llm.load_prompts()
    llm.plan(sla)  # bad options are refused before anything starts, dry run or not
    load = llm.describe_load() + (f", {where.repeat} runs (each into run-<i>/)" if where.repeat > 1 else "")
    test = LLMLoadTest(model, where.target_url(), where.results_dir(model), load=load, prompts=source,
                       tokenizer_on_server=llm.tokenizer is None, dry_run=dry_run)
    if dry_run:
        return test
    tool = where.locate_perf_analyzer()
    try:
        test.run = run_llm_perf(model, test.url, llm, sla=sla, results_dir=test.results_dir, perf_analyzer=tool,
                                metrics_url=where.metrics_url, baseline_root=where.baseline_root, progress=progress,
                                load_generator=load_generator, repeat=where.repeat)
    except KeyboardInterrupt:
        test.interrupted = True
    return test
