"""Why a step failed, named once for perf and the sweep: a slow model, a crashed stub, a model
that raises and a refused option each get their own class and the model's own words.

The console lines in the pure tests are perf_analyzer 2.60's against tritonserver 2.51, as seen
on these machines; the server tests make them happen with python models written here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pymodels import ADD_SUB_CONFIG, write_python_model
from tritonkit.errors import PerfTimeoutError
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.failures import Failure, StepError, classify
from tritonkit.perf.measure.ladder import run_ladder
from tritonkit.perf.measure.plan import LadderPlan
from tritonkit.perf.measure.spec import PerfSpec
from tritonkit.server import TritonServer

CRASH = "Failed to maintain requested inference load.\nThread [0] had error: Stub process 'crashy_0_0' is not healthy.\n"
RAISE = ("Thread [0] had error: Failed to process the request(s) for model 'raising_0_0', message: "
         "RuntimeError: the model says: weights missing\n")


def test_a_crashed_stub_is_a_model_crash_even_when_an_error_line_looks_like_an_option_error() -> None:
    found = classify("Error: something\n" + CRASH, returncode=99, option_error="something")
    assert found.failure is Failure.MODEL_CRASH and "model 'crashy'" in found.message


def test_a_model_that_raises_is_a_model_error_with_its_own_message() -> None:
    found = classify(RAISE, returncode=99)
    assert found.failure is Failure.MODEL_ERROR
    assert found.message == "model 'raising' raised: RuntimeError: the model says: weights missing"


@pytest.mark.parametrize(
    ("console", "kwargs", "expected"),
    [
        ("", {"returncode": None, "timed_out": True, "timeout_s": 4.0, "model": "m"}, Failure.TIMEOUT),
        ("", {"returncode": -9}, Failure.KILLED),
        ("Error: Invalid long option '--x'", {"returncode": 99, "option_error": "Invalid long option '--x'",
                                              "server_reachable": True}, Failure.REFUSED_OPTIONS),
        ("Error: Invalid long option '--x'", {"returncode": 99, "option_error": "Invalid long option '--x'",
                                              "server_reachable": False}, Failure.SERVER_LOST),
        ("error: Request for unknown model: 'm' is not found", {"returncode": 99, "server_reachable": True,
                                                                "model_ready": False, "model": "m"},
         Failure.MODEL_UNAVAILABLE),
        ("Thread [1] had error: failed to connect to all addresses", {"returncode": 99}, Failure.SERVER_LOST),
        ("Thread [1] had error: queue full", {"returncode": 99}, Failure.REQUEST_ERRORS),
        ("error: something odd", {"returncode": 1}, Failure.TOOL_ERROR),
    ],
)
def test_each_kind_of_failure_is_told_apart(console: str, kwargs: dict[str, object], expected: Failure) -> None:
    assert classify(console, **kwargs).failure is expected  # type: ignore[arg-type]


_BODY = """
import os, time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        {action}
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "INPUT0")
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", a.as_numpy()),
                                                                  pb_utils.Tensor("OUTPUT1", a.as_numpy())]))
        return out
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("failing_models")
    for name, action in (("sleepy", "time.sleep(12)"), ("crashy", "os._exit(3)"),
                         ("raising", "raise RuntimeError('the model says: weights missing')")):
        write_python_model(repo, name, config_pbtxt=ADD_SUB_CONFIG.format(name=name),
                           model_py=_BODY.format(action=action))
    with TritonServer(repo) as running:
        yield running


@pytest.mark.server
@pytest.mark.perf_analyzer
@pytest.mark.parametrize(("model", "failure", "words"), [
    ("crashy", "model_crash", "python stub of model 'crashy' crashed"),
    ("raising", "model_error", "the model says: weights missing"),
])
def test_a_failing_model_gives_a_failed_step_with_its_class_and_message(
    server: TritonServer, tmp_path: Path, model: str, failure: str, words: str
) -> None:
    # perf_analyzer reports a failed request at the end of its first window: a 1 s window, not the
    # default 5 s, tells the same failure sooner.
    spec = PerfSpec(model=model, url=server.grpc_url, measurement_interval_ms=1000)
    outcome = PerfAnalyzer(tmp_path).run(spec, "s1", timeout_s=60)
    [step] = outcome.steps
    assert not step.measured and step.failure == failure
    assert step.failure_note is not None and words in step.failure_note


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_model_slower_than_the_step_limit_is_a_timeout_naming_the_limit(server: TritonServer, tmp_path: Path) -> None:
    with pytest.raises(PerfTimeoutError) as info:
        PerfAnalyzer(tmp_path).run(PerfSpec(model="sleepy", url=server.grpc_url), "s1", timeout_s=4)
    assert isinstance(info.value, StepError) and info.value.failure is Failure.TIMEOUT
    assert getattr(info.value, "failure", None) == "timeout"  # what the sweep reads


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_ladder_step_whose_perf_analyzer_failed_is_stored_failed_never_measured(
    server: TritonServer, tmp_path: Path
) -> None:
    plan = LadderPlan(levels=(1, 2), step_window_ms=1000, max_trials=3)
    ladder = run_ladder(PerfSpec(model="sleepy", url=server.grpc_url), plan, results_dir=tmp_path,
                        analyzer=_ShortSteps(tmp_path))
    [step] = ladder.result.steps
    assert ladder.error is not None and getattr(ladder.error, "failure", None) == "timeout"
    assert step.load_value == 1.0 and not step.measured and step.failure == "timeout"


class _ShortSteps(PerfAnalyzer):
    """The real runner with a 4 s limit per step (the model sleeps 12 s per request)."""

    def run(self, spec: PerfSpec, name: str, **kwargs: object) -> object:  # type: ignore[override]
        kwargs["timeout_s"] = 4.0
        return super().run(spec, name, **kwargs)  # type: ignore[arg-type]
