"""Values checked for what they mean, each refused as the command line is read: exit 2, one ``error:``
line naming the option (or file field) and the value, a ``fix:`` line, no traceback — and nothing
written (the repository, the manifests folder, the results folder stay absent).

Each case is a value a person could type that used to be a traceback or a silent exit 0: a port
in a Unicode digit, an IPv6 host without brackets, counts past any real cluster, NaN in a Hugging
Face config, a name that is not UTF-8, an unbalanced quote, a path under /proc, an --llm-arg that
would have the server load another folder. No server or perf_analyzer is started: the refusals
come before anything runs (dry runs check what a real run checks).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.onnx_models import make_cnn, save
from tests.support.trtllm import write_hf_model
from tritonkit.cli import main

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "max_position_embeddings": 2048,
         "intermediate_size": 512, "torch_dtype": "float16"}


def _hf(tmp: Path, name: str, text: str) -> str:
    folder = tmp / name
    folder.mkdir()
    (folder / "config.json").write_text(text)
    return str(folder)


def _llama_with(tmp: Path, name: str, **fields: object) -> str:
    return _hf(tmp, name, json.dumps({**LLAMA, **fields}))


def _repo(tmp: Path) -> str:
    repo = tmp / "repo"
    result = CliRunner().invoke(main, ["repo", "add", str(repo), "--name", "m", "--backend", "python",
                                       "--input", "x:FP32:4", "--output", "y:FP32:4"])
    assert result.exit_code == 0, result.output
    return str(repo)


# (case id, arguments built from a temporary folder, what the error line holds first, then what it or the fix holds)
Case = tuple[str, Callable[[Path], list[str]], tuple[str, ...]]
CASES: list[Case] = [
    ("url-unicode-digit", lambda t: ["perf", "run", "m", "--url", "127.0.0.1:²", "--dry-run"], ("--url", "'²'")),
    ("infer-url-unicode-digit", lambda t: ["infer", "m", "--url", "127.0.0.1:²"], ("--url", "ASCII digits")),
    ("lint-server-unicode-digit", lambda t: ["repo", "lint", str(t), "--server", "h:١٢"], ("--server", "ASCII")),
    ("cluster-unicode-digit", lambda t: ["perf", "run", "m", "--cluster", "127.0.0.1:²", "--dry-run"],
     ("--cluster", "ASCII digits")),
    ("cluster-colon-alone", lambda t: ["perf", "run", "m", "--cluster", ":", "--dry-run"], ("--cluster", "':'")),
    ("cluster-port-past-65535", lambda t: ["perf", "run", "m", "--cluster", "host:99999", "--dry-run"],
     ("--cluster", "99999")),
    ("cluster-ipv6-without-brackets", lambda t: ["perf", "run", "m", "--cluster", "::1:6379", "--dry-run"],
     ("--cluster", "[::1]:6379")),
    ("cluster-with-a-space", lambda t: ["perf", "run", "m", "--cluster", "a b", "--dry-run"], ("--cluster", "'a b'")),
    ("sweep-cluster-ipv6", lambda t: ["perf", "sweep", _repo(t), "m", "--sla", "p99<=5ms", "--cluster", "::1:6379"],
     ("--cluster", "[::1]:6379")),
    ("clients-a-million", lambda t: ["perf", "run", "m", "--cluster", "127.0.0.1:6379", "--clients", "1000000",
                                     "--dry-run"], ("--clients", "1000000", "256")),
    ("hf-config-nan", lambda t: ["plan", "--hf-config", _hf(t, "nan", json.dumps(LLAMA).replace("256", "NaN", 1)),
                                 "--gpu", "H100"], ("'hidden_size'", "not a finite number")),
    ("hf-config-infinite-positions", lambda t: ["build", "vllm", "--hf-model", _hf(
        t, "inf", json.dumps(LLAMA).replace("2048", "1e999")), "--repo", str(t / "out")],
     ("'max_position_embeddings'", "not a finite number")),
    ("hf-config-negative-experts", lambda t: ["plan", "--hf-config", _llama_with(
        t, "moe", num_local_experts=-8, num_experts_per_tok=2), "--gpu", "H100"], ("'num_local_experts'", "-8")),
    ("trtllm-hf-config-infinity", lambda t: ["build", "trtllm", "--engine", "llmapi", "--hf-model", _hf(
        t, "inf2", json.dumps(LLAMA).replace("1000", "Infinity")), "--repo", str(t / "out")], ("'vocab_size'",)),
    ("name-not-utf8", lambda t: ["build", "onnx", str(save(make_cnn(), t / "m.onnx")), "--name", "caf\udce9",
                                 "--repo", str(t / "out")], ("--name", "not UTF-8")),
    ("model-argument-not-utf8", lambda t: ["perf", "run", "caf\udce9", "--dry-run"], ("argument", "not UTF-8")),
    ("newline-in-repo", lambda t: ["build", "onnx", str(save(make_cnn(), t / "m.onnx")), "--name", "m",
                                   "--repo", str(t / "a\nb")], ("--repo", "control character")),
    ("job-unbalanced-quote", lambda t: ["deploy", "ray-cluster", "--image", "img:1", "--job", "perf sweep 'x",
                                        "--out", str(t / "out")], ("--job", "No closing quotation")),
    ("ray-out-under-proc", lambda t: ["deploy", "ray-cluster", "--image", "img:1", "--out", "/proc/x"],
     ("/proc/x", "cannot write")),
    ("k8s-out-under-proc", lambda t: ["deploy", "k8s", _repo(t), "--image", "img:1", "--out", "/proc/x"],
     ("/proc/x", "cannot write")),
    ("gpu-workers-a-billion", lambda t: ["deploy", "ray-cluster", "--image", "img:1", "--gpu-workers", "1000000000",
                                         "--out", str(t / "out")], ("--gpu-workers", "1000")),
    ("object-store-past-memory", lambda t: ["deploy", "ray-cluster", "--image", "img:1", "--object-store", "100Gi",
                                            "--worker-memory", "8Gi", "--out", str(t / "out")],
     ("--object-store 100Gi", "--worker-memory 8Gi")),
    ("backend-dir-missing", lambda t: ["build", "onnx", str(save(make_cnn(), t / "m.onnx")), "--name", "m",
                                       "--runtime", "onnxruntime", "--backend-dir", str(t / "missing"),
                                       "--repo", str(t / "out")], ("--backend-dir", "not a folder")),
    ("llm-arg-negative-batch", lambda t: ["build", "trtllm", "--engine", "llmapi", "--hf-model", _llama_with(t, "a"),
                                          "--llm-arg", "max_batch_size=-1", "--repo", str(t / "out")],
     ("--llm-arg max_batch_size=-1", "too small")),
    ("llm-arg-model-elsewhere", lambda t: ["build", "trtllm", "--engine", "llmapi", "--hf-model", _llama_with(t, "b"),
                                           "--llm-arg", "model=/etc", "--repo", str(t / "out")],
     ("--llm-arg model='/etc'", "--hf-model")),
    ("llm-arg-yaml-anchor", lambda t: ["build", "trtllm", "--engine", "llmapi", "--hf-model", _llama_with(t, "c"),
                                       "--llm-arg", "kv_cache_config=&a {x: 1}", "--repo", str(t / "out")],
     ("--llm-arg", "anchor")),
    ("llm-arg-yaml-tag", lambda t: ["build", "trtllm", "--engine", "llmapi", "--hf-model", _llama_with(t, "d"),
                                    "--llm-arg", "max_num_tokens=!!float 5", "--repo", str(t / "out")],
     ("--llm-arg", "tag")),
    ("llm-arg-unknown-with-reference", lambda t: ["build", "trtllm", "--engine", "reference", "--llm-arg", "nope=1",
                                                  "--repo", str(t / "out")], ("--llm-arg nope", "max_num_tokens")),
    ("llm-arg-switch-not-bool", lambda t: ["build", "trtllm", "--engine", "llmapi", "--hf-model", _llama_with(t, "e"),
                                           "--llm-arg", "enable_chunked_prefill=3", "--repo", str(t / "out")],
     ("--llm-arg enable_chunked_prefill=3", "switch")),
    ("llm-arg-with-the-engine-backend", lambda t: ["build", "trtllm", "--engine", "reference", "--llm-arg",
                                                   "max_num_tokens=64", "--repo", str(t / "out")],
     ("--llm-arg", "model.yaml")),
    ("tail-run-noise-1000-percent", lambda t: ["perf", "compare", str(t), str(t), "--tail-run-noise", "1000%"],
     ("--tail-run-noise", "1000%")),
    ("instances-a-billion", lambda t: ["build", "onnx", str(save(make_cnn(), t / "m.onnx")), "--name", "m",
                                       "--instances", "1000000000", "--repo", str(t / "out")], ("--instances", "1024")),
    ("trtllm-instances-a-billion", lambda t: ["build", "trtllm", "--engine", "reference", "--instances", "1000000000",
                                              "--repo", str(t / "out")], ("--instances",)),
    ("shape-with-an-empty-dim", lambda t: ["perf", "run", "m", "--shape", "x:4,,4", "--dry-run"], ("--shape", "4,,4")),
    ("lint-target-gpu-count-past-a-machine", lambda t: ["repo", "lint", str(t), "--target", "gpu:99999999999"],
     ("lint target", "gpu:99999999999")),
    ("repo-uri-scheme-alone", lambda t: ["deploy", "k8s", _repo(t), "--image", "img:1", "--repo-uri", "s3://",
                                         "--out", str(t / "out")], ("--repo-uri", "no bucket")),
    ("scale-out-at-2-percent", lambda t: ["deploy", "k8s", _repo(t), "--image", "img:1", "--scale-out-at", "2",
                                          "--out", str(t / "out")], ("--scale-out-at", "2%")),
    ("trtllm-version-past-the-next-line", lambda t: ["build", "trtllm", "--engine", "reference", "--trtllm-version",
                                                     "9.9", "--repo", str(t / "out")], ("TensorRT-LLM 9.9",)),
    ("sla-negative-limit", lambda t: ["perf", "run", "m", "--sla", "p99<=-5ms", "--dry-run"], ("p99", "-5")),
    ("number-in-arabic-indic-digits", lambda t: ["plan", "--weights-gb", "١٢", "--gpu", "H100"], ("--weights-gb",)),
    ("number-with-an-underscore", lambda t: ["deploy", "alerts", _repo(t), "--concurrency-limit", "1_0"],
     ("--concurrency-limit", "'1_0'")),
    ("empty-platform", lambda t: ["repo", "add", str(t / "out"), "--name", "x", "--backend", "python",
                                  "--platform", ""], ("--platform",)),
    ("empty-text-where-the-default-is-empty", lambda t: ["repo", "add", str(t / "out"), "--name", "x", "--backend", "",
                                                         "--platform", "ensemble"], ("--backend", "empty")),
    ("empty-plain-text-option", lambda t: ["deploy", "ray-cluster", "--image", "img:1", "--namespace", "",
                                           "--out", str(t / "out")], ("--namespace", "empty")),
    ("metrics-url-without-scheme", lambda t: ["perf", "run", "m", "--metrics-url", "127.0.0.1:8002", "--dry-run"],
     ("--metrics-url", "http://")),
    ("prometheus-url-ipv6-without-brackets", lambda t: ["deploy", "k8s", _repo(t), "--image", "img:1",
                                                        "--prometheus-url", "http://::1:9090", "--out", str(t / "out")],
     ("--prometheus-url",)),
    ("plan-out-under-proc", lambda t: ["plan", "--hf-config", _llama_with(t, "p"), "--gpu", "H100", "--out",
                                       "/proc/x"], ("/proc/x",)),
    ("serve-port-in-arabic-indic-digits", lambda t: ["serve", "--grpc-port", "١٢", str(t / "no-repo")],
     ("--grpc-port", "'١٢'")),
    ("sla-tilde-of-no-user", lambda t: ["perf", "run", "m", "--sla", "~0", "--dry-run"], ("'~0'",)),
    ("sla-file-of-no-user", lambda t: ["deploy", "alerts", _repo(t), "--sla", "~nosuchuser/sla.yaml"],
     ("~nosuchuser/sla.yaml", "does not exist")),
    ("backend-dir-of-no-user", lambda t: ["build", "onnx", str(save(make_cnn(), t / "m.onnx")), "--name", "m",
                                          "--runtime", "onnxruntime", "--backend-dir", "~nosuchuser/b",
                                          "--repo", str(t / "out")], ("~nosuchuser/b",)),
    ("pin-unknown-knob", lambda t: ["perf", "sweep", _repo(t), "m", "--sla", "p99<=5ms", "--pin", "nope=1"],
     ("--pin", "nope=1")),
]


@pytest.mark.parametrize(("case", "args", "named"), CASES, ids=[c[0] for c in CASES])
def test_a_value_that_means_nothing_is_refused_with_error_and_fix_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, args: Callable[[Path], list[str]],
        named: tuple[str, ...]) -> None:
    monkeypatch.chdir(tmp_path)  # a results/ folder, were one written, would land here
    result = CliRunner().invoke(main, args(tmp_path))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    assert named[0] in errors[0], (named[0], errors[0])  # the option (or field) and the value
    for text in named[1:]:
        assert text in result.output, (text, result.output)  # in the error or the fix
    assert any(line.startswith("  fix: ") for line in result.output.splitlines()), result.output
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()


def test_the_pin_refusal_lists_every_knob(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["perf", "sweep", _repo(tmp_path), "m", "--sla", "p99<=5ms", "--pin", "nope=1"])
    fix = next(line for line in result.output.splitlines() if line.startswith("  fix: "))
    for knob in ("instances", "max_batch_size", "batch_window", "preferred_batch", "max_queue_size", "queue_timeout"):
        assert knob in fix


def test_the_unknown_llm_arg_refusal_lists_the_lines_known_arguments(tmp_path: Path) -> None:
    hf = write_hf_model(tmp_path / "hf", LLAMA)
    result = CliRunner().invoke(main, ["build", "trtllm", "--engine", "llmapi", "--hf-model", str(hf),
                                       "--llm-arg", "max_num_token=64", "--repo", str(tmp_path / "out")])
    assert result.exit_code == 2
    fix = next(line for line in result.output.splitlines() if line.startswith("  fix: "))
    assert "did you mean max_num_tokens?" in fix and "enable_chunked_prefill" in fix and "kv_cache_config" in fix
    assert not (tmp_path / "out").exists()


def test_a_checked_llm_arg_reaches_model_yaml(tmp_path: Path) -> None:
    """The other side: a meaningful --llm-arg is written, so the checks above refuse only nonsense."""
    hf = write_hf_model(tmp_path / "hf", LLAMA)
    result = CliRunner().invoke(main, ["build", "trtllm", "--engine", "llmapi", "--hf-model", str(hf),
                                       "--llm-arg", "max_batch_size=16", "--llm-arg", "enable_attention_dp=true",
                                       "--repo", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out" / "tensorrt_llm" / "1" / "model.yaml").read_text()
    assert "max_batch_size: 16" in text and "enable_attention_dp: true" in text


def test_an_sla_file_that_is_something_else_is_never_quoted(tmp_path: Path) -> None:
    secret = "root:x:0:0:root:/root:/bin/bash"
    for name, text in (("one.txt", secret + "\n"), ("many.txt", secret + "\n" + secret + "\n"),
                       ("list.yaml", f"- {secret}\n")):
        (tmp_path / name).write_text(text)
        result = CliRunner().invoke(main, ["perf", "run", "m", "--sla", str(tmp_path / name), "--dry-run"])
        assert result.exit_code == 2 and "root" not in result.output.replace(str(tmp_path), ""), result.output
        assert "  fix: " in result.output


def test_an_sla_file_with_a_mistake_still_quotes_its_own_term(tmp_path: Path) -> None:
    (tmp_path / "sla.yaml").write_text("- p99<=5\n")
    result = CliRunner().invoke(main, ["perf", "run", "m", "--sla", str(tmp_path / "sla.yaml"), "--dry-run"])
    assert result.exit_code == 2 and "'p99<=5'" in result.output and "p99<=5ms" in result.output


@pytest.mark.parametrize("limit", ["p99<=-5ms", "ttft_p99<=-1s", "queue<=-2ms", "errors<=-1", "error_rate<=-1%",
                                   "throughput>=-200/s", "tokens_per_s>=-5/s"])
def test_every_negative_sla_limit_has_a_fix_line(limit: str) -> None:
    result = CliRunner().invoke(main, ["perf", "run", "m", "--llm", "--sla", limit, "--dry-run"])
    assert result.exit_code == 2
    assert "  fix: write a limit of 0 or more" in result.output, result.output


def test_a_folder_named_with_a_unicode_digit_is_not_a_version(tmp_path: Path) -> None:
    """``'²'.isdigit()`` is true and ``int('²')`` raises: a version folder is ASCII digits or not a version."""
    repo = Path(_repo(tmp_path))
    (repo / "m" / "²").mkdir()
    (repo / "m" / "١٢").mkdir()  # Arabic-Indic 12, which int() would read as 12
    result = CliRunner().invoke(main, ["repo", "show", str(repo), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["models"][0]["versions"] == [1]
