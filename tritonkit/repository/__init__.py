"""Model repositories: typed configs over Triton's ``ModelConfig``, text, layout, diff, lint.

Build a config as a typed value, write it with its files, read it back::

    import numpy as np
    from pathlib import Path
    from tritonkit.repository import (
        DynamicBatching, Hardware, ModelRepository, ModelSpec, TensorSpec,
        instance_groups_for, read_config, render_config,
    )

    spec = ModelSpec(
        name="resnet",
        backend="onnxruntime",
        max_batch_size=32,
        inputs=[TensorSpec(name="input", dtype=np.float32, dims=[3, 224, 224])],
        outputs=[TensorSpec(name="logits", dtype="FP32", dims=[1000])],
        dynamic_batching=DynamicBatching(window="10ms"),   # default: on, "5ms"
        instance_groups=instance_groups_for(Hardware.detect()),
    )
    config = spec.to_proto()            # tritonclient.grpc.model_config_pb2.ModelConfig
    text = render_config(config)        # the config.pbtxt text (pure)

    repo = ModelRepository.init("model_repository")
    entry = repo.add_model(spec, files={"model.onnx": Path("resnet.onnx")}, version=1)
    assert read_config(entry.config_path) == config

    from tritonkit.repository import lint_repository
    report = lint_repository("model_repository", target="cpu")
    for finding in report.findings:
        print(finding)                  # TK101 error resnet/config.pbtxt:12 ...

A model already written as a ``ModelConfig`` protobuf can be passed to
``add_model``/``write_config`` directly; ``ModelSpec(extra=...)`` merges any field the
typed spec does not model.
"""

from __future__ import annotations

from tritonkit.repository.diff import FieldChange, ModelDiff, diff_configs, diff_repositories, flatten_config
from tritonkit.repository.layout import (
    DEFAULT_MODEL_FILENAMES,
    FileSource,
    ModelEntry,
    ModelRepository,
    expected_model_filename,
    model_folder,
)
from tritonkit.repository.lint import (
    RULES,
    Finding,
    LintReport,
    Rule,
    Severity,
    Target,
    lint_repository,
)
from tritonkit.repository.pbtxt import (
    CONFIG_FILENAME,
    ConfigSyntaxError,
    atomic_write,
    parse_config,
    read_config,
    render_config,
    write_config,
)
from tritonkit.repository.serving import PlacedGroup, Serving, serving_of
from tritonkit.repository.spec import (
    DEFAULT_WINDOW,
    WINDOW_RANGE_US,
    Accelerator,
    ControlInput,
    DynamicBatching,
    EnsembleStep,
    Hardware,
    InstanceGroup,
    ModelSpec,
    Optimization,
    QueuePolicy,
    RateLimiterResource,
    SequenceBatching,
    SequenceState,
    TensorSpec,
    VersionPolicy,
    Warmup,
    WarmupInput,
    instance_groups_for,
)
from tritonkit.repository.units import (
    DTypeLike,
    Duration,
    dtype_to_numpy,
    dtype_to_triton,
    format_duration_us,
    to_microseconds,
)

__all__ = [
    "CONFIG_FILENAME",
    "DEFAULT_MODEL_FILENAMES",
    "DEFAULT_WINDOW",
    "WINDOW_RANGE_US",
    "RULES",
    "Accelerator",
    "ConfigSyntaxError",
    "ControlInput",
    "DTypeLike",
    "Duration",
    "DynamicBatching",
    "EnsembleStep",
    "FieldChange",
    "FileSource",
    "Finding",
    "Hardware",
    "InstanceGroup",
    "LintReport",
    "ModelDiff",
    "ModelEntry",
    "ModelRepository",
    "ModelSpec",
    "Optimization",
    "PlacedGroup",
    "QueuePolicy",
    "RateLimiterResource",
    "Rule",
    "SequenceBatching",
    "SequenceState",
    "Serving",
    "Severity",
    "Target",
    "TensorSpec",
    "VersionPolicy",
    "Warmup",
    "WarmupInput",
    "atomic_write",
    "diff_configs",
    "diff_repositories",
    "dtype_to_numpy",
    "dtype_to_triton",
    "expected_model_filename",
    "flatten_config",
    "format_duration_us",
    "instance_groups_for",
    "lint_repository",
    "model_folder",
    "parse_config",
    "read_config",
    "render_config",
    "serving_of",
    "to_microseconds",
    "write_config",
]
