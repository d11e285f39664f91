"""The readers a user feeds, each with a valid input to mutate and the check a mutant must pass.

A :class:`Reader` writes its valid files into a folder (``make``: the path of the one to mutate),
and ``check(folder, path)`` runs the reader on the mutated file the way a user reaches it: through
the command line (in-process, click's runner) where a command reads it, else at its library call.
A check fails (``AssertionError``) on a traceback, an undocumented exit status, an error that names
neither the file nor the field, a typed error other than the one documented, or a file written half.
The suite fuzzes each with hypothesis (tests/fuzz/test_reader_fuzz.py); the long campaign
(``python -m tests.fuzz.campaign``) counts outcomes over thousands of mutants per reader.
"""

from __future__ import annotations

import contextlib
import json
import os
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from tests.support.llm_models import saved_llm_result
from tritonkit.cli import main
from tritonkit.errors import ConfigError, TritonKitError
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepResult
from tritonkit.repository import read_config, serving_of

DATA = Path(__file__).resolve().parents[1] / "data" / "perf"


@dataclass(frozen=True)
class Reader:
    """One reader: ``make(folder)`` writes valid input and returns the file to mutate; ``check``
    runs the reader on it; ``as_json``: the file is JSON (or JSON Lines), mutated as such."""

    name: str
    make: Callable[[Path], Path]
    check: Callable[[Path, Path], None]
    as_json: bool = False


def crash(exc: BaseException) -> str:
    """A traceback's last line and the package frame it came from: how a crash is reported."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tritonkit" in f.filename] or \
        traceback.extract_tb(exc.__traceback__)[-1:]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno} {frames[-1].name}: " if frames else ""
    return f"traceback: {where}{''.join(traceback.format_exception_only(type(exc), exc)).strip()[:300]}"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    here = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def _verdict_of(output: str) -> int | None:
    """The exit status of the verdict ``--json`` printed, if it printed one (2: could not measure)."""
    try:
        return int(json.loads(output)["verdict"]["exit_code"])
    except (ValueError, KeyError, TypeError):
        return None


def cli(folder: Path, args: list[str], *, named: Path, codes: tuple[int, ...]) -> Result:
    """``tritonkit ARGS`` run in ``folder``, held to the invariants; exit 2 names ``named`` (the mutated
    file, or its model folder), unless it is a verdict's (a saved run with nothing measured: "could not
    measure"). No temp file is left; an error leaves the folder as it was."""
    before = _files(folder)
    with _inside(folder):
        result = CliRunner().invoke(main, args)
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        raise AssertionError(crash(exc))
    assert "Traceback" not in result.output, f"a traceback printed: {result.output[-300:]}"
    assert result.exit_code in codes, f"exit {result.exit_code}, not one of {codes}: {result.output[-300:]}"
    after = _files(folder)
    assert not [p for p in after if p.endswith(".tmp")], f"a temp file left: {sorted(after)}"
    if result.exit_code == 2 and _verdict_of(result.stdout) != 2:
        lines = result.output.splitlines()
        assert any(line.startswith("error: ") for line in lines), f"exit 2 without an error line: {result.output}"
        assert any(line.startswith("  fix: ") for line in lines), f"exit 2 without a fix line: {result.output}"
        assert named.name in result.output, f"the error names no {named.name}: {result.output[-300:]}"
        assert after == before, f"an error wrote {sorted(set(after) ^ set(before))}"
    return result


def library(call: Callable[[], Any], *, errors: type[TritonKitError] | tuple[type[TritonKitError], ...],
            named: str, also: type[Exception] | None = None) -> Any:
    """``call()``: its answer, or one of ``errors`` whose text names ``named`` (never another exception
    but ``also``, one the reader documents for its callers to catch)."""
    try:
        return call()
    except errors as exc:
        assert named in str(exc), f"{type(exc).__name__} names no {named}: {exc}"
        return None
    except Exception as exc:
        if also is None or not isinstance(exc, also):
            raise AssertionError(crash(exc)) from exc


# ---- config.pbtxt -------------------------------------------------------------------------------

