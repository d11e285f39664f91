"""The LLM load test's report: metric definitions, per-step table, failures, recovery, time line.

``render_llm_markdown(result, verdict)`` is pure text; ``render_timeline_png(step)`` draws one
step's requests (TTFT and latency by send time) above the server's pending requests, the
client's in-flight requests and the server's queue time, on one time line (matplotlib's Agg
canvas, never ``pyplot``). ``write_llm_report`` writes ``llm_report.md`` and one PNG per step.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonkit._fs import atomic_write
from tritonkit.perf.llm.metrics import Distribution
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.metric_registry import METRICS, PER_REQUEST_TIMES, PERCENTILES
from tritonkit.perf.report._tables import REPORT_MARKER
from tritonkit.perf.report.plots import new_figure, png_bytes

if TYPE_CHECKING:
    from tritonkit.perf.judge.verdict import Verdict

__all__ = ["METRIC_DEFINITIONS", "render_llm_html", "render_llm_markdown", "render_percentiles_png", "render_timeline_png",
           "write_llm_report"]

#: What each reported metric means (GenAI-Perf's definitions), printed in every report; the
#: SLA metrics' definitions are the registry's (``tritonkit.perf.metric_registry``).
METRIC_DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("TTFT", "time to first token: " + PER_REQUEST_TIMES["ttft"][2]),
    ("ITL", "inter-token latency: " + PER_REQUEST_TIMES["itl"][2]),
    ("request latency", "last response (the end of the stream) − request sent"),
    ("output tokens/s", METRICS["tokens_per_s"].definition),
    ("requests/s", "answered requests / the same span"),
    ("per-user tokens/s", METRICS["user_tokens_per_s"].definition),
    ("ISL / OSL", "input / output sequence length in tokens (output counted from the responses' token ids)"),
    ("goodput", METRICS["goodput"].definition),
    ("recovery", "after the load (a spike's burst, or the whole shape) ends: time until the server's pending "
                 "requests and queue time are back at their level before the load"),
    ("client deadline", "a request slower than the client's deadline counts as a client time-out"),
    ("server TTFT", "the model's own time to first token, where it reports per-request timings (TensorRT-LLM's "
                    "LLM-API model with sampling_param_return_perf_metrics): first_token_time_ns − arrival_time_ns; "
                    "client − server TTFT of a request is what lies outside the engine (network, Triton's queue, "
                    "the python model's hand-over)"),
)


def _f(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pair(dist: Distribution | None) -> str:
    return "–" if dist is None else f"{dist.p50:.1f} / {dist.p99:.1f}"


def _label(step: LLMStep) -> str:
    return f"c{step.load_value:g}" if step.load_mode == "concurrency" else f"{step.load_mode} ({step.load_value:g} req)"


Block = tuple[str, Any]  # ("p", text) | ("li", text) | ("table", (header, rows)) | ("img", label); **bold** in text


def _facts(result: LLMResult, verdict: Verdict | None) -> list[str]:
    lines = [f"server: `{result.url}`, streaming: {'on' if result.streaming else 'off'}, request layout: {result.layout}",
             f"prompts: {result.prompt_source}; started {result.started_utc}, finished {result.finished_utc}"]
    if result.client_deadline_ms is not None:
        lines.append(f"client deadline: {result.client_deadline_ms:g} ms")
    if result.repeats > 1:
        lines.append(f"{result.repeats} runs combined (each run's files and result in run-<i>/): each figure is "
                     "the median over the runs")
    return lines + [f"note: {n}" for n in result.notes]


def _results_table(result: LLMResult) -> tuple[list[str], list[list[str]]]:
    """The results table both reports print: one row per step."""
    header = ["load", "requests", "TTFT p50 / p99 ms", "ITL p50 / p99 ms", "latency p50 / p99 ms", "output tok/s",
              "req/s", "per-user tok/s p50", "ISL / OSL mean", "goodput /s", "failures"]
    rows = []
    for step in result.steps:
        m = step.metrics
        failures = "none" if not step.failures.total else f"{step.failures.hit} ×{step.failures.total}"
        if step.failure is not None:
            failures += f"; step failed ({step.failure})"
        if m is None:
            rows.append([_label(step), "0", *(["–"] * 8), failures])
            continue
        goodput = "–" if m.goodput_per_s is None else f"{m.goodput_per_s:.2f} ({m.good_count}/{m.answered_count})"
        lens = f"{_f(m.input_tokens.mean if m.input_tokens else None)} / {_f(m.output_tokens.mean if m.output_tokens else None)}"
        rows.append([_label(step), str(m.answered_count), _pair(m.ttft_ms), _pair(m.itl_ms), _pair(m.latency_ms),
                     _f(m.output_token_throughput_per_s), _f(m.request_throughput_per_s, 2),
                     _f(m.per_user_tokens_per_s.p50 if m.per_user_tokens_per_s else None), lens, goodput, failures])
    return header, rows


def _intervals_table(result: LLMResult) -> tuple[list[str], list[list[str]]] | None:
    """The 95 % bootstrap interval of each headline figure, per step (``None``: none known)."""
    names = ("ttft_p99", "itl_p99", "tokens_per_s", "goodput")
    rows = []
    for step in result.steps:
        found = step.metrics.sla_intervals() if step.metrics is not None else {}
        if found:
            rows.append([_label(step), *(f"{found[n][0]:.4g} – {found[n][1]:.4g}" if n in found else "–" for n in names)])
    return (["load", *names], rows) if rows else None


def _engine_table(result: LLMResult) -> tuple[list[str], list[list[str]]] | None:
    """The engine's own figures per step beside the client's (the difference: HTTP, tokenising, the
    network, the client), where the server serves them, else ``None``."""
    from tritonkit.perf.llm.engine_metrics import mean_ms

    def side(client: Distribution | None, engine: float | None, digits: int) -> str:
        mine = client.mean if client is not None else None
        gap = f" ({mine - engine:+.{digits}f})" if mine is not None and engine is not None else ""
        return f"{_f(mine, digits)} / {_f(engine, digits)}{gap}"

    rows = []
    for step in result.steps:
        e, m = step.engine, step.metrics
        if e:
            hit = e.get("prefix_cache_hit_rate")
            rows.append([_label(step), side(m.ttft_ms if m else None, mean_ms(e, "ttft_ms"), 1),
                         side(m.itl_ms if m else None, mean_ms(e, "itl_ms"), 2), _f(mean_ms(e, "queue_ms"), 2),
                         f"{_f(mean_ms(e, 'prefill_ms'))} / {_f(mean_ms(e, 'decode_ms'))}",
                         f"{_f(e.get('running_max'), 0)} / {_f(e.get('waiting_max'), 0)}",
                         _f(None if e.get("kv_cache_usage_max") is None else 100 * e["kv_cache_usage_max"]),
                         _f(e.get("preemptions"), 0), _f(None if hit is None else 100 * hit)])
    header = ["load", "TTFT mean ms client / engine (diff)", "ITL mean ms client / engine (diff)", "queue mean ms",
              "prefill / decode mean ms", "running / waiting peak", "KV cache peak %", "preemptions",
              "prefix cache hit %"]
    return (header, rows) if rows else None


def _queueing_line(result: LLMResult) -> str:
    from tritonkit.perf.llm.engine_metrics import queueing_starts

    levels = [(s.load_value, s.engine) for s in result.steps if s.load_mode == "concurrency" and s.engine]
    start = queueing_starts(levels)
    if start is None:
        return "**The engine did not queue** at any measured concurrency (its mean queue time stayed within two token steps)."
    return (f"**The engine starts queueing at concurrency {start:g}**: from there its mean queue time passes two "
            "of its token steps (requests wait for a slot; TTFT grows with the queue).")


def render_llm_markdown(result: LLMResult, verdict: Verdict | None = None, *, plots: dict[str, str] | None = None) -> str:
    """The report as Markdown; ``plots`` maps a step label to its PNG's file name."""
    lines = [f"# LLM load test: {result.model}", ""] + [f"- {fact}" for fact in _facts(result, verdict)]
    if verdict is not None:
        lines += ["", f"**Verdict: {verdict.status.upper()}** — {verdict.summary()}"]
    lines += ["", "## Results", ""] + _markdown_table(*_results_table(result), text_last=True)
    intervals = _intervals_table(result)
    if intervals is not None:
        basis = (f"over the {result.repeats} runs (the spread from run to run)" if result.repeats > 1
                 else "bootstrap (resampling each step's requests)")
        lines += ["", f"95% intervals, {basis}:", ""] + _markdown_table(*intervals)
    engine = _engine_table(result)
    if engine is not None:
        source = next(s.engine.get("source") for s in result.steps if s.engine)
        lines += ["", f"The engine's own figures (its /metrics over each step; {source}):", ""]
        lines += _markdown_table(*engine)
        lines += ["", _queueing_line(result)]
    slos = {m.goodput_slo.describe() for s in result.steps if (m := s.metrics) and m.goodput_slo}
    if slos:
        lines += ["", f"Goodput objectives (per request): {'; '.join(sorted(slos))}."]
    for step in result.steps:
        lines += ["", f"## {_label(step)}", ""]
        for kind, value in _step_blocks(step):
            if kind == "table":
                lines += ["", *_markdown_table(*value)]
            elif kind == "img":
                plot = (plots or {}).get(_label(step))
                lines += ["", f"![time line]({plot})"] if plot else []
            else:
                lines.append(f"- {value}" if kind == "li" else f"\n{value}" if lines[-1] else value)
    lines += ["", "## Definitions", ""]
    lines += [f"- **{name}**: {text}" for name, text in METRIC_DEFINITIONS]
    return "\n".join(lines) + "\n"


