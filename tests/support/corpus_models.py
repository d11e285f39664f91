"""Real architectures with random weights, exported as their users export them today, kept tiny for 2 cores.

- BERT-, GPT-2-, ViT- and ResNet-shaped models from ``transformers`` (random init from a small
  config), exported with torch's current exporter (``torch.onnx.export(..., dynamo=True)``), which
  writes ``model.onnx`` plus an external-data file;
- a scikit-learn logistic regression through skl2onnx and a LightGBM classifier through
  onnxmltools, both converted without ZipMap (the converters' default output is a sequence of
  maps, which Triton cannot carry).

Every factory writes into ``folder`` and returns the .onnx path. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = [
    "GPT2_VOCAB",
    "export_bert",
    "export_gpt2",
    "export_lightgbm",
    "export_resnet",
    "export_sklearn",
    "export_vit",
]

#: GPT-2's real vocabulary size: the logits are what makes LM load tests heavy.
GPT2_VOCAB = 50257
#: The longest sequence the tiny text models take (their position tables' size).
MAX_POSITIONS = 64


def _export(module: object, args: tuple[object, ...], path: Path, *, input_names: list[str],
            output_names: list[str], dynamic: dict[str, dict[int, object]]) -> Path:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(module, args, str(path), input_names=input_names, output_names=output_names,
                      dynamic_shapes=dynamic, dynamo=True, external_data=True, verbose=False)
    return path


def _text_dims() -> tuple[object, object]:
    import torch

    return torch.export.Dim("batch", min=1, max=64), torch.export.Dim("sequence", min=2, max=MAX_POSITIONS)


def export_bert(folder: Path) -> Path:
    """``input_ids``, ``attention_mask``, ``token_type_ids`` INT64 [batch, sequence] → ``last_hidden_state``."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=MAX_POSITIONS)
    model = BertModel(config, add_pooling_layer=False).eval()
    model.config.return_dict = False
    ids = torch.randint(0, 1000, (2, 8))
    batch, seq = _text_dims()
    dims = {0: batch, 1: seq}
    return _export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), folder / "bert.onnx",
                   input_names=["input_ids", "attention_mask", "token_type_ids"],
                   output_names=["last_hidden_state"],
                   dynamic={"input_ids": dims, "attention_mask": dims, "token_type_ids": dims})


def export_gpt2(folder: Path, *, vocab: int = GPT2_VOCAB) -> Path:
    """``input_ids`` INT64 [batch, sequence] → ``logits`` FP32 [batch, sequence, vocab]."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=vocab, n_embd=16, n_layer=1, n_head=2, n_positions=MAX_POSITIONS,
                        use_cache=False)
    model = GPT2LMHeadModel(config).eval()
    model.config.return_dict = False
    batch, seq = _text_dims()
    return _export(model, (torch.randint(0, vocab, (2, 8)),), folder / "gpt2.onnx", input_names=["input_ids"],
                   output_names=["logits"], dynamic={"input_ids": {0: batch, 1: seq}})


def _image_export(model: object, folder: Path, name: str, output: str) -> Path:
    import torch

    batch = torch.export.Dim("batch", min=1, max=64)
    return _export(model, (torch.randn(2, 3, 32, 32),), folder / f"{name}.onnx", input_names=["pixel_values"],
                   output_names=[output], dynamic={"pixel_values": {0: batch}})


def export_vit(folder: Path) -> Path:
    """``pixel_values`` FP32 [batch, 3, 32, 32] → ``last_hidden_state`` [batch, 17, 32]."""
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64)
    model = ViTModel(config, add_pooling_layer=False).eval()
    model.config.return_dict = False
    return _image_export(model, folder, "vit", "last_hidden_state")


def export_resnet(folder: Path) -> Path:
    """``pixel_values`` FP32 [batch, 3, 32, 32] → ``logits`` [batch, 10] (a two-stage ResNet)."""
    import torch
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    config = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10)
    model = ResNetForImageClassification(config).eval()
    model.config.return_dict = False
    return _image_export(model, folder, "resnet", "logits")


def _tabular(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((200, 6)).astype(np.float32)
    labels = (features[:, 0] + features[:, 1] > 0).astype(np.int64)
    return features, labels


def export_sklearn(folder: Path) -> Path:
    """A LogisticRegression: ``X`` FP32 [batch, 6] → ``label`` INT64 [batch], ``probabilities`` [batch, 2]."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    features, labels = _tabular()
    clf = LogisticRegression().fit(features, labels)
    onx = to_onnx(clf, features[:1], options={id(clf): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sklearn.onnx"
    path.write_bytes(onx.SerializeToString())
    return path


def export_lightgbm(folder: Path) -> Path:
    """A LightGBM classifier through onnxmltools, without ZipMap: ``input`` FP32 [batch, 6] →
    ``label`` INT64 and ``probabilities`` FP32 [batch, 2]."""
    import lightgbm
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    features, labels = _tabular(1)
    clf = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5, verbose=-1).fit(features, labels)
    onx = convert_lightgbm(clf, initial_types=[("input", FloatTensorType([None, 6]))], zipmap=False,
                           target_opset=15)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lightgbm.onnx"
    path.write_bytes(onx.SerializeToString())
    return path