CONFIG = """name: "m"
backend: "python"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching {
  preferred_batch_size: [ 2, 4 ]
  max_queue_delay_microseconds: 500
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 100000 max_queue_size: 16 }
}
version_policy { latest { num_versions: 1 } }
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]
"""
MODEL_PY = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""


def _repo(folder: Path) -> Path:
    model = folder / "repo" / "m"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(MODEL_PY)
    (model / "config.pbtxt").write_text(CONFIG)
    return model / "config.pbtxt"


def _model_py(folder: Path) -> Path:
    return _repo(folder).parent / "1" / "model.py"


def _lint(folder: Path, config: Path, repo: str = "repo") -> None:
    result = cli(folder, ["repo", "lint", repo, "--format", "json", "--target", "cpu"], named=config, codes=(0, 1, 2))
    if result.exit_code in (0, 1):
        report = json.loads(result.stdout)
        assert report["internal_errors"] == 0, f"a rule failed: {[f for f in report['findings'] if f['rule'] == 'TK000']}"
        if result.exit_code == 1:
            assert all(f["file"] or f["field"] for f in report["findings"] if f["severity"] == "error"), report


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "max_position_embeddings": 2048,
         "intermediate_size": 512, "torch_dtype": "float16"}


def _built(folder: Path, *build: str) -> None:
    """A repository ``tritonkit build`` writes for a small Hugging Face config, into ``folder``/repo."""
    (folder / "hf").mkdir()
    (folder / "hf" / "config.json").write_text(json.dumps(LLAMA))
    with _inside(folder):
        result = CliRunner().invoke(main, ["build", *build, "--hf-model", "hf", "--repo", "repo"])
    assert result.exit_code == 0, result.output


def _vllm_repo(folder: Path) -> Path:
    _built(folder, "vllm")
    return folder / "repo" / "vllm_model" / "1" / "model.json"


def _llmapi_repo(folder: Path) -> Path:
    _built(folder, "trtllm", "--engine", "llmapi")
    return folder / "repo" / "tensorrt_llm" / "1" / "model.yaml"


def _show(folder: Path, config: Path) -> None:
    cli(folder, ["repo", "show", "repo"], named=config, codes=(0, 2))
    cli(folder, ["repo", "show", "repo/m", "--format", "json"], named=config, codes=(0, 2))


def _typed(folder: Path, config: Path) -> None:
    def read() -> Any:
        return serving_of(read_config(config)).describe()
    library(read, errors=ConfigError, named=str(config))


# ---- saved results ------------------------------------------------------------------------------


def _result(folder: Path) -> Path:
    result = PerfResult(
        RunMetadata(model="resnet", url="127.0.0.1:1", protocol="grpc", started_utc="2026-11-29T10:15:00Z"),
        steps=[StepResult("concurrency", load, 100.0 * load,
                          LatencyStats(p50_ms=5.0, p90_ms=9.0, p95_ms=9.5, p99_ms=10.0 + load, mean_ms=5.5))
               for load in (1.0, 2.0, 4.0)])
    (folder / "base").mkdir()
    (folder / "new").mkdir()
    result.save(folder / "base" / "result.json")
    return result.save(folder / "new" / "result.json")


def _llm_result(folder: Path) -> Path:
    saved_llm_result(folder / "base", 10)
    return saved_llm_result(folder / "new", 11)


def _compare(folder: Path, new: Path) -> None:
    result = cli(folder, ["perf", "compare", "base", f"new/{new.name}", "--save-baseline"], named=new,
                 codes=(0, 1, 2, 3))
    saved = list((folder / "results" / "baselines").rglob("*.json")) if (folder / "results").exists() else []
    assert (result.exit_code == 0) == bool(saved), f"exit {result.exit_code} with baselines {saved}"
    for path in saved:
        json.loads(path.read_text())  # whole


def _baseline(folder: Path, make: Callable[[Path], Path]) -> Path:
    """A model's baseline folder (two baselines: the newest is mutated) and a new run beside it."""
    from tritonkit.perf.judge.baselines import save_baseline
    from tritonkit.perf.llm.result import LLMResult

    new = make(folder)
    kind = LLMResult if new.name == "llm_result.json" else PerfResult
    result = kind.load(new)
    save_baseline(replace(result, started_utc="2026-11-01T00:00:00.000000Z") if kind is LLMResult else
                  replace(result, metadata=replace(result.metadata, started_utc="2026-11-01T00:00:00Z")),
                  folder / "results" / "baselines")
    return save_baseline(result, folder / "results" / "baselines")


