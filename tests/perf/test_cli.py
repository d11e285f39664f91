"""``tritonkit perf``: real ladders with the real perf_analyzer against the real bundled server.

One server (module scope) serves two python-backend models: ``add_sub`` and ``flaky`` (which
starts failing every request after a fixed number, so a ladder meets failed requests for real).
Steps are short (0.5 s windows) because client and server share two cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.cli_output import kv_lines
from tests.support.perf_models import write_perf_model
from tests.support.pymodels import write_add_sub, write_python_model
from tritonkit.cli import main
from tritonkit.perf.judge.verdict import Verdict
from tritonkit.perf.measure.result import PerfResult
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.server import TritonServer, free_ports

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

# Short steps: 3 windows of 0.5 s; no warm-up unless a test wants one.
FAST = ["--duration-s", "1.5", "--warmup-s", "0", "--max-trials", "5"]

# Fails a request whenever another one is being executed at the same time (two instances, a
# lock file shared between their processes): never at concurrency 1, soon at concurrency 2.
# WAR: not built on the dynamic batcher: the 2.51 python backend segfaults when perf_analyzer
# aborts (at the first failed request) while batched requests are in flight.
FRAGILE_PY = """
import os
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.lock = os.path.join(args["model_repository"], "busy.lock")

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                error = pb_utils.TritonError("fragile: another request is in flight")
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            try:
                time.sleep(0.01)
                x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", x)]))
            finally:
                os.close(fd)
                os.unlink(self.lock)
        return responses
"""
FRAGILE_CONFIG = """
name: "fragile"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("repo")
    write_add_sub(repo)
    write_python_model(repo, "fragile", config_pbtxt=FRAGILE_CONFIG, model_py=FRAGILE_PY)
    write_perf_model(repo, "erratic")
    with TritonServer(repo) as running:
        yield running


@pytest.fixture(scope="module")
def passed_run(server: TritonServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Path]:
    """One ladder that meets its SLA, shared by the tests that read what it wrote."""
    root = tmp_path_factory.mktemp("results")
    result = _invoke(
        "run", "add_sub", "--url", server.grpc_url, "--metrics-url", server.metrics_url,
        "--sla", "p99<=500ms", "--concurrency", "1,2", *FAST, "--warmup-s", "0.6",
        "--results-root", str(root), "--save-baseline", "--baseline-dir", str(root / "baselines"),
    )  # fmt: skip
    return result, root


@pytest.fixture(scope="module")
def noisy_run(server: TritonServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Path]:
    """A ladder of ``erratic`` at concurrency 2, which perf_analyzer can never call stable (its
    model sleeps on a 4 s sawtooth once requests batch): one noisy step, judged on its interval."""
    root = tmp_path_factory.mktemp("noisy")
    result = _invoke(
        "run", "erratic", "--url", server.grpc_url, "--sla", "p99<=60s", "--concurrency", "2", *FAST,
        "--max-trials", "4", "--results-root", str(root),
    )  # fmt: skip
    return result, _run_dir(root) / "result.json"


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["perf", *args], catch_exceptions=False)


def _run_dir(root: Path) -> Path:
    folders = [p for p in root.iterdir() if p.is_dir() and p.name != "baselines"]
    assert len(folders) == 1, folders
    return folders[0]