def _markdown_table(header: list[str], rows: list[list[str]], *, text_last: bool = False) -> list[str]:
    """A Markdown table: the first column (and the last, ``text_last``) left-aligned, numbers right."""
    align = ["---"] + ["---:"] * (len(header) - 1)
    if text_last and len(header) > 1:
        align[-1] = "---"
    return ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |",
            *("| " + " | ".join(row) + " |" for row in rows)]


def _step_blocks(step: LLMStep) -> list[Block]:
    """What each report says about one step, as blocks both renderers lay out."""
    out: list[Block] = [("p", f"perf_analyzer ran {step.wall_s:.1f} s, using {_f(step.generator_cpu_pct)} % of one core.")]
    if step.metrics is not None:
        out += [("li", note) for note in step.metrics.notes]
        if step.output_tokens_asked:
            out.append(("p", f"Output tokens produced / asked: {step.metrics.output_tokens_total} / "
                             f"{step.output_tokens_asked} ({100 * step.metrics.output_tokens_total / step.output_tokens_asked:.0f} %)."))
    if step.failure is not None:
        out.append(("p", f"**The step failed ({step.failure})**: {step.failure_note or 'no message'}"))
    if step.failures.total:
        counts = ", ".join(f"{k} {v}" for k, v in step.failures.counts.items() if v)
        out.append(("p", f"**Failures: {counts}** — this run hit **{step.failures.hit}**."))
        out += [("li", e) for e in step.failures.evidence]
    if step.recovery is not None:
        r = step.recovery
        value = f"**{r.recovery_s:.2f} s**" if r.recovery_s is not None else f"**not recovered** ({r.note})"
        out.append(("p", f"Recovery after the load ended at {r.load_end_s:.2f} s: {value} "
                         f"(baseline: ≤ {max(r.baseline_pending, 1.0):g} pending, queue ≤ {r.baseline_queue_ms:.1f} ms "
                         f"+ slack; peak: {_f(r.peak_pending, 0)} pending, {_f(r.peak_queue_ms)} ms queue)."))
    if step.drift is not None and step.drift.windows:
        out.append(("p", "Latency drift over the run (by send time):"))
        out.append(("table", (["window", "requests", "latency p50 ms", "latency p99 ms", "TTFT p99 ms"],
                              [[f"{w.start_s:.1f}–{w.end_s:.1f} s", str(w.request_count), _f(w.latency_p50_ms),
                                _f(w.latency_p99_ms), _f(w.ttft_p99_ms)] for w in step.drift.windows])))
        out.append(("p", f"First → last window: p99 latency {_f(step.drift.p99_change_pct)} %, "
                         f"TTFT p99 {_f(step.drift.ttft_p99_change_pct)} %."))
    if step.runs:
        out.append(("p", f"Each run at this load ({len(step.runs)} runs; the figures above are their medians, the "
                         "intervals the spread from run to run):"))
        out.append(("table", (["run", "TTFT p50 / p99 ms", "ITL p50 / p99 ms", "latency p99 ms", "output tok/s",
                               "req/s", "goodput /s", "failures"],
                              [[str(r.run), f"{_f(r.ttft_p50_ms)} / {_f(r.ttft_p99_ms)}",
                                f"{_f(r.itl_p50_ms, 2)} / {_f(r.itl_p99_ms, 2)}", _f(r.latency_p99_ms),
                                _f(r.tokens_per_s), _f(r.requests_per_s, 2), _f(r.goodput_per_s, 2),
                                str(r.failures) if r.measured or r.failures else "not measured"]
                               for r in step.runs])))
    server = _server_ttft_rows(step)
    if server is not None:
        out.append(("p", "TTFT as the client saw it and as the model itself reports it, per request "
                         "(the time line plots both):"))
        out.append(("table", server))
    out += [("li", f"warning: {w}") for w in step.warnings]
    out.append(("img", _label(step)))
    return out


