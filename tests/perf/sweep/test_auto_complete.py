"""When the sweep's own server may load configs as given (``--disable-auto-complete-config``).

Auto-complete makes the python backend start a stub per load only to ask ``model.py`` for a
config; the sweep turns it off only where that cannot change the config. The pure checks say
which models qualify; the server test shows, on the real tritonserver, that such a model is
served the same config either way, and that a model with the hook keeps what it adds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.sweep_models import write_sleepy
from tritonkit.perf.sweep.runner import NO_AUTO_COMPLETE, needs_auto_complete
from tritonkit.perf.sweep.variants import Variant, apply_variant
from tritonkit.repository import read_config
from tritonkit.server import TritonServer

HOOK = '''
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config
'''


def _with_hook(repo: Path, name: str) -> None:
    model_py = repo / name / "1" / "model.py"
    text = model_py.read_text()
    marker = "class TritonPythonModel:\n"
    assert marker in text
    model_py.write_text(text.replace(marker, marker + HOOK, 1))


def test_a_python_model_with_declared_tensors_and_no_hook_loads_as_written(tmp_path: Path) -> None:
    write_sleepy(tmp_path, "plain")
    assert not needs_auto_complete(tmp_path, "plain", read_config(tmp_path / "plain" / "config.pbtxt"))


def test_a_model_auto_complete_could_change_keeps_it(tmp_path: Path) -> None:
    write_sleepy(tmp_path, "hooked")
    _with_hook(tmp_path, "hooked")
    base = read_config(tmp_path / "hooked" / "config.pbtxt")
    assert needs_auto_complete(tmp_path, "hooked", base)  # model.py's hook may change the config
    write_sleepy(tmp_path, "plain")
    plain = read_config(tmp_path / "plain" / "config.pbtxt")
    onnx = type(plain)()
    onnx.CopyFrom(plain)
    onnx.backend = "onnxruntime"
    assert needs_auto_complete(tmp_path, "plain", onnx)  # fills tensors and a max batch from the file
    bare = type(plain)()
    bare.CopyFrom(plain)
    del bare.output[:]
    assert needs_auto_complete(tmp_path, "plain", bare)  # tensors left to auto-complete


@pytest.mark.server
def test_without_auto_complete_the_server_serves_the_same_config_and_a_hook_would_be_lost(tmp_path: Path) -> None:
    write_sleepy(tmp_path, "plain")
    write_sleepy(tmp_path, "hooked")
    _with_hook(tmp_path, "hooked")
    served: dict[tuple[str, bool], mc.ModelConfig] = {}
    for off in (False, True):
        with TritonServer(tmp_path, model_control="explicit", log_path=tmp_path / f"log-{off}",
                          extra_args=[NO_AUTO_COMPLETE] if off else []) as server:
            for name in ("plain", "hooked"):
                base = read_config(tmp_path / name / "config.pbtxt")
                server.load_model(name, config=apply_variant(base, Variant(2, 4, None)))
                served[(name, off)] = server.admin.model_config(name)
    assert served[("plain", False)] == served[("plain", True)]
    hooked_on, hooked_off = served[("hooked", False)], served[("hooked", True)]
    assert hooked_on.HasField("dynamic_batching") and not hooked_off.HasField("dynamic_batching")
