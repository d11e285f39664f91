"""A corpus of real architectures, each built, served, called and load-tested as a user would.

BERT-, GPT-2- (50k vocabulary), ViT- and ResNet-shaped models from transformers with random
weights, exported by torch's current exporter (model.onnx + external data); a scikit-learn
classifier (skl2onnx, no ZipMap), a LightGBM classifier (onnxmltools, whose label is declared
``[1]``: built with ``--batch-output label``) and a TF-IDF vectorizer on string input (converted
with ``locale='C.UTF-8'``, which every machine has). One real server serves the whole corpus;
every answer is compared with ONNX Runtime on the exported file, and ``perf run`` works on every
model with nothing but ``--repo`` (derived data, ``--check-outputs``).

The GPT-2 export is overwritten in place after its build: the server must still answer with the
weights it was built from. A python-backend model that answers in a shape unlike its config
must fail ``perf run``; one that answers other numbers must fail ``perf run --check-outputs``.

The table of results (model, build, serve, max abs diff, perf run) is printed by the last test
(``-s`` shows it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support import corpus_models as corpus
from tests.support.misbehaving_models import WRONG_SHAPE_PY, WRONG_VALUES_PY, build_misbehaving
from tritonkit.builders import OnnxBuildResult, build_onnx, ort_runner
from tritonkit.cli import main
from tritonkit.client import Client
from tritonkit.perf.measure.input_data import SeqLen, derive_samples
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

SEQ_LEN = "8:16"  # within the tiny text models' 64 positions


def _export_tfidf(folder: Path) -> Path:
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.feature_extraction.text import TfidfVectorizer

    texts = ["tritonkit sample text", "a dog ran far", "the cat sat down", "sample text about cats"]
    vectorizer = TfidfVectorizer().fit(texts)
    onx = to_onnx(vectorizer, initial_types=[("text", StringTensorType([None, 1]))], target_opset=17,
                  options={id(vectorizer): {"locale": "C.UTF-8"}})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tfidf.onnx"
    path.write_bytes(onx.SerializeToString())
    return path


EXPORTERS: dict[str, tuple[Callable[[Path], Path], dict[str, object]]] = {
    "bert": (corpus.export_bert, {}),
    "gpt2": (corpus.export_gpt2, {}),
    "vit": (corpus.export_vit, {}),
    "resnet": (corpus.export_resnet, {}),
    "sklearn": (corpus.export_sklearn, {}),
    "lightgbm": (corpus.export_lightgbm, {"batch_outputs": ("label",)}),
    "tfidf": (_export_tfidf, {}),
}

@dataclass
class Entry:
    """One corpus model: its export, its build, what ONNX Runtime answered before any overwrite."""

    name: str
    source: Path
    build: OnnxBuildResult
    samples: list[dict[str, np.ndarray]]
    expected: list[dict[str, np.ndarray]]
    row: dict[str, str] = field(default_factory=dict)


TABLE: dict[str, dict[str, str]] = {}


def _batched(sample: dict[str, np.ndarray], batched: bool) -> dict[str, np.ndarray]:
    return {k: (v[np.newaxis] if batched else v) for k, v in sample.items()}


@pytest.fixture(scope="module")
def entries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Entry]:
    src = tmp_path_factory.mktemp("corpus_src")
    repo = tmp_path_factory.mktemp("corpus") / "model_repository"
    found: dict[str, Entry] = {}
    for name, (export, options) in EXPORTERS.items():
        source = export(src / name)
        build = build_onnx(source, name=name, repo=repo, runtime="python", kind="cpu", **options)  # type: ignore[arg-type]
        batched = build.max_batch_size > 0
        samples, _notes = derive_samples(source, batched=batched, seq_len=SeqLen.parse(SEQ_LEN), count=2)
        reference = ort_runner(source)
        expected = [{k: np.asarray(v) for k, v in reference(_batched(s, batched)).items()} for s in samples]
        found[name] = Entry(name, source, build, samples, expected)
        TABLE[name] = {"build": f"ok (max_batch_size {build.max_batch_size})"}
    # Overwrite the GPT-2 weights in place (same inode), as a re-export with new weights would.
    for file in sorted(found["gpt2"].source.parent.glob("*.data")):
        size = file.stat().st_size
        with file.open("r+b") as fh:
            fh.seek(size // 2)
            fh.write(b"\x3f" * (size - size // 2))
    build_misbehaving(src, repo, "wrong_shape", WRONG_SHAPE_PY)
    build_misbehaving(src, repo, "wrong_values", WRONG_VALUES_PY)
    return found


@pytest.fixture(scope="module")
def server(entries: dict[str, Entry]) -> Iterator[TritonServer]:
    repo = next(iter(entries.values())).build.repo
    with TritonServer(repo, startup_timeout_s=240.0) as running:
        yield running


def test_every_corpus_model_loads_in_the_real_server(entries: dict[str, Entry], server: TritonServer) -> None:
    for name in entries:
        assert server.model_ready(name), name
        TABLE[name]["serve"] = "ready"


def test_every_corpus_model_answers_like_onnx_runtime_on_its_export(entries: dict[str, Entry],
                                                                   server: TritonServer) -> None:
    with Client(server.grpc_url, timeouts=60.0) as client:
        for name, entry in entries.items():
            batched = entry.build.max_batch_size > 0
            worst = 0.0
            for sample, expected in zip(entry.samples, entry.expected, strict=True):
                got = client.infer(name, _batched(sample, batched))
                assert set(got) == set(expected), name
                for output, want in expected.items():
                    served = np.asarray(got[output])
                    if batched and want.ndim == 1:
                        # Triton has no per-item scalar: the build declares dims [1] with reshape [] (the
                        # WAR in builders/onnx_steps), so clients get [batch, 1] for ORT's [batch].
                        want = want[:, np.newaxis]
                    assert served.shape == want.shape, (name, output)
                    if want.dtype.kind == "f":
                        assert served.dtype == want.dtype, (name, output)
                        diff = float(np.max(np.abs(served.astype(np.float64) - want))) if want.size else 0.0
                        assert diff <= 1e-5 + 1e-4 * float(np.max(np.abs(want))), (name, output, diff)
                        worst = max(worst, diff)
                    else:
                        np.testing.assert_array_equal(served, want, err_msg=f"{name}.{output}")
            TABLE[name]["infer max abs diff"] = f"{worst:.2e}"


def test_overwriting_the_gpt2_export_did_not_change_what_the_server_serves(entries: dict[str, Entry],
                                                                          server: TritonServer) -> None:
    entry = entries["gpt2"]
    overwritten = ort_runner(entry.source)(_batched(entry.samples[0], True))["logits"]
    assert not np.allclose(overwritten, entry.expected[0]["logits"])  # the source really changed
    with Client(server.grpc_url, timeouts=60.0) as client:
        served = np.asarray(client.infer("gpt2", _batched(entry.samples[0], True))["logits"])
    np.testing.assert_allclose(served, entry.expected[0]["logits"], rtol=1e-4, atol=1e-5)


def _perf_run(server: TritonServer, model: str, folder: Path, *args: str) -> tuple[int, str, str]:
    # One-second windows: the two shared cores make shorter ones disagree by more than 10 % too often.
    result = CliRunner().invoke(main, ["perf", "run", model, "--url", server.grpc_url, "--concurrency", "1",
                                       "--duration-s", "3", "--warmup-s", "1", "--max-trials", "10",
                                       "--out", str(folder), "--json", *args])
    return result.exit_code, result.stdout, result.stderr


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("name", list(EXPORTERS))
def test_perf_run_works_out_of_the_box_with_checked_outputs(entries: dict[str, Entry], server: TritonServer,
                                                            tmp_path: Path, name: str) -> None:
    repo = entries[name].build.repo
    code, stdout, stderr = _perf_run(server, name, tmp_path / name, "--repo", str(repo), "--seq-len", SEQ_LEN,
                                     "--check-outputs")
    assert code == 0, stdout + stderr
    summary = json.loads(stdout)
    assert summary["steps"] and summary["steps"][0]["errors"] == 0
    assert any(n.startswith("input data: input data derived from") for n in summary["notes"])
    saved = json.loads((tmp_path / name / "result.json").read_text())
    assert any("outputs go to system shared memory" in n for n in saved["extra"]["input_data"])
    assert "match ONNX Runtime" in stdout + stderr
    # The files of the try kept for the step (on a busy machine a first, unstable try is measured again).
    kept = saved["steps"][0]["raw_files"]
    argv = json.loads((tmp_path / name / next(f for f in kept if f.endswith(".argv.json"))).read_text())
    assert "--input-data" in argv and "--shared-memory" in argv
    # Outputs stay out of the export: a few hundred bytes per request, whatever the vocabulary.
    export = tmp_path / name / next(f for f in kept if f.endswith(".json") and not f.endswith(".argv.json"))
    requests = sum(len(e["requests"]) for e in json.loads(export.read_text())["experiments"])
    assert export.stat().st_size < 1000 * max(requests, 1)
    TABLE[name]["perf run"] = (f"exit 0, {summary['steps'][0]['throughput_per_s']:.0f} infer/s, "
                               f"outputs checked, results {_folder_bytes(tmp_path / name) / 1e3:.0f} kB")


def test_random_token_ids_are_could_not_measure_with_the_servers_message(entries: dict[str, Entry],
                                                                       server: TritonServer, tmp_path: Path) -> None:
    """Without the model file perf_analyzer's random int64 ids fall outside the vocabulary."""
    code, _stdout, stderr = _perf_run(server, "gpt2", tmp_path / "random", "--shape", "input_ids:8",
                                      "--input-data", "random", "--stop-after", "1")
    assert code == 2, stderr
    error = next(line for line in stderr.splitlines() if line.startswith("error: "))
    assert "requests to model 'gpt2' failed at concurrency 1" in error
    assert "Thread [" in error  # the server's own words, as perf_analyzer relays them
    assert "--repo" in stderr


