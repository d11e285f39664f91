"""Merge what several perf_analyzer clients recorded of one step into one record (pure).

Each client writes perf_analyzer's ``--profile-export-file``: every request's send time and response
times (ns, on its own machine's clock) and its measurement windows. :func:`merge_exports` moves every
client's times onto the driver's clock (its measured offset removed), takes the **common window** —
the span every client was measuring at once (the latest start of their last three windows to the
earliest end) — and writes one export in perf_analyzer's own format: every client's requests, and
that window as three equal windows. The toolkit's readers then see one step of one generator:
:func:`~tritonkit.perf.measure.parse.parse_profile_export` counts the requests whose last response
falls in the window (percentiles exact over every request of every client — never an average of
per-client percentiles — and throughput over the common window), and the LLM metrics read every
request (:func:`~tritonkit.perf.llm.metrics.records_from_export`).

Example::

    merged = merge_exports([export_a, export_b], offsets_ns=[0, 1_250_000])
    merged.requests      # per client, its requests counted in the common window
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.errors import PerfError

__all__ = ["MEASURED_WINDOWS", "MergedStep", "merge_exports", "split_load"]

#: perf_analyzer reports (and the parser reads) the requests of the last three windows of a step.
MEASURED_WINDOWS = 3


@dataclass(frozen=True)
class MergedStep:
    """One step of several clients as one. ``export``: perf_analyzer's format, every client's requests
    on the driver's clock, ``window_boundaries`` the common window in three (empty when there is
    none). ``window_ns``: the common window; ``spans_ns``: each client's measured windows (driver's
    clock); ``requests``: per client, its requests whose last response fell in the common window;
    ``overlap``: the common window's length over the longest client's."""

    export: dict[str, Any]
    window_ns: tuple[int, int] | None
    spans_ns: tuple[tuple[int, int] | None, ...]
    requests: tuple[int, ...]
    overlap: float
    #: Per third of the common window: requests of every client whose last response fell in it, and
    #: their mean latency (ms; ``None`` for a third without one).
    window_counts: tuple[int, ...] = ()
    window_latency_ms: tuple[float | None, ...] = ()

    @property
    def window_s(self) -> float:
        return 0.0 if self.window_ns is None else (self.window_ns[1] - self.window_ns[0]) / 1e9

    def unstable_reason(self, percent: float) -> str | None:
        """Why the merged load was not steady over the three windows, or ``None`` when it was:
        perf_analyzer's own rule, applied to every client's requests together — each window's
        throughput and mean latency within ``percent`` of their means over the three."""
        if len(self.window_counts) != MEASURED_WINDOWS or None in self.window_latency_ms:
            return "the clients' common window holds no request in some third of it"
        for name, values in (("throughput", [float(c) for c in self.window_counts]),
                             ("mean latency", [float(v or 0.0) for v in self.window_latency_ms])):
            mean = sum(values) / len(values)
            worst = max(abs(v - mean) for v in values) / mean * 100 if mean > 0 else 0.0
            if worst > percent:
                return (f"{name} of all clients together varied {worst:.0f} % over the three windows "
                        f"(more than {percent:g} %)")
        return None


def _experiment(export: Mapping[str, Any], index: int) -> Mapping[str, Any]:
    experiments = export.get("experiments") if isinstance(export, Mapping) else None
    if not isinstance(experiments, list) or len(experiments) != 1 or not isinstance(experiments[0], Mapping):
        count = len(experiments) if isinstance(experiments, list) else "no"
        raise PerfError(f"client {index}'s profile export holds {count} experiments; one step each is merged")
    return experiments[0]


def _span(boundaries: Sequence[int]) -> tuple[int, int] | None:
    """The measured windows of a client's step: the last three (all there are, if fewer)."""
    if len(boundaries) < 2:
        return None
    return int(boundaries[max(0, len(boundaries) - 1 - MEASURED_WINDOWS)]), int(boundaries[-1])


def _shifted(request: Mapping[str, Any], offset_ns: int) -> dict[str, Any]:
    moved = dict(request)
    moved["timestamp"] = int(request["timestamp"]) - offset_ns
    moved["response_timestamps"] = [int(t) - offset_ns for t in request.get("response_timestamps") or []]
    return moved


