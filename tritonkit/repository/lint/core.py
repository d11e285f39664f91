"""The linter's machinery: rules, findings, the target, and the per-model context.

A rule is a plain function registered with :func:`rule` (or :func:`folder_rule`); it receives
the whole :class:`LintContext` (every model in the repository, the target), one
:class:`ModelInfo` and, for a :func:`rule`, that model's parsed config, and reports through
``ctx.report(...)``. Rules never raise for a bad config: a config that cannot be read is itself
a finding.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import read_user_text
from tritonkit._values import MAX_GPUS_PER_POD, ascii_int, excerpt
from tritonkit.errors import ConfigError, LintError
from tritonkit.repository.pbtxt import (
    CONFIG_FILENAME,
    MAX_CONFIG_BYTES,
    ConfigSyntaxError,
    FieldLines,
    field_lines,
    parse_config,
)
from tritonkit.triton_releases import ReleaseChoice, TritonRelease, newest_release

__all__ = [
    "ERROR",
    "INFO",
    "RULES",
    "WARNING",
    "Finding",
    "LintContext",
    "LintReport",
    "ModelInfo",
    "Rule",
    "Severity",
    "Target",
    "folder_rule",
    "rule",
]


class Severity(str, Enum):
    """How bad a finding is: errors fail ``repo lint`` (exit 1); warnings and info do not."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for errors, 1 warnings, 2 info (sort key)."""
        return {"error": 0, "warning": 1, "info": 2}[self.value]


#: The severities by the names every rule module declares its rules with.
ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

#: A check on one model folder, as the runner calls every rule.
CheckFn = Callable[["LintContext", "ModelInfo"], None]
#: A check on one model whose config parsed, handed that config (see :func:`rule`).
ConfigCheckFn = Callable[["LintContext", "ModelInfo", mc.ModelConfig], None]


@dataclass(frozen=True)
class Rule:
    """One lint rule: a stable ``id`` (``TK101``), a default severity, a one-line title."""

    id: str
    severity: Severity
    title: str
    family: str
    check: CheckFn = field(repr=False, compare=False)
    needs_config: bool = True
    #: A config field (``"sequence_batching"``) the rule is about: models without it are skipped.
    needs_field: str | None = None
    #: The Triton releases the rule's check comes from (``"2.52+"``); empty: every release.
    releases: str = ""

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict (without the check function)."""
        return {"id": self.id, "severity": self.severity.value, "title": self.title, "family": self.family,
                "releases": self.releases or "all"}


#: Every registered rule by id, in registration order (families import in order).
RULES: dict[str, Rule] = {}


def _register(rule_id: str, severity: Severity, title: str, family: str, check: CheckFn, *,
              needs_config: bool, needs_field: str | None, releases: str = "") -> None:
    if rule_id in RULES:
        raise RuntimeError(f"lint rule id {rule_id} registered twice")
    RULES[rule_id] = Rule(rule_id, severity, title, family, check, needs_config, needs_field, releases)


def rule(rule_id: str, severity: Severity, title: str, *, family: str, needs_field: str | None = None,
         releases: str = "") -> Callable[[ConfigCheckFn], ConfigCheckFn]:
    """Register a check of a model's config under a stable rule id.

    It runs only on models whose config parsed (and, with ``needs_field``, sets that field), and
    is handed that parsed config, so no rule fetches it itself. ``releases`` names the Triton
    releases whose check it is (``"2.52+"``), for a rule that depends on the target release.
    """

    def register(fn: ConfigCheckFn) -> ConfigCheckFn:
        _register(rule_id, severity, title, family, lambda ctx, m: fn(ctx, m, m.parsed_config),
                  needs_config=True, needs_field=needs_field, releases=releases)
        return fn

    return register


def folder_rule(rule_id: str, severity: Severity, title: str, *, family: str,
                releases: str = "") -> Callable[[CheckFn], CheckFn]:
    """Register a check of a model folder that runs whether or not its config parsed (files, layout)."""

    def register(fn: CheckFn) -> CheckFn:
        _register(rule_id, severity, title, family, fn, needs_config=False, needs_field=None, releases=releases)
        return fn

    return register


@dataclass(frozen=True)
class Finding:
    """One problem, with where it is and how to fix it."""

    rule_id: str
    severity: Severity
    message: str
    model: str
    file: str = ""
    field: str = ""
    line: int | None = None
    column: int | None = None
    hint: str = ""
    #: The rule itself failed on this model (a bug in the linter, not in the config): the
    #: repository was not fully checked, and ``repo lint`` exits with its own status.
    internal: bool = False

    @property
    def location(self) -> str:
        """``file:line[:col]`` (or the model name when there is no file)."""
        where = self.file or self.model
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def __str__(self) -> str:
        field_part = f" [{self.field}]" if self.field else ""
        text = f"{self.location}: {self.severity.value} {self.rule_id}{field_part} {self.message}"
        return text + (f"\n    fix: {self.hint}" if self.hint else "")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``"internal": true`` added for a rule that failed)."""
        data = {
            "rule": self.rule_id,
            "severity": self.severity.value,
            "model": self.model,
            "file": self.file,
            "field": self.field,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "hint": self.hint,
        }
        if self.internal:
            data["internal"] = True
        return data


