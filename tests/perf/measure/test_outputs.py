"""Load tests that never run the machine out of memory (tritonkit/perf/measure/outputs.py).

perf_analyzer 2.60 keeps every response's outputs unless they go to shared memory: at 1 MiB a
request it grows by gigabytes a second. The server tests serve python-backend models answering
FP32 [256, 1024] (tests/support/big_outputs.py) on the bundled server, started here, outside any
cap; ``tritonkit`` then runs in a child process under an address-space cap (RLIMIT_AS, what
``ulimit -v`` sets), which perf_analyzer, its child, inherits: a perf_analyzer that keeps the
outputs dies of ``std::bad_alloc`` at the cap instead of taking the machine. The sweep starts its own
server, so that server runs under the sweep's cap too.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.big_outputs import OUTPUT_BYTES, write_big_output_models
from tests.support.shm_refusal import refusing_server
from tritonkit.errors import StepError
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.failures import Failure, classify
from tritonkit.perf.measure.outputs import KEPT_COPIES, MIN_WINDOW_MS, bound_windows, place_outputs
from tritonkit.perf.measure.result import PerfResult
from tritonkit.perf.measure.spec import ConcurrencyRange, KeptOutputs, PerfSpec, RequestRateRange
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall
from tritonkit.server import TritonServer
from tritonkit.triton_releases import CLIENT_SHM_FLAG

GB = 1 << 30


# ---- pure ---------------------------------------------------------------------------------------


def test_kept_outputs_get_windows_that_hold_at_most_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tritonkit.perf.measure.outputs.memory_budget", lambda: 20 * GB)
    spec = PerfSpec(model="big", url="10.0.0.5:8001", load=ConcurrencyRange(4), measurement_interval_ms=5000,
                    max_trials=10, kept_outputs=KeptOutputs(OUTPUT_BYTES, 0.01))
    bounded, said = bound_windows(spec, per_load=None)
    rate = 4 * 2 / 0.01  # four in flight, each at twice the probe's rate: 800 requests/s
    assert bounded.max_trials == 3 and bounded.measurement_interval_ms is not None
    held = bounded.max_trials * bounded.measurement_interval_ms / 1000 * rate * OUTPUT_BYTES * KEPT_COPIES
    assert held <= 20 * GB and bounded.measurement_interval_ms >= MIN_WINDOW_MS
    assert said is not None and f"{OUTPUT_BYTES} B outputs" in said and "800 requests/s" in said
    # A faster rate measured since wins over the probe's; small outputs are left as they are.
    faster, _ = bound_windows(spec, per_load=400.0)
    assert faster.max_trials * faster.measurement_interval_ms < bounded.max_trials * bounded.measurement_interval_ms  # type: ignore[operator]
    small = PerfSpec(model="m", url="10.0.0.5:8001", kept_outputs=KeptOutputs(16, 0.002))
    assert bound_windows(small, per_load=None) == (small, None)


def test_a_load_whose_outputs_cannot_fit_is_refused_naming_size_rate_and_fix() -> None:
    spec = PerfSpec(model="big", url="10.0.0.5:8001", load=RequestRateRange(5000), kept_outputs=KeptOutputs(GB))
    with pytest.raises(StepError) as caught:
        bound_windows(spec, per_load=None)
    error = caught.value
    assert error.failure == Failure.OUT_OF_MEMORY
    assert f"holding {GB}-byte outputs at 5,000 requests/s" in error.message and "would run out of memory" in error.message
    assert error.hint is not None and "shared memory" in error.hint and "--keep-outputs" in error.hint


def test_bad_alloc_is_out_of_memory_not_an_unexplained_signal() -> None:
    console = "Request concurrency: 4\nterminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc"
    assert classify(console, returncode=-6).failure is Failure.OUT_OF_MEMORY
    assert classify("", returncode=-6).failure is Failure.KILLED


_HOG = """
import sys, time
held = [bytearray(32 << 20) for _ in range(16)]  # 512 MiB, touched
time.sleep(60)
"""


@pytest.mark.perf_analyzer
def test_a_load_generator_past_twice_its_budget_is_stopped_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor's watch, on a stand-in that only allocates (no perf_analyzer grows on cue)."""
    hog = tmp_path / "hog.py"
    hog.write_text(_HOG)
    monkeypatch.setattr("tritonkit.perf.measure.outputs.memory_budget", lambda: 64 << 20)
    tool = PerfAnalyzerInstall(argv=(sys.executable, str(hog)), source="test", mode="external", binary=hog)
    spec = PerfSpec(model="big", url="10.0.0.5:8001", load=ConcurrencyRange(2), shared_memory="none",
                    kept_outputs=KeptOutputs(OUTPUT_BYTES), measurement_interval_ms=1000, max_trials=3)
    with pytest.raises(StepError) as caught:
        PerfAnalyzer(tmp_path / "run", perf_analyzer=tool).run(spec, "step01", timeout_s=50)
    error = caught.value
    assert error.failure == Failure.OUT_OF_MEMORY and f"holding {OUTPUT_BYTES}-byte outputs" in error.message
    assert "past the limit of twice its budget, 128 MiB" in error.message and error.hint


# ---- the real server and perf_analyzer, under a cap ----------------------------------------------


@pytest.fixture(scope="module")
def big_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonServer, Path]]:
    repo = write_big_output_models(tmp_path_factory.mktemp("big") / "repo")
    with TritonServer(repo) as server:
        yield server, repo


