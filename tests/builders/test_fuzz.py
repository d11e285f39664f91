"""Fuzzing ``build onnx`` with broken ONNX files: a clear refusal or a good build, never a traceback.

The builder's own demo model is broken the ways files break and exporters misbehave: cut short,
bytes flipped, junk before it, random bytes; and, as a message that still parses, tensors given
names with a NUL, a newline or a quote, element types no ONNX release defines, dims of zero, below
-1 or past int64, opsets from the future, the graph removed. Each build ends in exit 0 with a
config that reads back and lints without a failing rule, or exit 2 with one ``error:`` and one
``fix:`` line and nothing left in the repository (documented: 0 built, 2 refused).

Fixed seed (``derandomize``), bounded examples: each build is tens of milliseconds.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.faults import run_cli
from tritonkit.builders import make_demo_model
from tritonkit.cli import main
from tritonkit.repository import read_config
from tritonkit.repository.lint import lint_repository

EXAMPLES = 200

with tempfile.TemporaryDirectory() as _folder:
    DEMO = make_demo_model(Path(_folder) / "demo.onnx").read_bytes()

NAMES = st.text(alphabet=st.sampled_from(["\0", "\n", '"', "\\", "/", " ", "é", "x", ":", "{"]), max_size=8)


@st.composite
def broken_bytes(draw: st.DrawFn) -> bytes:
    data = DEMO
    kind = draw(st.sampled_from(["truncate", "flip", "prefix", "random", "empty"]))
    if kind == "truncate":
        return data[: draw(st.integers(0, len(data) - 1))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(draw(st.integers(1, 5))):
            out[draw(st.integers(0, len(out) - 1))] ^= draw(st.integers(1, 255))
        return bytes(out)
    if kind == "prefix":
        return draw(st.binary(min_size=1, max_size=16)) + data
    if kind == "random":
        return draw(st.binary(min_size=1, max_size=4096))
    return b""


@st.composite
def odd_models(draw: st.DrawFn) -> bytes:
    """A message that parses as ONNX but holds what no exporter should write."""
    model = onnx.load_from_string(DEMO)
    graph = model.graph
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["input_name", "output_name", "elem_type", "dim", "opset", "no_graph"]))
        value = graph.input[0] if kind in ("input_name", "elem_type", "dim") else graph.output[0]
        if kind in ("input_name", "output_name"):
            old, new = value.name, draw(NAMES)
            value.name = new
            for node in graph.node:  # keep the graph connected under the new name
                node.input[:] = [new if n == old else n for n in node.input]
                node.output[:] = [new if n == old else n for n in node.output]
        elif kind == "elem_type":
            value.type.tensor_type.elem_type = draw(st.sampled_from([-3, 0, 8, 16, 99, 2**31 - 1]))
        elif kind == "dim":
            dims = value.type.tensor_type.shape.dim
            if dims:
                dim = dims[draw(st.integers(0, len(dims) - 1))]
                dim.dim_value = draw(st.sampled_from([0, -2, 2**62, 2**63 - 1]))
        elif kind == "opset":
            model.opset_import[0].version = draw(st.sampled_from([0, 1, 999]))
        else:
            model.ClearField("graph")
    return model.SerializeToString()


def _build(model: bytes) -> tuple[Result, Path]:
    folder = Path(tempfile.mkdtemp(prefix="tk-fuzz-onnx-"))
    (folder / "model.onnx").write_bytes(model)
    repo = folder / "repo"
    result = CliRunner().invoke(main, ["build", "onnx", str(folder / "model.onnx"), "--name", "m", "--repo", str(repo),
                                       "--runtime", "onnxruntime", "--kind", "cpu"])
    return result, repo


def _check(result: Result, repo: Path) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), (result.exit_code, result.output)
    if result.exit_code == 2:
        lines = result.stderr.splitlines()
        assert any(line.startswith("error: ") for line in lines) and any(line.startswith("  fix: ") for line in lines), \
            result.stderr
        assert not (repo / "m").exists(), "a refused build left a model behind"
    else:
        read_config(repo / "m")  # what was written reads back
        assert not lint_repository(repo).internal_errors


@settings(derandomize=True, max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.one_of(broken_bytes(), odd_models()))
def test_a_broken_onnx_file_is_built_or_refused_cleanly(model: bytes) -> None:
    result, repo = _build(model)
    try:
        _check(result, repo)
    finally:
        import shutil

        shutil.rmtree(repo.parent, ignore_errors=True)


def test_an_input_named_with_a_newline_and_a_nul_is_refused_with_the_reason() -> None:
    model = onnx.load_from_string(DEMO)
    old, new = model.graph.input[0].name, 'x\n"evil\0'
    model.graph.input[0].name = new
    for node in model.graph.node:
        node.input[:] = [new if n == old else n for n in node.input]
    result, repo = _build(model.SerializeToString())
    _check(result, repo)
    assert result.exit_code == 2 and "holds the control character" in result.stderr, result.output


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_onnx_path_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """In its own process with a time limit: a FIFO must not block onnx.load, nor /dev/zero fill memory."""
    path = tmp_path / "model.onnx"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    done = run_cli("build", "onnx", str(path), "--name", "m", "--repo", str(tmp_path / "repo"), timeout_s=60)
    assert done.returncode == 2 and "not a regular file" in done.stderr and "  fix: " in done.stderr, done.stderr
    assert not (tmp_path / "repo" / "m").exists()