def merge_exports(exports: Sequence[Mapping[str, Any]], offsets_ns: Sequence[int]) -> MergedStep:
    """One step's profile exports, one per client (each of one experiment), as one (see the module
    docstring). ``offsets_ns[i]``: client ``i``'s clock minus the driver's. The merged experiment's
    load is the sum of the clients' (their shares of one concurrency or rate)."""
    if not exports or len(exports) != len(offsets_ns):
        raise PerfError(f"{len(exports)} exports and {len(offsets_ns)} clock offsets: one each is needed")
    experiments = [_experiment(export, i) for i, export in enumerate(exports)]
    modes = {str(e.get("experiment", {}).get("mode")) for e in experiments}
    if len(modes) != 1:
        raise PerfError(f"the clients measured different kinds of load ({', '.join(sorted(modes))})")
    spans: list[tuple[int, int] | None] = []
    requests: list[dict[str, Any]] = []
    for experiment, offset in zip(experiments, offsets_ns, strict=True):
        span = _span([int(b) for b in experiment.get("window_boundaries") or []])
        spans.append(None if span is None else (span[0] - int(offset), span[1] - int(offset)))
        requests += [_shifted(r, int(offset)) for r in experiment.get("requests") or []]
    requests.sort(key=lambda r: r["timestamp"])
    known = [s for s in spans if s is not None]
    window: tuple[int, int] | None = None
    if known and len(known) == len(spans):
        lo, hi = max(s[0] for s in known), min(s[1] for s in known)
        window = (lo, hi) if hi > lo else None
    longest = max((s[1] - s[0] for s in known), default=0)
    overlap = (window[1] - window[0]) / longest if window is not None and longest > 0 else 0.0
    counts: list[int] = []
    for experiment, offset in zip(experiments, offsets_ns, strict=True):
        ends = [int(r["response_timestamps"][-1]) - int(offset) for r in experiment.get("requests") or []
                if r.get("response_timestamps")]
        counts.append(0 if window is None else sum(1 for end in ends if window[0] <= end <= window[1]))
    boundaries = [] if window is None else [window[0] + (window[1] - window[0]) * k // MEASURED_WINDOWS
                                            for k in range(MEASURED_WINDOWS + 1)]
    thirds: list[list[float]] = [[] for _ in range(MEASURED_WINDOWS)] if boundaries else []
    for request in requests:
        responses = request["response_timestamps"]
        if not thirds or not responses or not boundaries[0] <= responses[-1] <= boundaries[-1]:
            continue
        third = min(MEASURED_WINDOWS - 1, next(k for k in range(MEASURED_WINDOWS) if responses[-1] <= boundaries[k + 1]))
        thirds[third].append((responses[-1] - request["timestamp"]) / 1e6)
    first = experiments[0]["experiment"]
    value = float(sum(float(e["experiment"]["value"]) for e in experiments))
    merged_experiment = {"experiment": {"mode": first["mode"], "value": int(value) if value.is_integer() else value},
                         "requests": requests, "window_boundaries": boundaries}
    export = {key: exports[0][key] for key in exports[0] if key != "experiments"}
    export["experiments"] = [merged_experiment]
    export["tritonkit_merged"] = {"clients": len(exports), "offsets_ns": [int(o) for o in offsets_ns],
                                  "spans_ns": [list(s) if s else None for s in spans]}
    return MergedStep(export=export, window_ns=window, spans_ns=tuple(spans), requests=tuple(counts),
                      overlap=overlap, window_counts=tuple(len(t) for t in thirds),
                      window_latency_ms=tuple(sum(t) / len(t) if t else None for t in thirds))


def split_load(total: float, clients: int, *, whole: bool) -> list[float]:
    """Each client's share of ``total`` load: a concurrency (``whole``) split as evenly as whole
    numbers allow (the first clients take one more; a client may get none), a rate split evenly."""
    if clients < 1:
        raise ValueError("at least one client")
    if not whole:
        return [total / clients] * clients
    base, extra = divmod(int(total), clients)
    return [float(base + (1 if i < extra else 0)) for i in range(clients)]