def test_variable_dims_without_a_model_file_name_the_options_that_supply_them(entries: dict[str, Entry],
                                                                            server: TritonServer,
                                                                            tmp_path: Path) -> None:
    code, _stdout, stderr = _perf_run(server, "bert", tmp_path / "nodata")
    assert code == 2
    assert "'input_ids' [-1]" in stderr and "variable dims" in stderr
    assert "--shape input_ids:128" in stderr and "--repo DIR" in stderr and "--input-data FILE.json" in stderr
    assert not (tmp_path / "nodata" / "result.json").exists()


def test_a_model_answering_in_the_wrong_shape_fails_perf_run(entries: dict[str, Entry], server: TritonServer,
                                                            tmp_path: Path) -> None:
    repo = entries["bert"].build.repo
    code, _stdout, stderr = _perf_run(server, "wrong_shape", tmp_path / "wrong", "--repo", str(repo))
    assert code == 1
    assert "output 'y' has shape [1, 3] but the model declares [1, 4]" in stderr


def test_wrong_answers_under_load_fail_check_outputs_naming_the_output(entries: dict[str, Entry],
                                                                       server: TritonServer, tmp_path: Path) -> None:
    repo = entries["bert"].build.repo
    code, _stdout, stderr = _perf_run(server, "wrong_values", tmp_path / "values", "--repo", str(repo),
                                      "--check-outputs")
    assert code == 1, stderr
    assert "outputs checked under load:" in stderr
    assert "output 'y' differs from ONNX Runtime by" in stderr


def test_zz_print_the_corpus_table(entries: dict[str, Entry]) -> None:
    columns = ["build", "serve", "infer max abs diff", "perf run"]
    lines = ["| model | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name in entries:
        lines.append(f"| {name} | " + " | ".join(TABLE[name].get(c, "-") for c in columns) + " |")
    print("\n" + "\n".join(lines))
    assert all("build" in TABLE[name] for name in entries)