def _against_baseline(folder: Path, baseline: Path) -> None:
    model_folder = next(p for p in baseline.parents if p.parent.name == "baselines")
    new = folder / "new" / ("llm_result.json" if baseline.parent.name == "llm" else "result.json")
    cli(folder, ["perf", "compare", str(model_folder.relative_to(folder)), str(new.relative_to(folder))],
        named=baseline, codes=(0, 1, 2, 3))


def _report(folder: Path, new: Path, sla: str) -> None:
    result = cli(folder, ["perf", "report", f"new/{new.name}", "--sla", sla, "--json"], named=new, codes=(0, 1, 2, 3))
    if result.exit_code != 2 or _verdict_of(result.stdout) == 2:
        written = json.loads(result.stdout)
        assert written, result.stdout
        reports = [p for p in (folder / "new").iterdir() if "report" in p.name]
        assert reports and all(p.stat().st_size > 0 for p in reports), f"reports {reports}"


def _sla_file(folder: Path) -> Path:
    path = folder / "sla.yaml"
    path.write_text("# the service's targets\np99: 50ms\nthroughput: 200/s\nerror_rate: 1%\n")
    return path


def _run_sla(folder: Path, sla: Path) -> None:
    result = cli(folder, ["perf", "run", "m", "--url", "127.0.0.1:1", "--dry-run", "--sla", sla.name], named=sla,
                 codes=(0, 2))
    assert result.exit_code == 2 or "# SLA: " in result.output, result.output
    assert not (folder / "results").exists(), "a dry run wrote results"


# ---- prompts and replay logs ------------------------------------------------------------------


def _prompts(folder: Path) -> Path:
    path = folder / "prompts.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in [
        {"text": "Hello there", "output_tokens": 32}, {"text": "a b c d", "output_tokens": 4, "input_tokens": 4},
        {"prompt": "Why?", "max_tokens": 8}, {"text_input": "é unicode ✓", "output_tokens": 1}]))
    return path


def _replay(folder: Path) -> Path:
    path = folder / "replay.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in [
        {"timestamp_ms": 0, "input_tokens": 100, "output_tokens": 20}, {"timestamp_ms": 12.5, "isl": 8, "osl": 4},
        {"timestamp": 250, "input_length": 3, "output_length": 1}, {"timestamp_ms": 1000, "input_tokens": 1, "output_tokens": 1}]))
    return path


def _dry_run(folder: Path, path: Path, *args: str) -> None:
    cli(folder, ["perf", "run", "m", "--llm", "--url", "127.0.0.1:1", "--dry-run", *args], named=path, codes=(0, 2))
    assert not (folder / "results").exists(), "a dry run wrote results"


# ---- the sweep folder's records -----------------------------------------------------------------


def _outcome(folder: Path) -> Path:
    from tritonkit.perf.sweep import StepPoint, SweepStore, Variant, VariantOutcome

    store = SweepStore(folder / "sweep")
    store.begin({"sla": "p99<=50ms"})
    variant = Variant(instances=2, max_batch_size=4, window_us=500)
    steps = [StepPoint(load, 100.0 * load, 5.0 + load, meets_sla=True) for load in (1.0, 2.0, 4.0)]
    return store.save(VariantOutcome(variant, steps=steps, exec_cost_us={1: 120.0, 4: 300.0}))


def _sweep_resume(folder: Path, path: Path) -> None:
    from tritonkit.perf.sweep import SweepStore
    from tritonkit.perf.sweep.outcome import StoredResultError

    store = SweepStore(folder / "sweep")
    store.begin({"sla": "p99<=50ms"})
    library(lambda: store.load(path.parent.name), errors=StoredResultError, named=str(path))


def _sweep_record(folder: Path) -> Path:
    _outcome(folder)
    return folder / "sweep" / "sweep.json"