def test_a_ladder_that_meets_the_sla_exits_0_and_keeps_raw_files_result_report_and_baseline(
    passed_run: tuple[Result, Path],
) -> None:
    result, root = passed_run
    assert result.exit_code == 0, result.output
    steps = kv_lines(result.output, "step")
    assert [s["load"] for s in steps] == ["1", "2"]  # one step line per load; a retried try is an attempt line
    # On a busy machine a step may be noisy: still a measurement, judged on its interval, far inside 500 ms.
    assert all(
        s["sla"] == "pass" and (s["stable"] == "true") != (s["noisy"] == "true") and float(s["throughput_per_s"]) > 0
        for s in steps
    )
    assert len(kv_lines(result.output, "attempt")) == sum(int(s["attempts"]) - 1 for s in steps)
    verdict_line = kv_lines(result.output, "verdict")[0]
    assert verdict_line["status"] == "pass" and verdict_line["knee_load"] == "2"
    assert verdict_line["sla"] == "p99<=500ms,errors==0"

    folder = _run_dir(root)
    assert folder.name.endswith("-add_sub")
    saved = PerfResult.load(folder / "result.json")
    assert [s.load_value for s in saved.steps] == [1.0, 2.0]  # the warm-up is not a step
    assert saved.warmup is not None and (folder / "warmup.csv").is_file()
    assert saved.steps[0].metrics is not None and saved.steps[0].metrics.success_count
    assert saved.verdict is not None and Verdict.from_dict(saved.verdict).knee_load == 2
    # Each step's raw files are those of the try it kept (a first, unstable try writes no CSV).
    for step, stem in zip(saved.steps, ("step01-c1", "step02-c2"), strict=True):
        kept = stem if step.attempts == 1 else f"{stem}-retry{step.attempts - 1}"
        assert {f"{kept}.csv", f"{kept}.json", f"{kept}.stdout"} <= set(step.raw_files), step.raw_files
        assert all((folder / name).is_file() for name in step.raw_files), step.raw_files
    assert (folder / "step01-c1.stdout").is_file() and (folder / "step02-c2.argv.json").is_file()  # first tries too
    assert "**PASS** (exit code 0)" in (folder / "report.md").read_text()
    assert "data:image/png;base64," in (folder / "report.html").read_text()
    assert len(list((folder / "plots").glob("*.png"))) == 3
    baselines = list((root / "baselines" / "add_sub").glob("*.json"))
    assert len(baselines) == 1 and PerfResult.load(baselines[0]).steps[1].load_value == 2.0


def test_dry_run_prints_the_exact_argv_the_real_run_used_and_runs_nothing(
    passed_run: tuple[Result, Path], server: TritonServer, tmp_path: Path
) -> None:
    _, root = passed_run
    folder = _run_dir(root)
    dry = _invoke(
        "run", "add_sub", "--url", server.grpc_url, "--sla", "p99<=500ms", "--concurrency", "1,2", *FAST,
        "--warmup-s", "0.6", "--out", str(folder), "--dry-run", "--json",
    )  # fmt: skip
    assert dry.exit_code == 0, dry.output
    commands = json.loads(dry.output)["commands"]
    assert [(c["name"], c["recorded"]) for c in commands] == [
        ("warmup", False),
        ("step01-c1", True),
        ("step02-c2", True),
    ]
    for command in commands:
        ran = json.loads((folder / f"{command['name']}.argv.json").read_text())
        assert command["argv"] == ran

    text = _invoke("run", "add_sub", "--url", server.grpc_url, "--concurrency", "1:4", "--warmup-s", "2",
                   "--out", str(tmp_path / "never"), "--dry-run")  # fmt: skip
    assert text.exit_code == 0, text.output
    argv_lines = [line for line in text.output.splitlines() if not line.startswith("#")]
    assert len(argv_lines) == 4  # warm-up, then 1, 2, 4
    assert "--concurrency-range 4:4:1" in argv_lines[-1] and "-m add_sub" in argv_lines[-1]
    assert not (tmp_path / "never").exists()


