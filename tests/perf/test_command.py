"""``perf run`` as one library call (:func:`load_test`, :func:`llm_load_test`): what the command
does, a library caller gets too: the repository guessed, input data derived, a dry run that starts
and writes nothing, a preflight that refuses a wrong answer before any load.

The pure tests point at a port nothing listens on (a dry run never needs the server); the others
serve, on a real server, the demo MLP built with the python runtime and a copy of it whose
``model.py`` answers in a shape unlike its config.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.misbehaving_models import WRONG_SHAPE_PY, build_misbehaving
from tritonkit.builders import build_onnx, make_demo_model
from tritonkit.errors import ConfigError
from tritonkit.perf import LLMSettings, LoadTestSettings, llm_load_test, load_test
from tritonkit.perf.command import DEFAULT_REPOSITORY
from tritonkit.perf.measure.result import PerfResult
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall
from tritonkit.server import TritonServer

_TOOL = PerfAnalyzerInstall(argv=("/opt/pa",), source="--perf-analyzer", mode="external", binary=Path("/opt/pa"))


def _closed_port() -> str:
    """A loopback address nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


# ---- pure: nothing is started ------------------------------------------------------------------


def test_a_dry_run_returns_every_command_and_writes_nothing(tmp_path: Path) -> None:
    settings = LoadTestSettings(url=_closed_port(), sla="p99<=50ms", concurrency="1,2", warmup_s=2,
                                out=tmp_path / "never", perf_analyzer=_TOOL)
    test = load_test("m", settings, dry_run=True)
    assert test.planned is not None and test.run is None and test.exit_code == 0
    assert [(c.name, c.recorded) for c in test.planned] == [("warmup", False), ("step01-c1", True),
                                                            ("step02-c2", True)]
    assert all(c.argv[0] == "/opt/pa" and "-m" in c.argv for c in test.planned)
    assert str(test.sla) == "p99<=50ms,errors==0"  # as it will be judged
    assert test.results_dir == tmp_path / "never" and not test.results_dir.exists()


def test_a_dry_run_without_perf_analyzer_says_so_and_shows_its_name(tmp_path: Path) -> None:
    settings = LoadTestSettings(url=_closed_port(), concurrency="1", warmup_s=0, out=tmp_path / "never",
                                perf_analyzer=tmp_path / "no_such_binary")
    test = load_test("m", settings, dry_run=True)
    assert test.planned is not None and [c.argv[0] for c in test.planned] == ["perf_analyzer"]
    assert len(test.notes) == 1 and "no_such_binary" in test.notes[0]
    assert test.notes[0].endswith("showing 'perf_analyzer' in its place")


def test_the_repository_is_the_given_one_else_model_repository_when_it_holds_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert LoadTestSettings().model_repository("mlp") is None
    (tmp_path / DEFAULT_REPOSITORY / "other").mkdir(parents=True)
    assert LoadTestSettings().model_repository("mlp") is None  # it does not hold mlp
    (tmp_path / DEFAULT_REPOSITORY / "mlp").mkdir()
    assert LoadTestSettings().model_repository("mlp") == DEFAULT_REPOSITORY
    assert LoadTestSettings(repo=tmp_path / "mine").model_repository("mlp") == tmp_path / "mine"


def test_the_url_defaults_to_the_local_port_of_the_protocol() -> None:
    assert LoadTestSettings().target_url() == "127.0.0.1:8001"
    assert LoadTestSettings(protocol="http").target_url() == "127.0.0.1:8000"
    assert LoadTestSettings(url="h:1", protocol="http").target_url() == "h:1"


def test_bad_settings_are_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--concurrency and --request-rate both given"):
        load_test("m", LoadTestSettings(url=_closed_port(), concurrency="1", request_rate="5", out=tmp_path / "x"),
                  dry_run=True)
    with pytest.raises(ConfigError, match="--seq-len"):
        load_test("m", LoadTestSettings(url=_closed_port(), seq_len="0", out=tmp_path / "x"), dry_run=True)
    assert not (tmp_path / "x").exists()


def test_an_llm_dry_run_describes_the_load_without_contacting_the_server(tmp_path: Path) -> None:
    where = LoadTestSettings(url=_closed_port(), out=tmp_path / "dry")
    test = llm_load_test("m", LLMSettings(traffic="soak:2/s,30", num_prompts=3), where, dry_run=True)
    assert test.dry_run and test.run is None and test.exit_code == 0
    assert test.load == "soak:2/s,30" and test.prompts.startswith("synthetic (seed 0, 3 prompts")
    assert test.plan_line().startswith(f"would run an LLM load test on m at {where.url}: soak:2/s,30; prompts: ")
    assert "tokenizer is looked up on the server" in test.plan_line()
    assert not (tmp_path / "dry").exists()