@dataclass(frozen=True)
class Target:
    """The hardware and server a repository is meant for.

    ``backends`` is the set of backends the server is known to have, or ``None``
    when unknown (then no backend rule fires). ``backends_complete`` says whether
    the set is the whole list (read from a local install's backend folder) or only
    a lower bound (backends seen in use by a running server's models).
    ``gpu_count`` is ``None`` when unknown. ``release`` is the Triton release the repository is
    checked for (default: the newest line tritonkit knows; see :mod:`tritonkit.triton_releases`),
    ``release_origin`` where that came from (``--server-version``, the server, the install).
    ``gpu_count`` is ``None`` when unknown. ``onnxruntime`` is the ONNX Runtime version of the
    server's onnxruntime backend when known (read from its files), ``onnxruntime_source`` how.
    """

    kind: Literal["cpu", "gpu", "unknown"] = "unknown"
    gpu_count: int | None = None
    backends: frozenset[str] | None = None
    backends_complete: bool = False
    source: str = "none"
    notes: tuple[str, ...] = ()
    release: TritonRelease = field(default_factory=newest_release)
    release_origin: str = "the newest line tritonkit knows"
    onnxruntime: str | None = None
    onnxruntime_source: str = ""
    #: Where each backend's folder is on this machine (read, never executed), for a local install.
    backend_folders: tuple[tuple[str, Path], ...] = ()
    #: The folder a backend not in ``backend_folders`` would be in (``--backend-dir``), or ``None``.
    backends_root: Path | None = None

    @classmethod
    def cpu(cls) -> Target:
        """A machine without GPUs (backends unknown)."""
        return cls(kind="cpu", gpu_count=0, source="--target cpu")

    @classmethod
    def gpu(cls, gpu_count: int | None = None) -> Target:
        """A machine with GPUs (how many: unknown unless given)."""
        return cls(kind="gpu", gpu_count=gpu_count, source="--target gpu")

    @classmethod
    def parse(cls, text: str) -> Target:
        """``"cpu"``, ``"gpu"`` or ``"gpu:N"``."""
        value = text.strip().lower()
        if value == "cpu":
            return cls.cpu()
        if value == "gpu":
            return cls.gpu()
        count = ascii_int(value[4:]) if value.startswith("gpu:") else None
        if count is not None and 1 <= count <= MAX_GPUS_PER_POD:
            return cls.gpu(count)
        raise ConfigError(f"unknown lint target {excerpt(text)}",
                          hint=f"use cpu, gpu or gpu:N with N the GPUs of one machine, 1 to {MAX_GPUS_PER_POD}")

    def with_backends(self, backends: set[str] | frozenset[str], *, complete: bool, source: str) -> Target:
        """This target, knowing which backends the server has."""
        return replace(self, backends=frozenset(backends), backends_complete=complete, source=source)

    def with_backend_folders(self, folders: dict[str, Path], root: Path | None) -> Target:
        """This target, knowing where its backends' folders are (the server's ``--backend-directory``)."""
        return replace(self, backend_folders=tuple(sorted(folders.items())), backends_root=root)

    @property
    def knows_backend_folders(self) -> bool:
        """Whether a backend's folder can be looked at: a local install's complete list."""
        return self.backends_complete and bool(self.backend_folders or self.backends_root)

    def backend_folder(self, name: str) -> Path | None:
        """Backend ``name``'s folder as the server would look for it; ``None`` when there is none to look at."""
        found = dict(self.backend_folders).get(name)
        if found is not None:
            return found
        return self.backends_root / name if self.backends_root is not None else None

    def with_release(self, choice: ReleaseChoice) -> Target:
        """This target, checked for the release ``choice`` names (its note joins the target's notes)."""
        notes = (*self.notes, choice.note) if choice.note else self.notes
        return replace(self, release=choice.release, release_origin=choice.origin, notes=notes)

    def with_onnxruntime(self, version: str, source: str) -> Target:
        """This target, knowing the ONNX Runtime version of its onnxruntime backend and where that was read."""
        return replace(self, onnxruntime=version, onnxruntime_source=source)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "kind": self.kind,
            "gpu_count": self.gpu_count,
            "backends": sorted(self.backends) if self.backends is not None else None,
            "backends_complete": self.backends_complete,
            "source": self.source,
            "server_version": str(self.release),
            "server_version_from": self.release_origin,
            "server_version_facts_read_at": self.release.read_at,
            "onnxruntime": self.onnxruntime,
            "backends_dir": str(self.backends_root) if self.backends_root is not None else None,
            "notes": list(self.notes),
        }