def _capped(cap: int, *args: str) -> subprocess.CompletedProcess[str]:
    """``tritonkit ARGS`` under an address-space cap of ``cap`` bytes (perf_analyzer inherits it)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    return subprocess.run([sys.executable, "-m", "tritonkit.cli", *args], capture_output=True, text=True,
                          preexec_fn=limit, env=env, timeout=400, check=False)


def _argv(folder: Path, name: str) -> list[str]:
    return list(json.loads((folder / f"{name}.argv.json").read_text()))


@pytest.mark.server
@pytest.mark.perf_analyzer
@pytest.mark.parametrize(("model", "extra", "region"), [("big", (), OUTPUT_BYTES),
                                                        ("bigvar", ("--shape", "INPUT0:256"), 2 * OUTPUT_BYTES)])
def test_a_run_of_1_mib_outputs_under_a_4_gb_cap_measures_its_steps(
        big_server: tuple[TritonServer, Path], tmp_path: Path, model: str, extra: tuple[str, ...], region: int) -> None:
    server, _ = big_server
    out = tmp_path / "run"
    done = _capped(4 * GB, "perf", "run", model, "--url", server.grpc_url, "--concurrency", "1,4", *extra,
                   "--duration-s", "1.5", "--warmup-s", "1", "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = PerfResult.load(out / "result.json")
    assert [s.load_value for s in result.steps if s.throughput_per_s] == [1.0, 4.0]
    argv = _argv(out, "step02-c4")
    assert argv[argv.index("--shared-memory") + 1] == "system"
    # Fixed dims: the metadata's size; variable dims: twice what one probe request of the largest input got.
    assert argv[argv.index("--output-shared-memory-size") + 1] == str(region)
    notes = " ".join(result.extra.get("input_data", []))  # what the run was told, kept with its result
    assert ("metadata declares" if model == "big" else "one probe request") in notes, notes


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_kept_outputs_under_a_4_gb_cap_are_measured_within_the_budget_or_refused_before_they_start(
        big_server: tuple[TritonServer, Path], tmp_path: Path) -> None:
    server, _ = big_server
    kept = tmp_path / "kept"  # 64 KiB a request: the windows fit the budget
    done = _capped(4 * GB, "perf", "run", "bigvar", "--shape", "INPUT0:16", "--url", server.grpc_url,
                   "--concurrency", "2", "--keep-outputs", "--duration-s", "2", "--warmup-s", "1", "--out", str(kept))
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    argv = _argv(kept, "step01-c2")
    assert argv[argv.index("--shared-memory") + 1] == "none"
    assert [s.load_value for s in PerfResult.load(kept / "result.json").steps if s.throughput_per_s] == [2.0]
    refused = tmp_path / "refused"  # 1 MiB a request at 16 in flight: the budget fills within three windows
    done = _capped(4 * GB, "perf", "run", "big", "--url", server.grpc_url, "--concurrency", "16", "--keep-outputs",
                   "--duration-s", "2", "--warmup-s", "1", "--out", str(refused))
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    assert f"would run out of memory on model 'big' holding {OUTPUT_BYTES}-byte outputs at" in said, said[-3000:]
    assert "--allow-client-shm=true" in said and "bad_alloc" not in said and "signal" not in said


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_sweep_of_1_mib_outputs_under_a_6_gb_cap_measures_its_variants(
        big_server: tuple[TritonServer, Path], tmp_path: Path) -> None:
    _, repo = big_server
    out = tmp_path / "sweep"
    done = _capped(6 * GB, "perf", "sweep", str(repo), "big", "--sla", "p99<=50ms", "--instances", "1,2",
                   "--concurrency", "1,2", "--window-ms", "500", "--warmup-s", "0.5", "--no-write-back",
                   "--out", str(out))
    said = done.stdout + done.stderr
    assert done.returncode in (0, 1), said[-3000:]  # 1: no variant met the SLA on a busy machine, still measured
    assert "bad_alloc" not in said and "out of memory" not in said
    argvs = [json.loads(p.read_text()) for p in out.rglob("step*.argv.json")]
    assert argvs and all(a[a.index("--shared-memory") + 1] == "system" for a in argvs)
    measured = {p.parts[len(out.parts)] for p in out.rglob("step*.csv")}
    assert len(measured) >= 2, sorted(measured)


@pytest.mark.server
def test_a_server_refusing_client_shared_memory_gets_the_outputs_kept_with_their_size(
        big_server: tuple[TritonServer, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """No 2.68+ server runs here: its refusal comes from tests/support/shm_refusal.py, the model from the real one."""
    from tritonkit.client import shared_memory_refusal

    server, _ = big_server
    with refusing_server() as url:
        refusal = shared_memory_refusal(url)
    assert refusal is not None
    monkeypatch.setattr("tritonkit.client.shared_memory_refusal", lambda _url, **_kw: refusal)
    placed, said = place_outputs(PerfSpec(model="big", url=server.grpc_url, load=ConcurrencyRange(4)))
    assert placed.shared_memory is None and placed.kept_outputs is not None
    assert placed.kept_outputs.bytes == OUTPUT_BYTES and placed.kept_outputs.round_trip_s
    assert CLIENT_SHM_FLAG in said[0] and f"{OUTPUT_BYTES} B per request" in said[0]
    kept, _ = place_outputs(PerfSpec(model="bigvar", url=server.grpc_url, shapes={"INPUT0": [128]}), keep=True)
    assert kept.shared_memory == "none" and kept.kept_outputs is not None
    assert kept.kept_outputs.bytes == OUTPUT_BYTES // 2  # the probe's answer to 128 values: 128 rows
