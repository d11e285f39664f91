"""The committed ``model_repository/demo_mlp`` is exactly what the builder writes today (model.py included)."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import ROOT
from tritonkit.builders.demo import DEMO_MODEL_NAME, build_demo_entry
from tritonkit.builders.python_runtime import MODEL_PY_SOURCE

COMMITTED = ROOT / "model_repository" / DEMO_MODEL_NAME


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_committed_demo_model_equals_a_fresh_build_byte_for_byte(tmp_path: Path) -> None:
    fresh = _files(build_demo_entry(tmp_path / "repo"))
    committed = _files(COMMITTED)
    assert sorted(committed) == sorted(fresh) == ["1/model.onnx", "1/model.py", "config.pbtxt"]
    stale = [name for name in fresh if committed[name] != fresh[name]]
    assert not stale, f"model_repository/{DEMO_MODEL_NAME} differs from the builder's output in {stale}: " \
                      "regenerate with `python -m tritonkit.builders.demo model_repository`"


def test_the_committed_model_py_is_the_builders_runtime_file() -> None:
    assert (COMMITTED / "1" / "model.py").read_bytes() == MODEL_PY_SOURCE.read_bytes()
