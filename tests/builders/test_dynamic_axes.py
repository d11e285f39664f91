"""A dynamic axis is verified at a second size: a BERT-shaped encoder traced by torch's legacy exporter
declares its sequence axis dynamic while its Reshape nodes hold the traced length, so it is pinned in
the config with the reason; the dynamo exporter's runs at other lengths and is recorded as verified
at two. ``perf run`` derives data at a size the build verified. Real torch exports, real ONNX Runtime."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from tritonkit.builders import build_onnx
from tritonkit.builders.verify import PINNED_PARAMETER, VERIFIED_SIZES_PARAMETER
from tritonkit.perf.measure.input_data import DEFAULT_SEQ_LEN, SeqLen, derive_samples


class _Encoder(torch.nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Embedding(100, 32)
        layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # type: ignore[name-defined]
        return self.encoder(self.embedding(ids))


def _export(path: Path, *, dynamo: bool) -> Path:
    torch.manual_seed(0)
    model = _Encoder().eval()
    ids = torch.randint(0, 100, (2, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            seq = torch.export.Dim("seq", min=2, max=512)
            batch = torch.export.Dim("batch", min=1, max=64)
            torch.onnx.export(model, (ids,), str(path), input_names=["input_ids"], output_names=["hidden"],
                              dynamic_shapes={"ids": {0: batch, 1: seq}}, dynamo=True, external_data=False)
        else:
            torch.onnx.export(model, (ids,), str(path), input_names=["input_ids"], output_names=["hidden"],
                              dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"}},
                              dynamo=False, opset_version=17)
    return path


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("legacy")
    source = _export(root / "encoder.onnx", dynamo=False)
    return root, build_onnx(source, name="encoder", repo=root / "repo", runtime="python")


def test_a_legacy_traced_sequence_axis_runs_only_at_its_traced_length_and_is_pinned_with_the_reason(
        legacy: tuple[Path, object]) -> None:
    _root, result = legacy
    (axis,) = result.dynamic_axes  # type: ignore[attr-defined]
    assert axis.name == "seq" and axis.pinned and axis.sizes == (16,)
    assert any("Reshape" in failure for failure in axis.failures), axis.failures
    config = result.config  # type: ignore[attr-defined]
    assert list(config.input[0].dims) == [16] and list(config.output[0].dims) == [16, 32]
    assert config.parameters[VERIFIED_SIZES_PARAMETER].string_value == "seq=16"
    assert "runs only at 16" in config.parameters[PINNED_PARAMETER].string_value
    warning = next(w for w in result.warnings if "dynamic axis 'seq'" in w)  # type: ignore[attr-defined]
    assert "dynamo=True" in warning and "pins it to 16" in warning


def test_perf_derives_the_pinned_length_even_when_another_is_asked(legacy: tuple[Path, object]) -> None:
    root, _ = legacy
    model_file = root / "repo" / "encoder" / "1" / "model.onnx"
    samples, notes = derive_samples(model_file, batched=True, count=2)
    assert {s["input_ids"].shape for s in samples} == {(16,)}
    assert any("verified by the build at 16 (pinned in config.pbtxt)" in n for n in notes)
    asked, _ = derive_samples(model_file, batched=True, seq_len=SeqLen(64, 64), count=1)
    assert asked[0]["input_ids"].shape == (16,)


def test_a_dynamo_exported_sequence_axis_is_verified_at_two_lengths_and_perf_uses_a_verified_one(
        tmp_path: Path) -> None:
    import onnxscript  # noqa: F401  (torch's dynamo exporter needs it; pinned, so never skipped)
    source = _export(tmp_path / "encoder.onnx", dynamo=True)
    result = build_onnx(source, name="encoder", repo=tmp_path / "repo", runtime="python")
    (axis,) = [a for a in result.dynamic_axes if not a.pinned]
    assert axis.sizes == (16, DEFAULT_SEQ_LEN)
    assert list(result.config.input[0].dims) == [-1]
    assert result.config.parameters[VERIFIED_SIZES_PARAMETER].string_value == f"{axis.name}=16,{DEFAULT_SEQ_LEN}"
    assert PINNED_PARAMETER not in result.config.parameters
    samples, _ = derive_samples(tmp_path / "repo" / "encoder" / "1" / "model.onnx", batched=True, count=1)
    assert samples[0]["input_ids"].shape == (DEFAULT_SEQ_LEN,)
