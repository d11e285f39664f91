"""Run perf_analyzer once, safely, keeping everything it measured.

``PerfAnalyzer.run(spec, name)`` starts perf_analyzer in its own session (process group), bound
to die with this process however it dies (even SIGKILL), with its console going straight to
files in the results folder, watches it against a monotonic deadline
(noticing a dead child at once), scrapes the server's ``/metrics`` and the generator's own CPU
while it runs, kills the whole group on timeout, exception or Ctrl-C, and turns the outcome into
``StepResult``s:

* exit 0: the CSV and profile export are parsed; a step the console calls unstable (a sweep
  stops there but still exits 0) is kept, marked unstable;
* exit 2 (unstable measurement): every step already measured is kept, the unstable one is
  recorded as such (``AnalyzerOutcome.unstable_loads``) — the ladder may retry it with a longer window;
* a failed request (perf_analyzer aborts the step, exit 99 "Thread [i] had error"): a step with
  ``error_count`` > 0 and the tool's message — a result, not a crash;
* exit 3 or a rejected option: ``StepError`` (a ``PerfError``) with perf_analyzer's own complaint;
* anything else: ``StepError`` with the return code, the stderr tail, and why
  (:mod:`tritonkit.perf.measure.failures`: ``.failure`` and the server's or model's message).

A step of an invocation that did not exit 0 (or 2, unstable) carries ``failure``: never measured.

Raw files (``<name>.csv``, ``.json``, ``.stdout``, ``.stderr``, ``.argv.json``) are written as the
run goes, so nothing measured is lost even when this process dies.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import NoReturn

from tritonkit._dial import dial_for
from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError, ConnectError, ModelNotReadyError, PerfError, TritonKitError
from tritonkit.perf.measure.failures import (
    Failure,
    StepError,
    StepTimeoutError,
    classify,
    diagnose_request_errors,
)
from tritonkit.perf.measure.machine import MachineSampler, busy_warning, generator_warning, listening_pid
from tritonkit.perf.measure.metrics import (
    MetricsSnapshot,
    MetricsWatcher,
    ProcessCpu,
    generator_cpu_warning,
    host_cpu_count,
    step_metrics,
)
from tritonkit.perf.measure.parse import (
    ConsoleSummary,
    build_steps,
    parse_console,
    parse_csv,
    parse_profile_export,
)
from tritonkit.perf.measure.result import MachineLoad, StepResult
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, RequestIntervals, to_argv
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall, locate_perf_analyzer
from tritonkit.server.children import spawn, stop_group

__all__ = [
    "PA_EXIT_OK",
    "PA_EXIT_OPTION_ERROR",
    "PA_EXIT_UNSTABLE",
    "PerfAnalyzer",
    "AnalyzerOutcome",
    "Invocation",
    "output_files",
    "utc_now",
]

#: perf_analyzer's own exit codes (not a tritonkit command's exit status).
PA_EXIT_OK = 0
PA_EXIT_UNSTABLE = 2
PA_EXIT_OPTION_ERROR = 3

_POLL_S = 0.1
_KILL_GRACE_S = 3.0

Progress = Callable[[str], None]


def output_files(results_dir: str | os.PathLike[str], name: str) -> tuple[Path, Path]:
    """The CSV and profile-export paths that run ``name`` writes into ``results_dir``."""
    folder = Path(results_dir)
    return folder / f"{name}.csv", folder / f"{name}.json"


def utc_now() -> str:
    """Now, UTC, ISO 8601 with a ``Z`` (the timestamps in ``result.json``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class AnalyzerOutcome:
    """One perf_analyzer invocation: what ran, how it ended, what it measured, where the files are."""

    name: str
    argv: list[str]
    returncode: int
    duration_s: float
    started_utc: str
    steps: list[StepResult]
    console: ConsoleSummary
    unstable_loads: list[float] = field(default_factory=list)
    generator_cpu_pct: float | None = None
    raw_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every step measured stably, without errors."""
        return bool(self.steps) and all(s.measured for s in self.steps)


@dataclass
class Invocation:
    """One perf_analyzer process as the supervisor saw it, before any of its files are read.

    ``returncode`` is ``None`` when the supervisor stopped it (``stopped``: ``stop_when`` said so).
    ``wall0_ns`` / ``mono0_s`` are the wall and monotonic clocks at its start (to place the
    server's scrapes on the requests' clock); ``snapshots`` the server's ``/metrics`` during the
    run (and ``settle_s`` after it).
    """

    name: str
    argv: list[str]
    returncode: int | None
    stopped: bool
    started_utc: str
    wall0_ns: int
    mono0_s: float
    duration_s: float
    cpu_pct: float | None
    snapshots: list[MetricsSnapshot] = field(default_factory=list)
    scrape_errors: list[str] = field(default_factory=list)
    stdout_path: Path = Path()
    stderr_path: Path = Path()
    machine: MachineLoad | None = None

    @property
    def stdout(self) -> str:
        """What it printed on stdout."""
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        """What it printed on stderr."""
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    @property
    def console(self) -> str:
        """stdout and stderr together."""
        return self.stdout + "\n" + self.stderr


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


class PerfAnalyzer:
    """Runs perf_analyzer invocations into one results folder.

    ``perf_analyzer`` defaults to ``locate_perf_analyzer()``; ``metrics_url`` (the server's
    ``/metrics``) enables scraping during each run; ``progress`` receives one line per event.
    """

    def __init__(
        self,
        results_dir: str | os.PathLike[str],
        *,
        perf_analyzer: PerfAnalyzerInstall | None = None,
        metrics_url: str | None = None,
        metrics_interval_s: float = 0.5,
        progress: Progress | None = None,
    ) -> None:
        self.results_dir = Path(results_dir)
        self.perf_analyzer = perf_analyzer or locate_perf_analyzer()
        self.metrics_url = metrics_url
        self.metrics_interval_s = metrics_interval_s
        self.progress = progress
        self.cores = host_cpu_count()
        self._server_pids: dict[str, int | None] = {}

    def server_pid(self, url: str) -> int | None:
        """The server's process when it is on this host (found once per URL; see
        :func:`~tritonkit.perf.measure.machine.listening_pid`)."""
        if url not in self._server_pids:
            try:
                self._server_pids[url] = listening_pid(url)
            except (OSError, ValueError):
                self._server_pids[url] = None  # /proc unreadable here: the server counts with the others
        return self._server_pids[url]

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    def clients_record(self) -> list[dict[str, object]]:
        """The load generators behind the steps, when there are several (a subclass that spreads each
        step over many machines says which); one perf_analyzer here: none. Kept as ``result.clients``."""
        return []

    def command(self, spec: PerfSpec) -> list[str]:
        """The full argv (binary prefix + options) that ``run`` would start: with the headers of the
        server's dial, through the wrapper that keeps their values out of it (:mod:`tritonkit.perf.llm._keyed`)."""
        from tritonkit.perf.llm._keyed import (
            headers_command,  # a leaf module; perf.llm's package imports this one
        )

        return [*headers_command(dial_for(spec.url).headers, self.perf_analyzer.argv), *to_argv(spec)]

    def run(self, spec: PerfSpec, name: str, *, timeout_s: float | None = None, model_for_metrics: str | None = None) -> AnalyzerOutcome:
        """Run ``spec`` once, writing ``<name>.*`` into the results folder.

        ``timeout_s`` bounds the whole invocation (the group is killed and ``PerfError`` raised,
        the files written so far stay). The CSV / export paths in ``spec`` are replaced by the
        folder's own.
        """
        requested = spec.load
        if isinstance(requested, RequestIntervals):  # no load levels to read a ladder step from
            raise ConfigError(f"{name}: a request-intervals schedule is an LLM step, not a ladder step",
                              hint="run traffic shapes with run_llm (tritonkit perf run --llm --traffic ...)")
        self.results_dir.mkdir(parents=True, exist_ok=True)
        csv_path, export_path = output_files(self.results_dir, name)
        for stale in (csv_path, export_path):
            stale.unlink(missing_ok=True)  # a previous attempt's file must not pass for this one's
        spec = spec.with_files(csv_path, export_path)
        invocation = self.invoke(self.command(spec), name, timeout_s=timeout_s, server_url=spec.url)
        argv, returncode, duration_s, started_utc = (
            invocation.argv, int(invocation.returncode or 0), invocation.duration_s, invocation.started_utc)
        stdout_path, stderr_path = invocation.stdout_path, invocation.stderr_path
        raw = [p.name for p in (csv_path, export_path, stdout_path, stderr_path) if p.exists()]
        raw.append(f"{name}.argv.json")
        console = parse_console(invocation.stdout, invocation.stderr)
        if returncode == PA_EXIT_OPTION_ERROR or (returncode != PA_EXIT_OK and console.option_error):
            self._refuse(invocation, console, spec)
        steps = self._steps(csv_path, export_path, spec)
        cpu_pct = invocation.cpu_pct
        metrics = step_metrics(invocation.snapshots, model_for_metrics or spec.model) if self.metrics_url else None
        scrape_errors = invocation.scrape_errors
        scraped = f"could not scrape {self.metrics_url}: {scrape_errors[-1]}" if scrape_errors else None
        # perf_analyzer's own CPU says it was the limit; else the host's view of it may.
        limit = generator_cpu_warning(cpu_pct, self.cores) or generator_warning(invocation.machine)
        warnings = [w for w in (scraped, limit, busy_warning(invocation.machine)) if w]
        loads = requested.values()
        if console.request_error_lines:
            diagnosis = diagnose_request_errors(invocation.console)
            failed_load = self._failed_load(loads, steps)
            # One "had error" line per worker thread that failed. The server's failure counter is
            # only a lower bound too: tritonserver 2.51 counts a python-backend error response as
            # a success (seen here), so take the larger of the two.
            failures = int(metrics.failure_count) if metrics and metrics.failure_count else 0
            steps.append(StepResult(
                load_mode=_mode(spec), load_value=float(failed_load), throughput_per_s=None, latency=None,
                error_count=max(len(console.request_error_lines), failures),
                error_note="; ".join(console.request_error_lines),
                failure=diagnosis.failure.value if diagnosis else Failure.REQUEST_ERRORS.value,
                failure_note=diagnosis.message if diagnosis else None))
        elif returncode not in (PA_EXIT_OK, PA_EXIT_UNSTABLE):
            self._refuse(invocation, console, spec)
        if returncode not in (PA_EXIT_OK, PA_EXIT_UNSTABLE):
            # A step of an invocation that failed is never a measurement, whatever its files hold.
            diagnosis = classify(invocation.console, returncode=returncode, model=spec.model)
            for step in steps:
                step.failure, step.failure_note = diagnosis.failure.value, diagnosis.message
        unstable = list(console.unstable_loads)
        if returncode == PA_EXIT_UNSTABLE and not unstable:
            unstable = [self._failed_load(loads, steps)]
        for load in unstable:
            note = _unstable_note(spec, load, console.unstable_lines)
            existing = next((s for s in steps if s.load_value == load), None)
            if existing is None:
                steps.append(StepResult(load_mode=_mode(spec), load_value=float(load), throughput_per_s=None,
                                        latency=None, stable=False, unstable_note=note))
            else:
                existing.stable = False
                existing.unstable_note = note
        steps.sort(key=lambda s: s.load_value)
        for step in steps:
            step.started_utc = started_utc
            step.raw_files = list(raw)
            step.warnings.extend(warnings)
            if len(steps) == 1:
                # Metrics and CPU describe the whole invocation: only a one-step run owns them.
                step.duration_s = duration_s
                step.metrics = metrics
                step.generator_cpu_pct = cpu_pct
                step.generator_cpu_pct_of_cores = None if cpu_pct is None else cpu_pct / self.cores
                step.machine = invocation.machine
        self._say(_describe(name, steps, duration_s))
        return AnalyzerOutcome(
            name=name, argv=argv, returncode=returncode, duration_s=duration_s, started_utc=started_utc,
            steps=steps, console=console, unstable_loads=[float(u) for u in unstable],
            generator_cpu_pct=cpu_pct, raw_files=raw, warnings=warnings,
        )

    def invoke(
        self,
        argv: list[str],
        name: str,
        *,
        timeout_s: float | None = None,
        stop_when: Callable[[], bool] | None = None,
        settle_s: float = 0.0,
        server_url: str | None = None,
    ) -> Invocation:
        """Start ``argv`` (a full perf_analyzer command line) as run ``name`` and supervise it.

        The one supervisor of perf_analyzer processes (classic steps and LLM steps alike): its
        argv goes to ``<name>.argv.json``, its console straight to ``<name>.stdout`` /
        ``.stderr``; it runs in its own session, dead with this process however it dies; its
        exit is noticed at once (``waitid`` without reaping, so its final CPU totals can still be
        read); the server's ``/metrics`` is scraped while it runs and ``settle_s`` after; the
        group is stopped on timeout (``PerfTimeoutError``), exception or Ctrl-C, and when
        ``stop_when()`` (asked twice a second) turns true. The host's CPU over the run is read
        too (:class:`~tritonkit.perf.measure.machine.MachineSampler`; ``server_url`` finds the
        server's processes when it is on this host).
        """
        self.results_dir.mkdir(parents=True, exist_ok=True)
        stdout_path = self.results_dir / f"{name}.stdout"
        stderr_path = self.results_dir / f"{name}.stderr"
        atomic_write(self.results_dir / f"{name}.argv.json", json.dumps(argv, indent=1) + "\n")
        started_utc = utc_now()
        watcher = MetricsWatcher(self.metrics_url, interval_s=self.metrics_interval_s) if self.metrics_url else None
        if watcher is not None:
            watcher.start()
        try:
            with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
                wall0_ns, mono0_s = time.time_ns(), time.monotonic()
                deadline = None if timeout_s is None else mono0_s + timeout_s
                try:
                    # Its own session (the group is stopped as one), and dead with us however we die:
                    # a SIGKILL of this process must not leave load running against the server.
                    proc = spawn(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
                except OSError as exc:
                    raise StepError(
                        f"cannot start perf_analyzer ({argv[0]}): {exc.strerror}", failure=Failure.TOOL_ERROR,
                        hint="run 'tritonkit perf install --force' or pass --perf-analyzer PATH",
                    ) from exc
                cpu = ProcessCpu(proc.pid)
                cpu.begin()
                sampler = MachineSampler(self.server_pid(server_url) if server_url else None, self.cores)
                sampler.begin()
                try:
                    returncode = self._wait(proc, cpu, deadline, timeout_s, name, stderr_path, stop_when)
                finally:
                    stop_group(proc, _KILL_GRACE_S)  # no-op when it ended by itself; always on exception / Ctrl-C
            machine = sampler.end(cpu.cpu_s, console=stdout_path.read_text(encoding="utf-8", errors="replace"))
            duration_s = time.monotonic() - mono0_s
            if watcher is not None and settle_s > 0:
                time.sleep(settle_s)
        finally:
            if watcher is not None:
                watcher.stop()
        return Invocation(
            name=name, argv=list(argv), returncode=returncode, stopped=returncode is None, started_utc=started_utc,
            wall0_ns=wall0_ns, mono0_s=mono0_s, duration_s=duration_s, cpu_pct=cpu.cpu_pct,
            snapshots=list(watcher.snapshots) if watcher else [], scrape_errors=list(watcher.errors) if watcher else [],
            stdout_path=stdout_path, stderr_path=stderr_path, machine=machine,
        )

    def _wait(
        self,
        proc: subprocess.Popen[bytes],
        cpu: ProcessCpu,
        deadline: float | None,
        timeout_s: float | None,
        name: str,
        stderr_path: Path,
        stop_when: Callable[[], bool] | None,
    ) -> int | None:
        """Wait for ``proc`` (sampling its CPU) until it exits (its status), ``stop_when()`` (``None``)
        or ``deadline`` passes (``PerfTimeoutError``)."""
        next_sample = time.monotonic()
        while True:
            # WNOWAIT: notice the exit without reaping, so /proc still holds its final CPU totals.
            try:
                exited = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                exited = None
                if proc.poll() is not None:
                    return int(proc.returncode)
            if exited is not None:
                cpu.sample()
                return int(proc.wait())
            now = time.monotonic()
            if now >= next_sample:
                cpu.sample()
                next_sample = now + 0.5
                if stop_when is not None and stop_when():
                    time.sleep(0.5)  # let it print what it has
                    return None
            if deadline is not None and now >= deadline:
                stop_group(proc, _KILL_GRACE_S)
                raise StepTimeoutError(
                    f"perf_analyzer run '{name}' did not finish within {timeout_s:g} s and was stopped",
                    failure=Failure.TIMEOUT, server_message=f"no end within {timeout_s:g} s",
                    returncode=proc.returncode,
                    stderr_tail=_tail(stderr_path),
                    hint="raise the timeout, shorten the measurement interval or the request count, "
                    "or lower max trials",
                )
            time.sleep(_POLL_S)

    def _refuse(self, invocation: Invocation, console: ConsoleSummary, spec: PerfSpec) -> NoReturn:
        """Raise the :class:`StepError` for an invocation that measured nothing, classified."""
        reachable, ready = _server_state(spec)
        diagnosis = classify(invocation.console, returncode=invocation.returncode, option_error=console.option_error,
                             server_reachable=reachable, model_ready=ready, model=spec.model)
        where = f"the command is in {self.results_dir / (invocation.name + '.argv.json')}"
        if diagnosis.failure is Failure.REFUSED_OPTIONS:
            message = f"perf_analyzer rejected its options: {diagnosis.message or _tail(invocation.stderr_path, 3)}"
            hint = f"check the perf options; {where}"
        else:
            message = f"perf_analyzer step '{invocation.name}' failed ({diagnosis.failure}): {diagnosis.message}"
            hint = f"see {invocation.stdout_path} and {invocation.stderr_path}; {where}"
        raise StepError(message, failure=diagnosis.failure, server_message=diagnosis.message,
                        returncode=invocation.returncode, stderr_tail=_tail(invocation.stderr_path), hint=hint)

    @staticmethod
    def _steps(csv_path: Path, export_path: Path, spec: PerfSpec) -> list[StepResult]:
        rows = parse_csv(csv_path) if csv_path.exists() else []
        try:
            experiments = parse_profile_export(export_path) if export_path.exists() else []
        except PerfError as exc:
            if not rows:
                raise
            # WAR: perf_analyzer 2.60's JSON writer stops at the first NaN/inf output value, leaving
            # the export cut short; the CSV still holds the step, with perf_analyzer's percentiles.
            steps = build_steps(rows, [], batch_size=spec.batch_size)
            for step in steps:
                step.warnings.append(f"{exc.message}; latency percentiles are perf_analyzer's own (CSV). "
                                     "NaN/inf outputs cut the export short: use finite input data "
                                     "(perf run derives it with --repo) or keep outputs in shared memory")
            return steps
        return build_steps(rows, experiments, batch_size=spec.batch_size)

    @staticmethod
    def _failed_load(loads: list[int] | list[float], steps: list[StepResult]) -> float:
        """The first load of the run that has no measured step: where perf_analyzer stopped."""
        done = {s.load_value for s in steps if s.throughput_per_s is not None and s.stable}
        return float(next((v for v in loads if float(v) not in done), loads[-1]))


def _unstable_note(spec: PerfSpec, load: float, lines: tuple[str, ...]) -> str:
    """Why perf_analyzer could not measure ``load``, in tritonkit's terms: its console advises its
    own ``--measurement-interval``, which tritonkit's commands set from theirs."""
    said = next((line for line in lines if f" {load:g}" in line), "")
    trials = re.search(r"within (\d+) measurement windows", said)
    windows = f"{trials.group(1)} windows" if trials else (f"{spec.max_trials} windows" if spec.max_trials else "its windows")
    length = f" of {spec.measurement_interval_ms} ms" if spec.measurement_interval_ms else ""
    stability = spec.stability_percentage if spec.stability_percentage is not None else 10.0
    return (f"perf_analyzer could not call {_mode(spec).replace('_', ' ')} {load:g} stable: no three of "
            f"{windows}{length} agreed within {stability:g} %; measure longer or allow more windows "
            "(perf run: --duration-s, --max-trials; perf sweep: --window-ms)")


def _server_state(spec: PerfSpec) -> tuple[bool, bool | None]:
    """(the server answers, it serves the model ready) — asked after a step failed, to say why."""
    from tritonkit.perf.measure.target import check_target  # lazy: the client pulls in grpc

    for attempt in range(2):  # an overloaded server may miss one probe
        try:
            check_target(spec)
            return True, True
        except ModelNotReadyError:
            return True, False
        except ConnectError:
            if attempt == 0:
                time.sleep(1.0)
        except (TritonKitError, OSError):
            return True, None  # it answered something: not this question's business
    return False, None


def _mode(spec: PerfSpec) -> str:
    return "concurrency" if isinstance(spec.load, ConcurrencyRange) else "request_rate"


def _describe(name: str, steps: list[StepResult], duration_s: float) -> str:
    parts = []
    for step in steps:
        if step.error_count:
            parts.append(f"{step.load_mode} {step.load_value:g}: {step.error_count} failed request(s)")
        elif step.throughput_per_s is None or step.latency is None:
            parts.append(f"{step.load_mode} {step.load_value:g}: unstable, nothing measured")
        else:
            flag = "" if step.stable else " (unstable)"
            parts.append(
                f"{step.load_mode} {step.load_value:g}: {step.throughput_per_s:.1f} infer/s, "
                f"p99 {step.latency.p99_ms:.2f} ms{flag}"
            )
    return f"[{name}] {'; '.join(parts) or 'no steps'} ({duration_s:.1f} s)"