def test_a_ladder_that_misses_the_sla_exits_1_and_stops_after_two_breaking_steps(
    server: TritonServer, tmp_path: Path
) -> None:
    result = _invoke(
        "run", "add_sub", "--url", server.grpc_url, "--sla", "p99<=10us", "--concurrency", "1,2,4", *FAST,
        "--results-root", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert [s["sla"] for s in kv_lines(result.output, "step")] == ["fail", "fail"]
    assert kv_lines(result.output, "verdict")[0]["status"] == "fail"
    saved = PerfResult.load(_run_dir(tmp_path) / "result.json")
    assert saved.stop_reason == "sla_broken"
    assert len(saved.steps) == 2  # concurrency 4 was never run
    assert "**FAIL** (exit code 1)" in (_run_dir(tmp_path) / "report.md").read_text()


def test_failed_requests_fail_their_step_and_the_knee_stays_below(
    server: TritonServer, tmp_path: Path
) -> None:
    result = _invoke(
        "run", "fragile", "--url", server.grpc_url, "--metrics-url", server.metrics_url,
        "--sla", "p99<=500ms", "--concurrency", "1,2,4", *FAST,
        "--results-root", str(tmp_path), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output  # the SLA is met at concurrency 1
    data = json.loads(result.output)
    steps = {s["load"]: s for s in data["steps"]}
    assert steps[1.0]["errors"] == 0 and steps[1.0]["throughput_per_s"] > 0
    assert steps[2.0]["errors"] >= 1 and steps[2.0]["throughput_per_s"] is None
    verdict = data["verdict"]
    assert verdict["knee_load"] == 1
    assert verdict["binding"]["constraint"] == "errors==0" and verdict["binding"]["measured"] >= 1
    assert [s["status"] for s in verdict["steps"]][:2] == ["pass", "fail"]
    assert data["stop_reason"] == "request_errors" and len(data["steps"]) == 3  # two failing steps
    report = (Path(data["results_dir"]) / "report.md").read_text()
    assert "FAIL (errors==0)" in report and "another request is in flight" in report


def test_sigterm_mid_ladder_stops_perf_analyzer_and_keeps_judged_steps_and_report(
    server: TritonServer, tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    argv = [
        sys.executable, "-m", "tritonkit.cli", "perf", "run", "add_sub", "--url", server.grpc_url,
        "--sla", "p99<=500ms", "--concurrency", "1,2,4,8", "--duration-s", "3", "--warmup-s", "0",
        "--out", str(folder),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (folder / "step02-c2.argv.json").is_file():  # step 1 saved, step 2 running
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ladder never reached its second step"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, stdout + stderr
    assert "interrupted" in stderr and str(folder) in stderr
    saved = PerfResult.load(folder / "result.json")
    assert saved.stop_reason == "interrupted"
    assert [s.load_value for s in saved.steps][:1] == [1.0]
    assert saved.verdict is not None and saved.verdict["steps"][0]["status"] == "pass"
    assert "**PASS**" in (folder / "report.md").read_text()
    assert not (folder / "step03-c4.argv.json").exists()
    ps = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True, check=False)
    assert ps.stdout.strip() == "", "a perf_analyzer of the interrupted run is still running"


def _wait_for(path: Path, proc: subprocess.Popen[str] | None = None, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.is_file():
        assert proc is None or proc.poll() is None, proc.communicate() if proc else ""
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def _perf_analyzers_of(folder: Path) -> list[str]:
    ps = subprocess.run(["pgrep", "-af", str(folder)], capture_output=True, text=True, check=False)
    return [line for line in ps.stdout.splitlines() if "perf_analyzer" in line]


def test_sigkill_mid_ladder_keeps_every_measured_step_and_leaves_no_perf_analyzer(
    server: TritonServer, tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    argv = [
        sys.executable, "-m", "tritonkit.cli", "perf", "run", "add_sub", "--url", server.grpc_url,
        "--concurrency", "1,2,4", "--duration-s", "3", "--warmup-s", "0", "--out", str(folder),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(folder / "step02-c2.argv.json", proc)  # step 1 measured, step 2 running
        time.sleep(0.5)
        assert _perf_analyzers_of(folder), "step 2's perf_analyzer should be running"
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    saved = PerfResult.load(folder / "result.json")  # written atomically after step 1
    assert [s.load_value for s in saved.steps] == [1.0] and saved.steps[0].measured
    deadline = time.monotonic() + 10
    while _perf_analyzers_of(folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _perf_analyzers_of(folder) == [], "perf_analyzer outlived the perf run that started it"


def test_a_server_that_dies_mid_ladder_is_not_a_knee_the_run_could_not_measure_beyond_it(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    write_add_sub(repo)
    folder = tmp_path / "run"
    with TritonServer(repo) as doomed:
        pid = doomed.pid
        assert pid is not None

        def crash_during_step_2() -> None:
            _wait_for(folder / "step02-c2.argv.json", timeout_s=120)
            time.sleep(1.0)  # well inside step 2's 3 s of measuring
            os.killpg(pid, signal.SIGKILL)

        killer = threading.Thread(target=crash_during_step_2, daemon=True)
        killer.start()
        result = _invoke(
            "run", "add_sub", "--url", doomed.grpc_url, "--sla", "p99<=500ms", "--concurrency", "1,2,4",
            "--duration-s", "3", "--warmup-s", "0", "--out", str(folder), "--json",
        )  # fmt: skip
        killer.join(timeout=10)
    assert result.exit_code == 2, result.output  # not "pass, knee at concurrency 1"
    data = json.loads(result.output)
    assert data["stop_reason"] == "server_lost"
    verdict = data["verdict"]
    assert verdict["status"] == "unmeasured" and verdict["knee_load"] is None
    assert "stopped answering at concurrency 2: could not measure beyond it" in verdict["summary"]
    assert "SLA held up to concurrency 1" in verdict["summary"]
    saved = PerfResult.load(folder / "result.json")
    assert [s.load_value for s in saved.steps] == [1.0, 2.0]
    assert saved.steps[0].measured and saved.steps[1].server_lost
    assert "COULD NOT MEASURE" in (folder / "report.md").read_text()


def test_an_out_folder_holding_the_users_own_report_is_refused_before_anything_runs(
    server: TritonServer, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "report.md").write_text("my own notes\n")
    result = _invoke("run", "add_sub", "--url", server.grpc_url, *FAST, "--out", str(folder))
    assert result.exit_code == 2, result.output
    assert "not written by tritonkit" in result.output and "another --out folder" in result.output
    assert sorted(p.name for p in folder.iterdir()) == ["report.md"]
    assert (folder / "report.md").read_text() == "my own notes\n"


def test_an_empty_sla_is_refused_and_says_how_to_run_without_one(server: TritonServer, tmp_path: Path) -> None:
    result = _invoke("run", "add_sub", "--url", server.grpc_url, "--sla", "", *FAST, "--results-root", str(tmp_path))
    assert result.exit_code == 2, result.output
    assert "the SLA is empty" in result.output and "leave the --sla option out" in result.output
    assert list(tmp_path.iterdir()) == []
    over = _invoke("run", "add_sub", "--url", server.grpc_url, "--sla", "error_rate<=150%", *FAST,
                   "--results-root", str(tmp_path))  # fmt: skip
    assert over.exit_code == 2 and "above 100%" in over.output


def test_unknown_model_is_a_clear_error_before_anything_runs(server: TritonServer, tmp_path: Path) -> None:
    result = _invoke("run", "no_such_model", "--url", server.grpc_url, *FAST, "--results-root", str(tmp_path))
    assert result.exit_code == 2
    assert "no_such_model" in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_unreachable_server_is_a_clear_error_before_anything_runs(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    result = _invoke("run", "add_sub", "--url", f"127.0.0.1:{port}", *FAST, "--results-root", str(tmp_path))
    assert result.exit_code == 2
    assert f"127.0.0.1:{port}" in result.output and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_typo_in_the_sla_is_refused_with_a_suggestion(server: TritonServer, tmp_path: Path) -> None:
    result = _invoke(
        "run", "add_sub", "--url", server.grpc_url, "--sla", "p98<=5ms", "--results-root", str(tmp_path)
    )
    assert result.exit_code == 2
    assert "did you mean 'p99'" in result.output
    assert list(tmp_path.iterdir()) == []


def test_rerunning_a_cut_short_run_into_its_folder_measures_only_the_missing_levels(
    server: TritonServer, tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    args = ["run", "add_sub", "--url", server.grpc_url, "--sla", "p99<=500ms", "--concurrency", "1,2", *FAST,
            "--out", str(folder)]  # fmt: skip
    first = _invoke(*args)
    assert first.exit_code == 0, first.output
    # Made to look like a run stopped after its first step (a real interrupt is tested above).
    cut = PerfResult.load(folder / "result.json")
    cut.steps = cut.steps[:1]
    cut.stop_reason = "interrupted"
    cut.save(folder / "result.json")

    second = _invoke(*args)
    assert second.exit_code == 0, second.output
    assert {s["load"] for s in kv_lines(second.output, "step")} == {"2"}  # 1 was kept (2 may be retried)
    saved = PerfResult.load(folder / "result.json")
    assert [s.load_value for s in saved.steps] == [1.0, 2.0]
    assert saved.steps[1].raw_files[0].startswith("resume-1/")
    assert (folder / saved.steps[1].raw_files[0]).is_file()
    assert saved.verdict is not None and saved.verdict["knee_load"] == 2


def test_rerunning_into_a_folder_with_other_settings_is_refused_naming_each_difference(
    server: TritonServer, tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    first = _invoke("run", "add_sub", "--url", server.grpc_url, "--concurrency", "1", *FAST, "--out", str(folder))
    assert first.exit_code == 0, first.output
    before = (folder / "result.json").read_text()

    other = _invoke(
        "run", "add_sub", "--url", server.grpc_url, "--concurrency", "1,2", "--batch-size", "2",
        "--input-data", "random", *FAST, "--out", str(folder),
    )  # fmt: skip
    assert other.exit_code == 2, other.output
    assert "batch_size 1 → 2" in other.output
    assert "levels 1 → 1,2" in other.output
    assert "input_data none → random" in other.output
    assert "another --out folder" in other.output and f"delete {folder}" in other.output
    assert (folder / "result.json").read_text() == before  # nothing mixed in
    assert not list(folder.glob("resume-*"))

    with_sla = _invoke("run", "add_sub", "--url", server.grpc_url, "--concurrency", "1", *FAST,
                       "--sla", "p99<=500ms", "--out", str(folder))  # fmt: skip
    assert with_sla.exit_code == 2, with_sla.output
    assert "sla none → p99<=500ms,errors==0" in with_sla.output and "perf report --sla" in with_sla.output


def test_compare_exits_1_on_a_regression_and_saves_a_baseline_only_without_one(
    passed_run: tuple[Result, Path], tmp_path: Path
) -> None:
    _, root = passed_run
    base_path = _run_dir(root) / "result.json"
    slower = PerfResult.load(base_path)
    for step in slower.steps:  # half the throughput, 30 % more p99: in every window as in the step
        assert step.throughput_per_s is not None and step.latency is not None
        step.throughput_per_s *= 0.5
        step.latency.p99_ms *= 1.3
        for window in step.windows:
            window.throughput_per_s *= 0.5
            window.p99_ms = None if window.p99_ms is None else window.p99_ms * 1.3
    new_path = slower.save(tmp_path / "new" / "result.json")

    regressed = _invoke("compare", str(base_path), str(new_path), "--max-throughput-drop", "5%", "--per-step",
                        "--max-p99-rise", "10%", "--save-baseline", "--baseline-dir", str(tmp_path / "b"))  # fmt: skip
    assert regressed.exit_code == 1, regressed.output
    assert "REGRESSION" in regressed.output and "-50.0%" in regressed.output and "+30.0%" in regressed.output
    assert "95% interval" in regressed.output  # decided on the interval of the change, from the runs' windows
    assert not (tmp_path / "b").exists()

    # The run against itself, with a limit wider than any noise of a short run on a busy machine.
    same = _invoke("compare", str(root / "baselines" / "add_sub"), str(base_path), "--json",
                   "--max-throughput-drop", "60%", "--save-baseline", "--baseline-dir", str(tmp_path / "b"))  # fmt: skip
    assert same.exit_code == 0, same.output
    data = json.loads(same.output)
    assert data["regressed"] is False and data["outcome"] == "no regression" and data["baseline_saved"]
    assert Path(data["baseline_saved"]).is_file()
    assert data["run_noise"] == 0.05  # a single run is held to the spread between runs by default

    refused = _invoke("compare", str(base_path), str(new_path), "--run-noise", "150%")
    assert refused.exit_code == 2 and "--run-noise" in refused.output and "Traceback" not in refused.output


def test_report_rerenders_with_a_new_sla_and_exits_with_its_verdict(
    passed_run: tuple[Result, Path], tmp_path: Path
) -> None:
    _, root = passed_run
    source = _run_dir(root) / "result.json"
    result = _invoke("report", str(source), "--sla", "p99<=10us", "--out", str(tmp_path / "again"))
    assert result.exit_code == 1, result.output
    assert "**FAIL** (exit code 1)" in (tmp_path / "again" / "report.md").read_text()
    assert PerfResult.load(source).verdict is not None
    assert PerfResult.load(source).verdict["status"] == "pass"  # type: ignore[index]  # the original stays


def test_install_is_idempotent_and_reports_which_binary_runs() -> None:
    before = locate_perf_analyzer()
    result = _invoke("install", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert Path(data["binary"]) == before.binary and data["mode"] in ("native", "private-runtime")


def test_a_step_perf_analyzer_cannot_stabilise_is_a_noisy_measurement_not_a_failure(
    noisy_run: tuple[Result, Path],
) -> None:
    result, saved = noisy_run
    assert result.exit_code == 0, result.output  # p99 <= 60 s: the whole interval meets it
    (step,) = kv_lines(result.output, "step")  # one step line for the load ...
    (attempt,) = kv_lines(result.output, "attempt")  # ... and its first, unstable try said as an attempt
    assert attempt["load"] == "2" and attempt["stable"] == "false" and "--duration-s" in attempt["note"]
    assert step["noisy"] == "true" and step["stable"] == "false" and step["sla"] == "pass"
    assert step["attempts"] == "2" and step["interval_basis"] == "windows"
    low, high = (float(v) for v in step["throughput_interval_per_s"].split(".."))
    assert low <= float(step["throughput_per_s"]) <= high
    assert float(step["other_cores"]) >= 0 and float(step["generator_cores"]) >= 0  # the machine's load, read
    run = PerfResult.load(saved)
    assert run.noisy_steps == run.steps and run.steps[0].measured and run.steps[0].machine is not None
    report = (saved.parent / "report.md").read_text()
    assert "## Noise and the machine" in report and "(noisy)" in report and "Noisy steps" in report


def test_a_noisy_step_meets_misses_or_is_inside_the_noise_by_its_interval_with_its_exit_code(
    noisy_run: tuple[Result, Path], tmp_path: Path
) -> None:
    """Judged again against bounds below, inside and above the noisy step's p99 interval: exit 1, 3, 0."""
    _, saved = noisy_run
    step = PerfResult.load(saved).steps[0]
    low, high = step.intervals["p99"]
    codes = {}
    for name, bound_ms in (("below", low / 2), ("inside", (low + high) / 2), ("above", high * 2)):
        again = _invoke("report", str(saved), "--sla", f"p99<={bound_ms:.6f}ms", "--out", str(tmp_path / name))
        codes[name] = again.exit_code
        line = kv_lines(again.output, "verdict")[0]
        assert line["exit_code"] == str(again.exit_code), again.output
    assert codes == {"below": 1, "inside": 3, "above": 0}
    inside = (tmp_path / "inside" / "report.md").read_text()
    assert "**INSIDE THE NOISE** (exit code 3)" in inside and "measure again" in inside


def test_repeat_runs_the_ladder_n_times_and_judges_each_figure_on_its_spread_across_runs(
    server: TritonServer, tmp_path: Path
) -> None:
    result = _invoke(
        "run", "add_sub", "--url", server.grpc_url, "--sla", "p99<=500ms", "--concurrency", "1,2", *FAST,
        "--repeat", "3", "--results-root", str(tmp_path),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    per_run = kv_lines(result.output, "run_step")
    assert sorted((r["run"], r["load"]) for r in per_run) == [(str(i), load) for i in (1, 2, 3) for load in ("1", "2")]
    combined = kv_lines(result.output, "step")
    assert [s["load"] for s in combined] == ["1", "2"] and all(s["interval_basis"] == "runs" for s in combined)
    folder = _run_dir(tmp_path)
    saved = PerfResult.load(folder / "result.json")
    assert saved.repeats == 3 and all((folder / f"run-{i}" / "result.json").is_file() for i in (1, 2, 3))
    for step in saved.steps:
        assert [r.run for r in step.runs] == [1, 2, 3] and step.interval_basis == "runs"
        values = sorted(r.throughput_per_s or 0.0 for r in step.runs)
        assert step.throughput_per_s == pytest.approx(values[1])  # the median run
        low, high = step.intervals["throughput"]
        assert low <= values[1] <= high
    report = (folder / "report.md").read_text()
    assert "The ladder ran 3 times" in report and "| 2 | 3 |" in report  # load 2, run 3 in the runs' table