def is_version_name(name: str) -> bool:
    """Whether Triton reads a folder name as a version number."""
    return name.isascii() and name.isdigit() and str(int(name)) == name


class ModelInfo:
    """One model folder as the rules see it: raw text, parsed config (or why not), versions."""

    def __init__(self, repo_root: Path, folder: Path) -> None:
        self.repo_root = repo_root
        self.folder = folder
        self.name = folder.name
        self.config_path = folder / CONFIG_FILENAME
        self.text: str | None = None
        self.config: mc.ModelConfig | None = None
        self.syntax_error: ConfigSyntaxError | None = None
        self.read_error: str | None = None
        if os.path.lexists(self.config_path):
            # Read as every user file is: a FIFO or a device is a finding, not a hang.
            try:
                self.text = read_user_text(self.config_path, what="model config", max_bytes=MAX_CONFIG_BYTES)
            except ConfigError as exc:
                self.read_error = exc.message
        if self.text is not None:
            try:
                self.config = parse_config(self.text, path=self.rel_config)
            except ConfigSyntaxError as exc:
                self.syntax_error = exc
        try:
            self.subdirs = sorted(p.name for p in folder.iterdir() if p.is_dir())
        except OSError:
            self.subdirs = []  # an unreadable folder: its config's finding says why
        #: Triton treats a folder as a version only when its name is a canonical
        #: non-negative integer: "0" and "3" are versions, "01" and "v1" are not (seen on 2.51).
        self.versions = sorted(int(n) for n in self.subdirs if is_version_name(n))

    @property
    def parsed_config(self) -> mc.ModelConfig:
        """The parsed config, for code run by a :func:`rule`: those run only on models whose config
        parsed, so this is never ``None`` there."""
        if self.config is None:
            raise AssertionError(f"{self.rel_config} did not parse; only folder_rule checks see it")
        return self.config

    @property
    def rel_config(self) -> str:
        """``<model>/config.pbtxt`` relative to the repository root (for messages)."""
        return f"{self.name}/{CONFIG_FILENAME}"

    @cached_property
    def lines(self) -> FieldLines:
        """Field path → line index, built only when a finding needs a line."""
        return field_lines(self.text or "")

    def version_files(self, version: int) -> list[str]:
        """Names inside one version folder."""
        path = self.folder / str(version)
        return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


