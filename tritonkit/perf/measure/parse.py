"""Read what perf_analyzer writes: the ``-f`` CSV, the ``--profile-export-file`` JSON, its console.

Facts about the files these parsers rely on (checked against perf_analyzer 2.60, see
``tests/data/perf/``):

* CSV columns are addressed by **name**; their order and the extra ``--verbose-csv`` columns
  vary. The first column names the load mode (``Concurrency`` or ``Request Rate``). Rows come
  **sorted by throughput, not by load**; ``parse_csv`` re-sorts them by load. All times are µs.
* The profile export holds, per experiment (load step), every request of the last trial with
  nanosecond ``timestamp`` and ``response_timestamps`` and the ``window_boundaries`` of that
  trial's measurement windows. perf_analyzer's own statistics use the requests whose last
  response falls inside the last three windows (the ones its stability check accepted); the
  export parser selects exactly those, so the two agree (see ``cross_check``).
* A sweep that meets an unstable step stops there; with earlier steps measured it still exits 0
  and says so only on stderr ("Failed to obtain stable measurement within N measurement windows
  for concurrency C"). A failed request aborts the run (exit 99, "Thread [i] had error: ...").
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritonkit._values import INT64_MAX, excerpt
from tritonkit.errors import PerfError
from tritonkit.perf.measure.percentiles import latency_stats
from tritonkit.perf.measure.result import (
    ClientBreakdown,
    LatencyStats,
    ServerBreakdown,
    StepResult,
    WindowFigures,
)
from tritonkit.perf.measure.windows import intervals_of, window_figures

__all__ = [
    "ConsoleSummary",
    "CsvRow",
    "ExportExperiment",
    "build_steps",
    "cross_check",
    "export_requests",
    "parse_console",
    "parse_csv",
    "parse_profile_export",
    "read_export",
]

#: perf_analyzer's stability check looks at the most recent three windows; those are reported.
MEASURED_WINDOWS = 3

_LOAD_COLUMNS = {"Concurrency": "concurrency", "Request Rate": "request_rate"}
_REQUIRED_COLUMNS = ("Inferences/Second", "p50 latency", "p90 latency", "p95 latency", "p99 latency")
# CSV column (µs) -> field of the record that holds it: LatencyStats in ms, the breakdowns in µs.
_LATENCY_COLUMNS = {
    "p50 latency": "p50_ms", "p90 latency": "p90_ms", "p95 latency": "p95_ms", "p99 latency": "p99_ms",
    "Avg latency": "mean_ms",
}
_SERVER_COLUMNS = {
    "Server Queue": "queue_us", "Server Compute Input": "compute_input_us",
    "Server Compute Infer": "compute_infer_us", "Server Compute Output": "compute_output_us",
}
_CLIENT_COLUMNS = {"Client Send": "send_us", "Network+Server Send/Recv": "network_server_us", "Client Recv": "recv_us"}


@dataclass(frozen=True)
class CsvRow:
    """One row of perf_analyzer's ``-f`` CSV (one load step), in the records a step keeps.

    ``latency`` holds perf_analyzer's own percentiles (and mean, from ``--verbose-csv``), converted
    from the CSV's µs to ms (``source="csv"``); ``server`` and ``client`` its time breakdown, in µs.
    """

    load_mode: str
    load_value: float
    throughput_per_s: float
    latency: LatencyStats
    server: ServerBreakdown = field(default_factory=ServerBreakdown)
    client: ClientBreakdown = field(default_factory=ClientBreakdown)
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportExperiment:
    """One experiment (load step) of the profile export, reduced to what tritonkit uses.

    ``latencies_ms`` are the requests perf_analyzer counted (last response inside the last
    three windows), first request sent to last response received, in milliseconds.
    ``window_latencies_ms`` holds the same per window, for every window of the export (the
    earlier ones perf_analyzer measured before three agreed included), in window order.
    """

    load_mode: str
    load_value: float
    latencies_ms: np.ndarray
    window_boundaries_ns: tuple[int, ...]
    total_requests: int
    window_latencies_ms: tuple[np.ndarray, ...] = ()

    @property
    def window_counts(self) -> tuple[int, ...]:
        """Requests whose last response fell in each counted (last three) window, in window order."""
        counted = self.window_latencies_ms[max(0, len(self.window_latencies_ms) - MEASURED_WINDOWS):]
        return tuple(int(w.size) for w in counted)

    def windows(self, batch_size: int = 1) -> list[WindowFigures]:
        """Every window's figures; the last three are the counted ones (see :class:`WindowFigures`)."""
        return window_figures(self.window_latencies_ms, self.window_boundaries_ns, batch_size=batch_size,
                              counted_from=max(0, len(self.window_latencies_ms) - MEASURED_WINDOWS))

    @property
    def measured_duration_s(self) -> float:
        """Length of the windows the counted requests fall in."""
        lo = self.window_boundaries_ns[max(0, len(self.window_boundaries_ns) - 1 - MEASURED_WINDOWS)]
        return (self.window_boundaries_ns[-1] - lo) / 1e9

    @property
    def request_count(self) -> int:
        return int(self.latencies_ms.size)