def _server_ttft_rows(step: LLMStep) -> tuple[list[str], list[list[str]]] | None:
    """Client TTFT, the model's own TTFT, and their per-request difference (``None``: no server timings)."""
    pairs = [(r[1], s) for r, s in zip(step.requests, step.server_ttft_ms, strict=False)
             if r[1] is not None and s is not None]
    if not pairs:
        return None
    client = Distribution.of(c for c, _ in pairs)
    server = Distribution.of(s for _, s in pairs)
    gap = Distribution.of(c - s for c, s in pairs)
    assert client is not None and server is not None and gap is not None
    return (["per request (" + str(len(pairs)) + ")", "p50 ms", "p90 ms", "p99 ms", "max ms"],
            [[name, _f(d.p50), _f(d.p90), _f(d.p99), _f(d.max)]
             for name, d in (("client TTFT", client), ("server TTFT (model's own)", server),
                             ("client − server", gap))])


def render_llm_html(result: LLMResult, verdict: Verdict | None = None, *, plots: dict[str, bytes] | None = None,
                    percentiles_png: bytes | None = None) -> str:
    """The same report as one self-contained HTML page (the classic report's template machinery);
    ``plots`` maps a step label to its time line PNG, embedded inline."""
    from tritonkit.perf.report.html import render_page

    images = {label: base64.b64encode(png).decode("ascii") for label, png in (plots or {}).items()}
    return render_page("llm_report.html.j2", {
        "model": result.model, "facts": _facts(result, verdict), "marker": REPORT_MARKER,
        "verdict": None if verdict is None else {"status": verdict.status, "summary": verdict.summary(),
                                                 "exit_code": verdict.exit_code},
        "results": _results_table(result), "intervals": _intervals_table(result),
        "percentiles": None if percentiles_png is None else base64.b64encode(percentiles_png).decode("ascii"),
        "steps": [{"label": _label(s), "blocks": _step_blocks(s), "image": images.get(_label(s))} for s in result.steps],
        "definitions": METRIC_DEFINITIONS,
    })


