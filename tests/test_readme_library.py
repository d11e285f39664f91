"""The README's "Library" example runs as written: extracted from README.md, executed in a fresh folder
that holds only the ``model.onnx`` it names (a random-weight MLP made here), against the real server
and the real perf_analyzer."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper, save_model

from tests.support.paths import ROOT

README = ROOT / "README.md"

def library_block() -> str:
    """The first ```python block of the README's "## Library" section."""
    section = README.read_text().split("\n## Library\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README's Library section has no python block"
    return match.group(1)


def _mlp(path: Path) -> None:
    """x FP32 [N, 8] → Gemm → Relu → y FP32 [N, 4], random weights."""
    rng = np.random.default_rng(7)
    weights = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [weights, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    save_model(model, str(path))


def test_the_library_example_uses_only_the_front_door() -> None:
    imports = re.findall(r"^(?:from|import) .*$", library_block(), re.M)
    assert imports == ["import numpy as np", "import tritonkit as tk"]


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_the_library_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mlp(tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme_library"}
    exec(compile(library_block(), str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    outputs = namespace["outputs"]
    assert isinstance(outputs, dict) and outputs["y"].shape == (4, 4)  # type: ignore[index]
    run = namespace["run"]
    assert any(step.measured for step in run.result.steps)  # type: ignore[attr-defined]
    result_path = Path(run.result_path).resolve()  # type: ignore[attr-defined]
    assert result_path.is_file() and result_path.is_relative_to(tmp_path.resolve())
    assert (tmp_path / "model_repository" / "mlp" / "config.pbtxt").is_file()
    assert "replicas needed" in namespace["plan"].render_text()  # type: ignore[attr-defined]
