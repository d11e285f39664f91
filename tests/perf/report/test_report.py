"""report.md and report.html (plots embedded as PNG) from a run result, written atomically.

The results here are hand-made values shaped like a real ladder, so every table cell and plot
input is known; the end-to-end report of a real ladder is checked in test_perf_cli.py.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import parse_sla
from tritonkit.perf.judge.verdict import Verdict, evaluate_result
from tritonkit.perf.measure.result import (
    ClientBreakdown,
    LatencyStats,
    PerfResult,
    RunMetadata,
    ServerBreakdown,
    StepResult,
    WarmupInfo,
)
from tritonkit.perf.report import PLOT_NAMES, render_html, render_markdown, render_plots, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SLA_TEXT = "p99<=50ms,throughput>=150/s,errors==0"


def _step(load: float, thr: float, p99: float, *, stable: bool = True) -> StepResult:
    return StepResult(
        "concurrency",
        load,
        thr,
        LatencyStats(
            p50_ms=p99 / 3, p90_ms=p99 / 2, p95_ms=p99 * 0.8, p99_ms=p99, mean_ms=p99 / 2.5, count=500
        ),
        server=ServerBreakdown(
            queue_us=load * 400, compute_input_us=50, compute_infer_us=2000, compute_output_us=30
        ),
        client=ClientBreakdown(send_us=20, network_server_us=600, recv_us=15),
        request_count=500,
        stable=stable,
        unstable_note=None if stable else "no stable window within 10 windows",
        generator_cpu_pct_of_cores=12.5 * load,
        warnings=["generator CPU above 90% of its cores"] if load == 8 else [],
    )


def _result(model: str = "resnet") -> PerfResult:
    result = PerfResult(
        RunMetadata(
            model=model,
            url="127.0.0.1:8001",
            protocol="grpc",
            started_utc="2026-11-29T10:00:00Z",
            finished_utc="2026-11-29T10:02:00Z",
            tool_version="2.60.0",
            measurement_interval_ms=1000,
            command=["perf_analyzer", "-m", model, "--concurrency-range", "1:8:2"],
        ),
        steps=[_step(1, 100, 10), _step(2, 190, 30), _step(4, 250, 70), _step(8, 240, 160, stable=False)],
        warmup=WarmupInfo("concurrency", 1, 5.0),
        stop_reason="sla_broken_twice",
    )
    result.verdict = _verdict(result).to_dict()
    return result


def _verdict(result: PerfResult, sla: str = SLA_TEXT) -> Verdict:
    return evaluate_result(parse_sla(sla), result)


def test_markdown_has_the_verdict_one_row_per_step_in_load_order_and_plot_links() -> None:
    result = _result()
    text = render_markdown(result, _verdict(result))
    assert "**PASS** (exit code 0)" in text
    assert "PASS up to concurrency 2" in text
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
    assert [row.split("|")[1].strip() for row in rows] == ["1", "2", "4", "8"]
    # No windows in a hand-made step: no intervals; the margin is to its tightest bound.
    assert "| 2 | 190 | 10 | 15 | 24 | 30 | 12 | 0.8 | 0 | – | – | throughput>=150/s: +40 infer/s (+27%) | 25 | – | PASS |" in text
    assert "| p99<=50ms: -20 ms (-40%) |" in text  # concurrency 4, over by 20 ms
    assert "FAIL (p99<=50ms)" in text
    assert "UNMEASURED (unstable)" in text
    assert "concurrency 8: unstable measurement (no stable window within 10 windows)" in text
    assert "concurrency 8: generator CPU above 90% of its cores" in text
    assert "| p99<=50ms | <= 50 ms | 30 ms | +40.0% |" in text
    for name in PLOT_NAMES:
        assert f"(plots/{name}.png)" in text
    assert "perf_analyzer -m resnet --concurrency-range 1:8:2" in text


def test_markdown_without_an_sla_says_the_steps_are_measurements_only() -> None:
    result = _result()
    result.verdict = None
    text = render_markdown(result, None)
    assert "No SLA was given" in text
    assert "| 4 | 250 |" in text


def test_plots_are_png_images_of_the_expected_size() -> None:
    import matplotlib.image as matplotlib_image  # a core dependency: no skip if it is missing

    result = _result()
    plots = render_plots(result, _verdict(result))
    assert set(plots) == set(PLOT_NAMES)
    for data in plots.values():
        assert data.startswith(PNG_MAGIC)
        pixels = matplotlib_image.imread(io.BytesIO(data), format="png")
        assert pixels.shape[:2] == (420, 700)
        # Something was drawn: a blank canvas would have a single colour.
        assert pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0.05


def test_html_embeds_every_plot_and_escapes_names() -> None:
    result = _result(model="<script>x</script>")
    verdict = _verdict(result)
    page = render_html(result, verdict, render_plots(result, verdict))
    assert "<script>x</script>" not in page
    assert "&lt;script&gt;" in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(PLOT_NAMES)
    assert all(base64.b64decode(i).startswith(PNG_MAGIC) for i in images)


def test_write_report_writes_markdown_html_and_plots_with_no_temp_files_left(tmp_path: Path) -> None:
    result = _result()
    files = write_report(result, tmp_path / "run", _verdict(result))
    assert files.markdown.read_text().startswith("# Perf report: resnet")
    assert '<span class="pass">PASS</span>' in files.html.read_text()
    assert sorted(p.name for p in (tmp_path / "run" / "plots").iterdir()) == sorted(
        f"{n}.png" for n in PLOT_NAMES
    )
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in files.plots.values())
    leftovers = [p for p in (tmp_path / "run").rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    assert leftovers == []


def test_report_of_a_run_with_no_steps_has_no_plots_and_says_so(tmp_path: Path) -> None:
    result = _result()
    result.steps = []
    files = write_report(result, tmp_path, _verdict(result, "p99<=50ms"))
    assert files.plots == {}
    text = files.markdown.read_text()
    assert "No step was measured." in text
    assert "COULD NOT MEASURE" in text
    assert "data:image/png" not in files.html.read_text()


def test_a_failing_run_reports_the_closest_miss(tmp_path: Path) -> None:
    result = _result()
    text = write_report(result, tmp_path, _verdict(result, "p99<=5ms")).markdown.read_text()
    assert "**FAIL** (exit code 1)" in text
    assert "Closest miss: p99<=5ms (measured 10 ms)" in text


def test_a_report_md_a_person_wrote_is_never_overwritten(tmp_path: Path) -> None:
    mine = tmp_path / "report.md"
    mine.write_text("# My notes on the resnet rollout\n")
    result = _result()
    with pytest.raises(ConfigError) as info:
        write_report(result, tmp_path, _verdict(result))
    assert str(mine) in info.value.message and "not written by tritonkit" in info.value.message
    assert info.value.hint is not None and "another --out folder" in info.value.hint
    assert mine.read_text() == "# My notes on the resnet rollout\n"
    assert not (tmp_path / "report.html").exists() and not (tmp_path / "plots").exists()


def test_a_report_tritonkit_wrote_is_rewritten_by_the_next_run(tmp_path: Path) -> None:
    result = _result()
    write_report(result, tmp_path, None)
    assert "No SLA was given" in (tmp_path / "report.md").read_text()
    write_report(result, tmp_path, _verdict(result))
    assert "**PASS**" in (tmp_path / "report.md").read_text()


def test_the_reproduce_line_pastes_back_as_the_same_arguments_and_runs_nothing_it_holds(tmp_path: Path) -> None:
    """The report's command is pasted into a real shell; ``printf`` stands in for perf_analyzer."""
    import re
    import subprocess

    from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepResult
    from tritonkit.perf.report.files import write_report

    planted = tmp_path / "pwned"
    command = ["printf", "%s\\n", f"{tmp_path}/$(touch {planted})/s1.csv", "it's", "a b"]
    result = PerfResult(
        RunMetadata(model="m", url="127.0.0.1:1", protocol="grpc", started_utc="2026-11-30T10:00:00Z",
                    command=command),
        steps=[StepResult("concurrency", 1, 100.0, LatencyStats(p50_ms=1, p90_ms=2, p95_ms=2, p99_ms=3))],
    )
    files = write_report(result, tmp_path / "run", None)
    markdown = files.markdown.read_text()
    line = markdown.split("## Reproduce", 1)[1].split("```")[1].strip()
    html_line = re.search(r"<h2>Reproduce</h2>\s*<pre>(.*?)</pre>", files.html.read_text(), re.S)
    assert html_line is not None
    import html as html_lib

    for pasted in (line, html_lib.unescape(html_line.group(1))):
        shown = subprocess.run(["bash", "-c", pasted], capture_output=True, text=True, check=True).stdout
        assert shown.splitlines() == command[2:]
    assert not planted.exists()