def render_percentiles_png(result: LLMResult) -> bytes | None:
    """TTFT and ITL at p50 / p90 / p95 / p99, one line per step; ``None`` when nothing was measured."""
    measured = [s for s in result.steps if s.metrics is not None and s.metrics.ttft_ms is not None]
    if not measured:
        return None
    figure = new_figure(8.0, 3.5)
    ttft_axis, itl_axis = figure.subplots(1, 2)
    stats = PERCENTILES
    for step in measured:
        m = step.metrics
        assert m is not None and m.ttft_ms is not None
        ttft_axis.plot(stats, [m.ttft_ms.get(k) for k in stats], "o-", label=_label(step))
        if m.itl_ms is not None:
            itl_axis.plot(stats, [m.itl_ms.get(k) for k in stats], "o-", label=_label(step))
    ttft_axis.set_title("time to first token (ms)")
    itl_axis.set_title("inter-token latency (ms)")
    ttft_axis.legend(fontsize="small")
    return png_bytes(figure)


def render_timeline_png(step: LLMStep) -> bytes | None:
    """Requests and server state on one time line; ``None`` when the step has neither."""
    if not step.requests and not step.timeline:
        return None
    figure = new_figure(8.0, 5.5)
    top, bottom = figure.subplots(2, 1, sharex=True)
    sent = [r[0] for r in step.requests]
    top.plot(sent, [r[2] for r in step.requests], ".", label="request latency (ms)")
    top.plot(sent, [r[1] for r in step.requests], "x", label="TTFT (ms)")
    if step.server_ttft_ms:
        top.plot(sent, [v if v is not None else float("nan") for v in step.server_ttft_ms], "+",
                 label="server TTFT, the model's own (ms)")
    top.set_ylabel("ms")
    top.legend(loc="upper left", fontsize="small")
    times = [p.t_s for p in step.timeline]
    bottom.step(times, [p.pending or 0 for p in step.timeline], where="post", label="server pending")
    bottom.step(times, [p.in_flight for p in step.timeline], where="post", label="client in flight")
    bottom.set_ylabel("requests")
    bottom.set_xlabel("seconds from the first request")
    queue_axis = bottom.twinx()
    queue_axis.plot(times, [p.queue_ms if p.queue_ms is not None else float("nan") for p in step.timeline],
                    "r--", label="server queue (ms)")
    queue_axis.set_ylabel("queue ms")
    for phase in step.phases:
        if phase.get("name") in ("burst",):
            for axis in (top, bottom):
                axis.axvspan(phase["start_s"], phase["end_s"], color="orange", alpha=0.15)
    if step.recovery is not None and step.recovery.recovery_s is not None:
        bottom.axvline(step.recovery.load_end_s + step.recovery.recovery_s, color="green", linestyle=":",
                       label="recovered")
    handles, labels = bottom.get_legend_handles_labels()
    extra_handles, extra_labels = queue_axis.get_legend_handles_labels()
    bottom.legend(handles + extra_handles, labels + extra_labels, loc="upper right", fontsize="small")
    top.set_title(_label(step))
    return png_bytes(figure)


def write_llm_report(result: LLMResult, folder: str | os.PathLike[str], verdict: Verdict | None = None) -> Path:
    """Write ``llm_report.md``, ``llm_report.html`` and ``llm_timeline_<label>.png`` per step into
    ``folder``, each atomically; return the Markdown path."""
    target = Path(folder)
    plots: dict[str, str] = {}
    pngs: dict[str, bytes] = {}
    for index, step in enumerate(result.steps):
        png = render_timeline_png(step)
        if png is not None:
            name = f"llm_timeline_{index + 1}_{step.load_mode}.png"
            atomic_write(target / name, png)
            plots[_label(step)], pngs[_label(step)] = name, png
    percentiles_png = render_percentiles_png(result)
    if percentiles_png is not None:
        atomic_write(target / "llm_percentiles.png", percentiles_png)
    markdown = atomic_write(target / "llm_report.md", render_llm_markdown(result, verdict, plots=plots))
    atomic_write(target / "llm_report.html", render_llm_html(result, verdict, plots=pngs, percentiles_png=percentiles_png))
    return markdown