@dataclass(frozen=True)
class ConsoleSummary:
    """What only the console says: unstable steps, failed requests, option errors, version."""

    unstable_loads: tuple[float, ...] = ()
    unstable_lines: tuple[str, ...] = ()
    request_error_lines: tuple[str, ...] = ()
    option_error: str | None = None
    error_lines: tuple[str, ...] = ()
    measured_loads: tuple[float, ...] = ()


def _read_text(source: str | Path) -> tuple[str, str]:
    """(text, where) of the file at ``source``."""
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except OSError as exc:
        raise PerfError(f"cannot read perf_analyzer output {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PerfError(f"perf_analyzer output {path} is not UTF-8 text (byte {exc.start})") from exc


def read_export(source: str | os.PathLike[str]) -> Any:
    """A perf_analyzer profile export file, parsed (``PerfError`` naming it when it cannot be read)."""
    text, where = _read_text(Path(source))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PerfError(f"perf_analyzer profile export {where} is not valid JSON: {exc.msg}") from exc
    except RecursionError:
        raise PerfError(f"perf_analyzer profile export {where} nests too deeply to read") from None
    except ValueError as exc:  # a whole number of more digits than Python converts
        raise PerfError(f"perf_analyzer profile export {where} holds a number too long to read: {exc}") from None


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _columns(raw: dict[str, str | None], columns: dict[str, str], divisor: float = 1.0) -> dict[str, Any]:
    """``columns``' values of one CSV row over ``divisor`` (a unit change), by the field each goes to
    (``None`` where empty or absent)."""
    return {attr: None if (num := _number(raw.get(col))) is None else num / divisor for col, attr in columns.items()}


def parse_csv(source: str | Path) -> list[CsvRow]:
    """Parse a perf_analyzer ``-f`` CSV by column name; rows are returned sorted by load."""
    text, where = _read_text(source)
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    if not header:
        raise PerfError(f"perf_analyzer CSV {where} is empty")
    load_column = next((c for c in header if c in _LOAD_COLUMNS), None)
    if load_column is None:
        raise PerfError(
            f"perf_analyzer CSV {where} has no load column (expected one of {sorted(_LOAD_COLUMNS)}); "
            f"header: {', '.join(header)}"
        )
    missing = [c for c in _REQUIRED_COLUMNS if c not in header]
    if missing:
        raise PerfError(f"perf_analyzer CSV {where} lacks column(s) {', '.join(missing)}")
    known = {load_column, *_REQUIRED_COLUMNS, *_LATENCY_COLUMNS, *_SERVER_COLUMNS, *_CLIENT_COLUMNS}
    rows: list[CsvRow] = []
    for line_no, raw in enumerate(reader, start=2):
        load = _number(raw.get(load_column))
        throughput = _number(raw.get("Inferences/Second"))
        if load is None or throughput is None or any(_number(raw.get(c)) is None for c in _REQUIRED_COLUMNS):
            raise PerfError(f"perf_analyzer CSV {where} line {line_no}: non-numeric value in {raw}")
        extra = {
            col: num for col in header if col not in known and (num := _number(raw.get(col))) is not None
        }
        rows.append(
            CsvRow(
                load_mode=_LOAD_COLUMNS[load_column],
                load_value=load,
                throughput_per_s=throughput,
                latency=LatencyStats(**_columns(raw, _LATENCY_COLUMNS, 1000.0), source="csv"),
                server=ServerBreakdown(**_columns(raw, _SERVER_COLUMNS)),
                client=ClientBreakdown(**_columns(raw, _CLIENT_COLUMNS)),
                extra=extra,
            )
        )
    # WAR: perf_analyzer sorts rows by throughput; the ladder's order is the load's.
    return sorted(rows, key=lambda r: r.load_value)


def _experiment_mode(raw: Any) -> str:
    mode = str(raw)
    return {"concurrency": "concurrency", "request_rate": "request_rate"}.get(mode, mode)


EXPORT_HINT = "was it written by perf_analyzer --profile-export-file?"


def _stamp(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:  # an int64 of nanoseconds, as written
        raise PerfError(f"{where} is {excerpt(value)}, not a time in nanoseconds", hint=EXPORT_HINT)
    return value


def export_requests(data: Any, where: str) -> Iterator[tuple[Mapping[str, Any], int, tuple[int, ...], list[Mapping[str, Any]], str]]:
    """Each request of a parsed profile export, checked: (the request, its send time, its responses'
    times, its outputs, where it stands); ``PerfError`` naming the file and the request otherwise."""
    experiments = data.get("experiments") if isinstance(data, Mapping) else None
    if not isinstance(experiments, list):
        raise PerfError(f"{where} has no 'experiments' list", hint=EXPORT_HINT)
    for index, experiment in enumerate(experiments):
        requests = (experiment.get("requests") or []) if isinstance(experiment, Mapping) else None
        if not isinstance(requests, list):
            raise PerfError(f"{where}: experiment {index} has no 'requests' list", hint=EXPORT_HINT)
        for number, request in enumerate(requests):
            at = f"{where}: experiment {index} request {number}"
            if not isinstance(request, Mapping):
                raise PerfError(f"{at} is {type(request).__name__}, not an object", hint=EXPORT_HINT)
            times = request.get("response_timestamps") or []
            outputs = request.get("response_outputs") or []
            if not isinstance(times, list) or not isinstance(outputs, list) or \
                    not all(isinstance(o, Mapping) for o in outputs):
                raise PerfError(f"{at}: 'response_timestamps' and 'response_outputs' must be lists (of objects)",
                                hint=EXPORT_HINT)
            sent = _stamp(request.get("timestamp"), f"{at}: 'timestamp'")
            yield request, sent, tuple(_stamp(t, f"{at}: 'response_timestamps'") for t in times), outputs, at


def parse_profile_export(source: str | Path) -> list[ExportExperiment]:
    """Parse a ``--profile-export-file`` JSON into per-step request latencies (ms), sorted by load."""
    data, where = read_export(source), str(source)
    experiments = data.get("experiments") if isinstance(data, dict) else None
    if not isinstance(experiments, list):
        raise PerfError(f"perf_analyzer profile export {where} has no 'experiments' list")
    result: list[ExportExperiment] = []
    for index, exp in enumerate(experiments):
        try:
            info = exp["experiment"]
            boundaries = tuple(int(b) for b in exp.get("window_boundaries") or [])
            requests = exp.get("requests") or []
            lo = boundaries[max(0, len(boundaries) - 1 - MEASURED_WINDOWS)] if boundaries else None
            hi = boundaries[-1] if boundaries else None
            latencies_ns = []
            ends_ns = []
            for req in requests:
                responses = req.get("response_timestamps") or []
                if not responses:
                    continue  # never answered: not a latency (failed requests abort the run)
                ends_ns.append(int(responses[-1]))
                latencies_ns.append(int(responses[-1]) - int(req["timestamp"]))
            ends = np.asarray(ends_ns, dtype=np.int64)
            latencies = np.asarray(latencies_ns, dtype=np.float64) / 1e6
            # Each window holds the requests whose last response fell inside it (perf_analyzer's
            # rule, both ends inclusive); the counted ones are the last three.
            per_window = tuple(latencies[(ends >= a) & (ends <= b)]
                               for a, b in zip(boundaries, boundaries[1:], strict=False))
            counted = ((ends >= lo) & (ends <= hi)) if lo is not None and hi is not None else np.ones(ends.size, bool)
            result.append(
                ExportExperiment(
                    load_mode=_experiment_mode(info["mode"]),
                    load_value=float(info["value"]),
                    latencies_ms=latencies[counted],
                    window_boundaries_ns=boundaries,
                    total_requests=len(requests),
                    window_latencies_ms=per_window,
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise PerfError(
                f"perf_analyzer profile export {where}: experiment {index} is malformed ({excerpt(repr(exc), 200)})"
            ) from exc
    return sorted(result, key=lambda e: e.load_value)


_UNSTABLE_RE = re.compile(
    r"Failed to obtain stable measurement within \d+ measurement windows for "
    r"(?P<mode>concurrency|request rate) (?P<value>[0-9]+(?:\.[0-9]+)?)[^\n]*"
)
_REQUEST_ERROR_RE = re.compile(r"^Thread \[\d+\] had error: .*$", re.MULTILINE)
_MEASURED_RE = re.compile(
    r"^(?:Concurrency|Request Rate): (?P<value>[0-9]+(?:\.[0-9]+)?), throughput: ", re.MULTILINE
)


def parse_console(stdout: str, stderr: str) -> ConsoleSummary:
    """Pick out of perf_analyzer's console what its files do not record."""
    both = f"{stdout}\n{stderr}"
    unstable = [m for m in _UNSTABLE_RE.finditer(both)]
    error_lines = tuple(
        line.strip() for line in both.splitlines() if line.strip().lower().startswith("error")
    )
    option_error = None
    # Option errors print the usage synopsis (or just one "Error: ..." line) and measure nothing.
    if not stdout.strip() and error_lines and error_lines[-1].startswith("Error:"):
        option_error = error_lines[-1].removeprefix("Error:").strip()
    return ConsoleSummary(
        unstable_loads=tuple(float(m.group("value")) for m in unstable),
        unstable_lines=tuple(m.group(0).strip() for m in unstable),
        request_error_lines=tuple(m.group(0).strip() for m in _REQUEST_ERROR_RE.finditer(both)),
        option_error=option_error,
        error_lines=error_lines,
        measured_loads=tuple(float(m.group("value")) for m in _MEASURED_RE.finditer(stdout)),
    )


def cross_check(csv_stats: LatencyStats, export_stats: LatencyStats, *, rel_tol: float = 0.10,
                abs_tol_ms: float = 0.2) -> list[str]:
    """Warnings where tritonkit's percentiles and perf_analyzer's disagree beyond tolerance.

    Both come from the same requests, so they should agree to within interpolation method
    differences; a larger gap means the two files do not describe the same measurement.
    """
    warnings = []
    for name in ("p50_ms", "p90_ms", "p95_ms", "p99_ms"):
        ours = float(getattr(export_stats, name))
        theirs = float(getattr(csv_stats, name))
        if abs(ours - theirs) > max(rel_tol * abs(theirs), abs_tol_ms):
            warnings.append(
                f"{name[:-3]} from the per-request export ({ours:.3f} ms) differs from perf_analyzer's "
                f"CSV ({theirs:.3f} ms) by more than {rel_tol:.0%}"
            )
    return warnings


def build_steps(
    csv_rows: Iterable[CsvRow],
    experiments: Iterable[ExportExperiment] = (),
    *,
    batch_size: int = 1,
) -> list[StepResult]:
    """Merge CSV rows and export experiments into ``StepResult``s, in load order.

    Latency percentiles come from the per-request export when present (computed by
    ``tritonkit.perf.measure.percentiles``), perf_analyzer's own numbers are kept in ``latency_csv``,
    and any disagreement is a step warning. Throughput is perf_analyzer's (inferences/s,
    i.e. requests × batch size). Export experiments without a CSV row (a step that stopped the
    sweep as unstable) become unstable steps with the export's numbers.
    """
    by_load = {(e.load_mode, e.load_value): e for e in experiments}
    steps: list[StepResult] = []
    for row in csv_rows:
        exp = by_load.pop((row.load_mode, row.load_value), None)
        csv_stats = row.latency
        latency = csv_stats
        warnings: list[str] = []
        request_count = 0
        windows: list[WindowFigures] = []
        latencies = None
        if exp is not None and exp.request_count > 0:
            latency = latency_stats(exp.latencies_ms)
            request_count = exp.request_count
            warnings = cross_check(csv_stats, latency)
            windows = exp.windows(batch_size)
            latencies = exp.latencies_ms
        steps.append(with_windows(StepResult(
            load_mode=row.load_mode,
            load_value=row.load_value,
            throughput_per_s=row.throughput_per_s,
            latency=latency,
            latency_csv=csv_stats,
            server=row.server,
            client=row.client,
            request_count=request_count,
            warnings=warnings,
        ), windows, latencies))
    for exp in by_load.values():
        counted = exp.request_count > 0 and exp.measured_duration_s > 0
        steps.append(with_windows(StepResult(
            load_mode=exp.load_mode,
            load_value=exp.load_value,
            throughput_per_s=(exp.request_count * batch_size / exp.measured_duration_s) if counted else None,
            latency=latency_stats(exp.latencies_ms) if counted else None,
            request_count=exp.request_count,
            stable=False,
            unstable_note="perf_analyzer wrote no summary for this step (unstable measurement); "
            "numbers are from its last, unaccepted windows",
        ), exp.windows(batch_size) if counted else []))
    return sorted(steps, key=lambda s: s.load_value)


def with_windows(step: StepResult, windows: list[WindowFigures], latencies_ms: np.ndarray | None = None) -> StepResult:
    """``step`` with its windows and the within-run interval of each figure (see
    :func:`~tritonkit.perf.measure.windows.intervals_of`)."""
    step.windows = windows
    step.intervals = intervals_of(windows, latencies_ms)
    step.interval_basis = "windows" if step.intervals else None
    band = step.intervals.get("throughput")
    step.throughput_interval_per_s = list(band) if band else None
    return step