def test_an_llm_load_test_refuses_a_missing_repository_and_http_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such folder"):
        llm_load_test("m", LLMSettings(repo=tmp_path / "nowhere"), dry_run=True)
    with pytest.raises(ConfigError, match="not Triton.s HTTP"):
        llm_load_test("m", LLMSettings(), LoadTestSettings(protocol="http"), dry_run=True)
    with pytest.raises(ConfigError, match="wave"):
        llm_load_test("m", LLMSettings(traffic="wave:3"), dry_run=True)


# ---- a real server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonServer, Path]]:
    """The folder holding ``model_repository`` (mlp, and wrong_shape answering [batch, 3] for [batch, 4])."""
    home = tmp_path_factory.mktemp("home")
    repo = home / DEFAULT_REPOSITORY
    source = make_demo_model(home / "mlp.onnx")
    build_onnx(source, name="mlp", repo=repo, runtime="python", kind="cpu")
    build_misbehaving(home, repo, "wrong_shape", WRONG_SHAPE_PY)
    with TritonServer(repo) as server:
        yield server, home


@pytest.mark.server
def test_a_dry_run_derives_data_from_the_guessed_repository_but_writes_none(
    served: tuple[TritonServer, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, home = served
    monkeypatch.chdir(home)
    test = load_test("mlp", LoadTestSettings(url=server.grpc_url, concurrency="1", warmup_s=0, out=tmp_path / "dry",
                                             perf_analyzer=_TOOL), dry_run=True)
    assert test.planned is not None
    argv = test.planned[0].argv
    assert argv[argv.index("--input-data") + 1] == str(tmp_path / "dry" / "input_data.json")
    assert argv[argv.index("--shared-memory") + 1] == "system"  # a local server: outputs stay out of perf_analyzer
    assert not (tmp_path / "dry").exists()


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_the_preflight_refuses_a_model_answering_unlike_its_config_and_measures_nothing(
    served: tuple[TritonServer, Path], tmp_path: Path
) -> None:
    server, home = served
    steps: list[object] = []
    test = load_test("wrong_shape", LoadTestSettings(url=server.grpc_url, repo=home / DEFAULT_REPOSITORY,
                                                     concurrency="1", duration_s=1.5, warmup_s=0,
                                                     out=tmp_path / "wrong"), on_step=steps.append)
    assert test.wrong_outputs == ["output 'y' has shape [1, 3] but the model declares [1, 4]"]
    assert test.exit_code == 1 and test.run is None and steps == []
    assert not (tmp_path / "wrong" / "result.json").exists()


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_run_from_the_guessed_repository_derives_data_and_checks_answers_under_load(
    served: tuple[TritonServer, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, home = served
    monkeypatch.chdir(home)
    lines: list[str] = []
    test = load_test("mlp", LoadTestSettings(url=server.grpc_url, sla="p99<=2000ms", concurrency="1", duration_s=1.5,
                                             warmup_s=0, max_trials=10, check_outputs=True, out=tmp_path / "run"),
                     progress=lines.append)
    assert test.run is not None, test
    assert test.exit_code == 0, (test.run.verdict, test.output_check)
    assert lines[0] == "SLA: p99<=2000ms,errors==0"
    assert any(n.startswith("input data: input data derived from model_repository/mlp/1/model.onnx")
               for n in test.run.notes)
    assert test.output_check is not None and test.output_check.ok and test.output_check.checked > 0
    assert (tmp_path / "run" / "input_data.json").is_file() and (tmp_path / "run" / "result.json").is_file()
    # The ONNX model is served by the python stand-in, and the result says so, not "onnxruntime".
    runtime = PerfResult.load(tmp_path / "run" / "result.json").metadata.runtime
    assert runtime is not None and (runtime.backend, runtime.stand_in, runtime.engine) == ("python", True, "ONNX Runtime")
    assert runtime.server_version == server.version()
    # The server's own facts, as its metadata lists them: the protocol extensions it speaks.
    assert "model_repository" in runtime.server_extensions and "system_shared_memory" in runtime.server_extensions
    assert runtime.runtime_library == ""  # the config names no runtime library: the backend's own
    assert "the python stand-in (tritonkit's model.py running ONNX Runtime" in (tmp_path / "run" / "report.md").read_text()