@dataclass
class LintContext:
    """Everything the rules can see, and where they put findings."""

    root: Path
    models: dict[str, ModelInfo]
    target: Target
    findings: list[Finding] = field(default_factory=list)
    _current_rule: Rule | None = None

    def configs(self) -> Iterator[tuple[str, mc.ModelConfig]]:
        """Every model whose config parsed, by name."""
        for name, info in self.models.items():
            if info.config is not None:
                yield name, info.config

    def rule_failed(self, model: ModelInfo, rule: Rule, exc: BaseException) -> None:
        """Record that ``rule`` raised ``exc`` on ``model``: an internal-error finding naming the rule,
        the file and the exception (its type and a short excerpt), so the other rules still run."""
        detail = excerpt(str(exc), 160)
        self.findings.append(Finding(
            rule_id=rule.id, severity=Severity.ERROR, model=model.name,
            message=f"internal error: rule {rule.id} ({rule.title}) failed on this model: "
                    f"{type(exc).__name__}: {detail}",
            file=model.rel_config if model.text is not None else f"{model.name}/",
            hint="this is a bug in tritonkit's linter, not necessarily in the config: report it with the "
                 f"file; `--ignore {rule.id}` skips the rule meanwhile",
            internal=True,
        ))

    def report(
        self,
        model: ModelInfo,
        message: str,
        *,
        field: str = "",
        hint: str = "",
        severity: Severity | None = None,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        """Record a finding for the rule being run (its severity unless overridden)."""
        current = self._current_rule
        assert current is not None, "report() called outside a rule"
        if line is None and field and file is None and model.text is not None:
            line = model.lines.line_of(field)
        self.findings.append(Finding(
            rule_id=current.id,
            severity=severity or current.severity,
            message=message,
            model=model.name,
            file=file if file is not None else (model.rel_config if model.text is not None else f"{model.name}/"),
            field=field,
            line=line,
            column=column,
            hint=hint,
        ))


@dataclass(frozen=True)
class LintReport:
    """All findings for one repository, sorted by model, line, then rule."""

    root: Path
    target: Target
    findings: tuple[Finding, ...]
    models_checked: int
    rules_run: int
    elapsed_s: float

    @property
    def errors(self) -> list[Finding]:
        """Findings of severity error."""
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        """Findings of severity warning."""
        return [f for f in self.findings if f.severity is Severity.WARNING]

    @property
    def internal_errors(self) -> list[Finding]:
        """Rules that failed while checking (the linter's own errors): the check is incomplete."""
        return [f for f in self.findings if f.internal]

    @property
    def ok(self) -> bool:
        """True when there are no errors (warnings and info allowed)."""
        return not self.errors

    def for_model(self, name: str) -> list[Finding]:
        """Findings of one model."""
        return [f for f in self.findings if f.model == name]

    def rule_ids(self, model: str | None = None, *, severity: Severity | None = None) -> set[str]:
        """Ids of the rules that fired (optionally for one model / one severity)."""
        return {f.rule_id for f in self.findings
                if (model is None or f.model == model) and (severity is None or f.severity is severity)}

    def summary(self) -> str:
        """``3 error(s), 1 warning(s), 0 info in 12 model(s) for Triton 2.73 (0.05 s)``."""
        info = len(self.findings) - len(self.errors) - len(self.warnings)
        failed = len(self.internal_errors)
        incomplete = f"; {failed} rule failure(s): not fully checked" if failed else ""
        at = self.target.release
        carried = f", {at.carried_over}" if at.carried_over else ""  # 2.73: its facts are 2.72's
        return (f"{len(self.errors)} error(s), {len(self.warnings)} warning(s), {info} info "
                f"in {self.models_checked} model(s) for Triton {at} ({self.elapsed_s:.2f} s{carried}){incomplete}")

    def to_text(self) -> str:
        """Human-readable report: one block per finding, then the summary."""
        lines = [str(f) for f in self.findings]
        lines.append(self.summary())
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "repository": str(self.root),
            "target": self.target.to_dict(),
            "models_checked": self.models_checked,
            "rules_run": self.rules_run,
            "elapsed_s": round(self.elapsed_s, 4),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "internal_errors": len(self.internal_errors),
            "findings": [f.to_dict() for f in self.findings],
        }

    def to_json(self) -> str:
        """The report as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)

    def raise_for_errors(self) -> None:
        """Raise :class:`~tritonkit.errors.LintError` (all findings attached) when there is an error."""
        errors = self.errors
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise LintError(f"{first.location}: {first.rule_id} {first.message}{more}", findings=list(errors),
                            hint=first.hint or "run `tritonkit repo lint` on the repository for every finding")
