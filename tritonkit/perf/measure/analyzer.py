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
* exit 3 or a rejected option: ``PerfError`` with perf_analyzer's own complaint;
* anything else: ``PerfError`` with the return code and the stderr tail.

Raw files (``<name>.csv``, ``.json``, ``.stdout``, ``.stderr``, ``.argv.json``) are written as the
run goes, so nothing measured is lost even when this process dies.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tritonkit._fs import atomic_write
from tritonkit.errors import PerfError, PerfTimeoutError
from tritonkit.perf.measure.metrics import (
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
from tritonkit.perf.measure.result import StepResult
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, to_argv
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall, locate_perf_analyzer
from tritonkit.server.children import spawn, stop_group

__all__ = [
    "EXIT_OK",
    "EXIT_OPTION_ERROR",
    "EXIT_UNSTABLE",
    "PerfAnalyzer",
    "AnalyzerOutcome",
    "output_files",
    "utc_now",
]

#: perf_analyzer's exit codes.
EXIT_OK = 0
EXIT_UNSTABLE = 2
EXIT_OPTION_ERROR = 3

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

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    def command(self, spec: PerfSpec) -> list[str]:
        """The full argv (binary prefix + options) that ``run`` would start."""
        return [*self.perf_analyzer.argv, *to_argv(spec)]

    def run(self, spec: PerfSpec, name: str, *, timeout_s: float | None = None, model_for_metrics: str | None = None) -> AnalyzerOutcome:
        """Run ``spec`` once, writing ``<name>.*`` into the results folder.

        ``timeout_s`` bounds the whole invocation (the group is killed and ``PerfError`` raised,
        the files written so far stay). The CSV / export paths in ``spec`` are replaced by the
        folder's own.
        """
        self.results_dir.mkdir(parents=True, exist_ok=True)
        csv_path, export_path = output_files(self.results_dir, name)
        stdout_path = self.results_dir / f"{name}.stdout"
        stderr_path = self.results_dir / f"{name}.stderr"
        for stale in (csv_path, export_path):
            stale.unlink(missing_ok=True)  # a previous attempt's file must not pass for this one's
        spec = spec.with_files(csv_path, export_path)
        argv = self.command(spec)
        atomic_write(self.results_dir / f"{name}.argv.json", json.dumps(argv, indent=1) + "\n")
        started_utc = utc_now()
        start = time.monotonic()
        deadline = None if timeout_s is None else start + timeout_s
        watcher = MetricsWatcher(self.metrics_url, interval_s=self.metrics_interval_s) if self.metrics_url else None
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            if watcher is not None:
                watcher.start()
            try:
                # Its own session (the group is stopped as one), and dead with us however we die:
                # a SIGKILL of this process must not leave load running against the server.
                proc = spawn(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
            except OSError as exc:
                if watcher is not None:
                    watcher.stop()
                raise PerfError(
                    f"cannot start perf_analyzer ({argv[0]}): {exc.strerror}",
                    hint="run 'tritonkit perf install --force' or pass --perf-analyzer PATH",
                ) from exc
            cpu = ProcessCpu(proc.pid)
            cpu.begin()
            try:
                returncode = self._wait(proc, cpu, deadline, timeout_s, name, stderr_path)
            finally:
                stop_group(proc, _KILL_GRACE_S)  # no-op when it ended by itself; always on exception / Ctrl-C
                if watcher is not None:
                    watcher.stop()
        duration_s = time.monotonic() - start
        raw = [p.name for p in (csv_path, export_path, stdout_path, stderr_path) if p.exists()]
        raw.append(f"{name}.argv.json")
        stdout = stdout_path.read_text(encoding="utf-8", errors="replace")
        stderr = stderr_path.read_text(encoding="utf-8", errors="replace")
        console = parse_console(stdout, stderr)
        if returncode == EXIT_OPTION_ERROR or (returncode != EXIT_OK and console.option_error):
            raise PerfError(
                f"perf_analyzer rejected its options: {console.option_error or _tail(stderr_path, 3)}",
                returncode=returncode,
                stderr_tail=_tail(stderr_path),
                hint=f"check the perf options; the command is in {self.results_dir / (name + '.argv.json')}",
            )
        steps = self._steps(csv_path, export_path, spec)
        cpu_pct = cpu.cpu_pct
        metrics = step_metrics(watcher.snapshots, model_for_metrics or spec.model) if watcher else None
        warnings: list[str] = []
        if watcher is not None and watcher.errors:
            warnings.append(f"could not scrape {self.metrics_url}: {watcher.errors[-1]}")
        cpu_warning = generator_cpu_warning(cpu_pct, self.cores)
        if cpu_warning:
            warnings.append(cpu_warning)
        loads = spec.load.values()
        if console.request_error_lines:
            failed_load = self._failed_load(loads, steps)
            # One "had error" line per worker thread that failed. The server's failure counter is
            # only a lower bound too: tritonserver 2.51 counts a python-backend error response as
            # a success (seen here), so take the larger of the two.
            failures = int(metrics.failure_count) if metrics and metrics.failure_count else 0
            steps.append(
                StepResult(
                    load_mode=_mode(spec), load_value=float(failed_load), throughput_per_s=None, latency=None,
                    error_count=max(len(console.request_error_lines), failures),
                    error_note="; ".join(console.request_error_lines),
                )
            )
        elif returncode not in (EXIT_OK, EXIT_UNSTABLE):
            raise PerfError(
                f"perf_analyzer exited with status {returncode}: "
                f"{(console.error_lines[-1] if console.error_lines else _tail(stderr_path, 3)) or 'no message'}",
                returncode=returncode,
                stderr_tail=_tail(stderr_path),
                hint=f"see {stdout_path} and {stderr_path}; the command is in {name}.argv.json",
            )
        unstable = list(console.unstable_loads)
        if returncode == EXIT_UNSTABLE and not unstable:
            unstable = [self._failed_load(loads, steps)]
        for load in unstable:
            note = next((line for line in console.unstable_lines if f" {load:g}" in line), None) or (
                "perf_analyzer could not obtain a stable measurement"
            )
            existing = next((s for s in steps if s.load_value == load), None)
            if existing is None:
                steps.append(
                    StepResult(load_mode=_mode(spec), load_value=float(load), throughput_per_s=None, latency=None,
                               stable=False, unstable_note=note)
                )
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
        self._say(_describe(name, steps, duration_s))
        return AnalyzerOutcome(
            name=name, argv=argv, returncode=returncode, duration_s=duration_s, started_utc=started_utc,
            steps=steps, console=console, unstable_loads=[float(u) for u in unstable],
            generator_cpu_pct=cpu_pct, raw_files=raw, warnings=warnings,
        )

    def _wait(
        self,
        proc: subprocess.Popen[bytes],
        cpu: ProcessCpu,
        deadline: float | None,
        timeout_s: float | None,
        name: str,
        stderr_path: Path,
    ) -> int:
        """Wait for ``proc`` (sampling its CPU) until it exits or ``deadline`` passes."""
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
            if deadline is not None and now >= deadline:
                stop_group(proc, _KILL_GRACE_S)
                raise PerfTimeoutError(
                    f"perf_analyzer run '{name}' did not finish within {timeout_s:g} s and was stopped",
                    returncode=proc.returncode,
                    stderr_tail=_tail(stderr_path),
                    hint="raise the timeout, shorten the measurement interval, or lower max trials",
                )
            time.sleep(_POLL_S)

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