def _sweep_begin(folder: Path, path: Path) -> None:
    from tritonkit.perf.sweep import SweepStore

    # a changed settings field is refused naming the sweep folder (whose record it is)
    library(lambda: SweepStore(folder / "sweep").begin({"sla": "p99<=50ms"}), errors=ConfigError,
            named=str(path.parent))


def _joint(folder: Path) -> Path:
    """A joint sweep's stored outcome: two models' variants and their joint ladder."""
    from tritonkit.perf.sweep import StepPoint, Variant
    from tritonkit.perf.sweep.joint import JointOutcome, JointStep
    from tritonkit.perf.sweep.joint_store import JointStore

    variants = {"a": Variant(instances=2, max_batch_size=4, window_us=500), "b": Variant(instances=1, max_batch_size=8, window_us=0)}
    steps = [JointStep(total, {m: StepPoint(total / 2, 50.0 * total, 5.0 + total, meets_sla=True) for m in variants})
             for total in (2.0, 4.0)]
    return JointStore(folder / "sweep").save(JointOutcome("a+b", variants, steps, duration_s=12.5))


def _read_joint(folder: Path, path: Path) -> None:
    from tritonkit.perf.sweep import Variant
    from tritonkit.perf.sweep.joint_store import JointStore
    from tritonkit.perf.sweep.outcome import StoredResultError

    variants = {"a": Variant(instances=2, max_batch_size=4, window_us=500), "b": Variant(instances=1, max_batch_size=8, window_us=0)}
    library(lambda: JointStore(folder / "sweep").load(variants), errors=StoredResultError, named=str(path))


def _journal(folder: Path) -> Path:
    """The journal a sweep on a server tritonkit did not start keeps of the configs it must put back."""
    from tritonkit.perf.sweep.journal import JOURNAL_NAME, config_dict
    from tritonkit.repository.pbtxt import parse_config

    path = folder / "sweep" / JOURNAL_NAME
    path.parent.mkdir()
    path.write_text(json.dumps({"url": "127.0.0.1:8001", "server_version": "2.51.0", "status": "open",
                                "configs": {"m": config_dict(parse_config(CONFIG))}, "pid": 123,
                                "started_utc": "2026-11-29T10:15:00Z", "closed_utc": None, "note": ""}))
    return path


def _read_journal(folder: Path, path: Path) -> None:
    from tritonkit.perf.sweep.journal import Journal

    def read() -> Any:
        journal = Journal.read(path.parent)
        return journal and [journal.config(model) for model in journal.configs]
    library(read, errors=ConfigError, named=str(path))


READERS = {r.name: r for r in [
    Reader("config.pbtxt lint", _repo, _lint),
    Reader("config.pbtxt show", _repo, _show),
    Reader("config.pbtxt typed", _repo, _typed),
    Reader("python model.py", _model_py, _lint),
    Reader("vLLM model.json", _vllm_repo, _lint, as_json=True),
    Reader("LLM-API model.yaml", _llmapi_repo, _lint),
    Reader("result.json compare", _result, _compare, as_json=True),
    Reader("result.json report", _result, lambda f, p: _report(f, p, "p99<=50ms"), as_json=True),
    Reader("llm_result.json compare", _llm_result, _compare, as_json=True),
    Reader("llm_result.json report", _llm_result, lambda f, p: _report(f, p, "itl_p99<=15ms"), as_json=True),
    Reader("classic baseline", lambda f: _baseline(f, _result), _against_baseline, as_json=True),
    Reader("llm baseline", lambda f: _baseline(f, _llm_result), _against_baseline, as_json=True),
    Reader("SLA file", _sla_file, _run_sla),
    Reader("prompt file", _prompts, lambda f, p: _dry_run(f, p, "--prompts", p.name), as_json=True),
    Reader("replay log", _replay, lambda f, p: _dry_run(f, p, "--traffic", f"replay:{p.name}"), as_json=True),
    Reader("sweep outcome.json", _outcome, _sweep_resume, as_json=True),
    Reader("sweep.json", _sweep_record, _sweep_begin, as_json=True),
    Reader("sweep journal", _journal, _read_journal, as_json=True),
    Reader("joint sweep outcome.json", _joint, _read_joint, as_json=True),
]}
