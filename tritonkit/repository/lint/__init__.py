"""The repository linter: rules with stable ids, held to what the real tritonserver refuses.

::

    from tritonkit.repository.lint import lint_repository
    report = lint_repository("model_repository", target="cpu")
    print(report.to_text())          # one block per finding, then a summary
    report.ok                        # False when any finding is an error

Rule families (ids are stable; see ``RULES`` or ``tritonkit repo lint --list-rules``):
TK0xx files and layout, TK1xx batching, TK2xx instance groups, TK3xx tensors,
TK4xx ensembles, TK5xx decoupled/cache and sequence-batching controls, TK6xx target (server
backends, GPUs), TK7xx the model file (ONNX) against the config, TK8xx what the target Triton
release reads and checks (``--server-version``), TK9xx TensorRT-LLM configs.
``docs/lint-coverage.md`` maps every check tritonserver makes on a config to the rule covering it.
"""

from __future__ import annotations

from tritonkit.repository.lint import rules as _rules  # noqa: F401 - registers every rule
from tritonkit.repository.lint.core import RULES, Finding, LintReport, ModelInfo, Rule, Severity, Target
from tritonkit.repository.lint.runner import (
    lint_for_server,
    lint_repository,
    load_failure_fix,
    resolve_target,
    target_from_install,
    target_from_server,
)

__all__ = [
    "RULES",
    "Finding",
    "LintReport",
    "ModelInfo",
    "Rule",
    "Severity",
    "Target",
    "lint_for_server",
    "lint_repository",
    "load_failure_fix",
    "resolve_target",
    "target_from_install",
    "target_from_server",
]
