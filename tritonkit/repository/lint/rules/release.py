"""TK8xx — what the target Triton release reads and checks, beyond 2.51.

Every rule here depends on ``ctx.target.release`` (``repo lint --server-version``; default the
newest line) and names the release its check comes from; the facts are in
:mod:`tritonkit.triton_releases`, each with the upstream file and branch it was read at.
Platforms per release are TK008/TK011 (``files``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.lint.core import ERROR, WARNING, LintContext, ModelInfo, folder_rule, rule
from tritonkit.triton_releases import (
    BEHAVIOURS,
    CONFIG_FIELDS,
    CUSTOMIZABLE_METRIC_FAMILIES,
    TENSORRT_ALLOCATION_STRATEGIES,
    VALIDATIONS,
    TritonRelease,
)

FAMILY = "release"

_INDEX = re.compile(r"\[[^\]]*\]")
_INT64_MAX = 2**63 - 1
#: The model parameter naming a custom batching strategy library (core src/backend_model.cc).
STRATEGY_PARAMETER = "TRITON_BATCH_STRATEGY_PATH"
_PATH_BOUNDARY = BEHAVIOURS["path_boundary_test"].since  # a separator-aware child-path test (core dcb315d)


def _proto_path(text_path: str) -> str | None:
    """``ModelEnsembling.max_inflight_requests`` for ``ensemble_scheduling.max_inflight_requests``
    (indexes and map keys dropped); ``None`` inside a map or for a name the schema lacks."""
    desc = mc.ModelConfig.DESCRIPTOR
    names = _INDEX.sub("", text_path).split(".")
    proto: str | None = None
    for i, name in enumerate(names):
        fd = desc.fields_by_name.get(name) if desc is not None else None
        if fd is None:
            return None
        proto = f"{desc.full_name.split('.', 1)[-1]}.{name}"
        desc = fd.message_type
        if desc is not None and desc.GetOptions().map_entry and i < len(names) - 1:
            return None
    return proto


@rule("TK801", ERROR, "config field the target Triton release cannot read", family=FAMILY,
      releases="model_metrics: 2.52+, ensemble max_inflight_requests: 2.63+")
def fields_the_release_reads(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    at = ctx.target.release
    reported: list[str] = []
    for text_path in m.lines.paths():
        proto = _proto_path(text_path)
        fact = CONFIG_FIELDS.get(proto) if proto is not None else None
        if fact is None or fact.since <= at:
            continue
        plain = _INDEX.sub("", text_path)
        if any(plain == done or plain.startswith(done + ".") for done in reported):
            continue  # the field around it is reported already
        reported.append(plain)
        ctx.report(m, f"{plain} ({fact.subject}) is new in {fact.since.describe()}: Triton {at} cannot read this "
                   f"config at all ('failed to read text proto'; {fact.source})", field=text_path,
                   hint=f"remove {plain}, or lint for the release you deploy (--server-version {fact.since} or later)")


def _metrics_release(ctx: LintContext) -> TritonRelease | None:
    """The release that checks model_metrics, when the target has it (older ones cannot read it: TK801)."""
    since = VALIDATIONS["model_metrics"].since
    return since if ctx.target.release >= since else None


@rule("TK802", ERROR, "model_metrics metric control incomplete", family=FAMILY, needs_field="model_metrics",
      releases="2.52+")
def metric_controls_complete(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    since = _metrics_release(ctx)
    if since is None:
        return
    source = VALIDATIONS["model_metrics"].source
    for i, control in enumerate(cfg.model_metrics.metric_control):
        base = f"model_metrics.metric_control[{i}]"
        # The server stops at the first problem, in this order (ValidateModelMetrics).
        if not control.HasField("metric_identifier"):
            said, path, fix = "metric control must specify 'metric_identifier'", base, \
                f'add metric_identifier {{ family: "{CUSTOMIZABLE_METRIC_FAMILIES[0]}" }}'
        elif not control.metric_identifier.family:
            said, path, fix = "metric identifier must specify non-empty 'family'", f"{base}.metric_identifier", \
                f'name the family: family: "{CUSTOMIZABLE_METRIC_FAMILIES[0]}"'
        elif not control.HasField("histogram_options"):
            said, path, fix = "metric control must specify 'histogram_options'", base, \
                "add histogram_options { buckets: [ ... ] } (bucket bounds in the family's unit)"
        elif not control.histogram_options.buckets:
            said, path, fix = "histogram options must specify non-empty 'buckets'", f"{base}.histogram_options", \
                "list the bucket bounds, ascending: buckets: [ 10, 50, 100, 500 ]"
        else:
            continue
        ctx.report(m, f"{base}: the server refuses the model: \"{said}\" (Triton {since}+; {source})",
                   field=path, hint=fix)


@rule("TK803", WARNING, "model_metrics names a family Triton core does not customise", family=FAMILY,
      needs_field="model_metrics", releases="2.52+")
def metric_family_customizable(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if _metrics_release(ctx) is None:
        return
    for i, control in enumerate(cfg.model_metrics.metric_control):
        family = control.metric_identifier.family
        if family and family not in CUSTOMIZABLE_METRIC_FAMILIES:
            ctx.report(m, f"metric family {family!r} is not a customizable metric in Triton core: the server loads "
                       "the model, warns, and keeps that family as it is "
                       f"({VALIDATIONS['model_metrics_family'].source})",
                       field=f"model_metrics.metric_control[{i}].metric_identifier.family",
                       hint=f"only {', '.join(CUSTOMIZABLE_METRIC_FAMILIES)} takes custom buckets")


def _overflows(dims: Sequence[int]) -> bool:
    """Whether Triton 2.67's element count of ``dims`` overflows int64: counted left to right,
    a -1 before the overflow makes it variable-size (not an overflow), a bad dim is another rule's."""
    count: int | None = None
    for d in dims:
        if d < 0:
            return False
        if count is None:
            count = d
        elif d != 0 and count > _INT64_MAX // d:
            return True
        else:
            count *= d
    return False


@rule("TK804", ERROR, "element count of dims or reshape overflows int64", family=FAMILY,
      releases="2.67+ (a warning before: loaded with a wrapped count)")
def element_counts_fit(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    fact = VALIDATIONS["element_count_overflow"]
    refused = ctx.target.release >= fact.since
    checks: list[tuple[str, Sequence[int], str]] = []
    for kind, tensors in (("input", cfg.input), ("output", cfg.output)):
        for i, t in enumerate(tensors):
            # 2.67 counts every input's dims when it sets up the scheduler, and dims and reshape
            # of any tensor with a reshape (ValidateIOShape).
            if (kind == "input" and not t.is_shape_tensor) or t.HasField("reshape"):
                checks.append((f"{kind} {t.name!r} dims", list(t.dims), f"{kind}[{i}].dims"))
            if t.HasField("reshape"):
                checks.append((f"{kind} {t.name!r} reshape", list(t.reshape.shape), f"{kind}[{i}].reshape"))
    for what, dims, path in checks:
        if not _overflows(dims):
            continue
        if refused:
            ctx.report(m, f"{what} {dims} hold more elements than int64 counts: Triton {ctx.target.release} refuses "
                       f"the model ('exceeds maximum size'; {fact.origin()})", field=path,
                       hint="use -1 for a dimension that is not fixed, or smaller sizes")
        else:
            ctx.report(m, f"{what} {dims} hold more elements than int64 counts: Triton {ctx.target.release} loads it "
                       f"with a wrapped count, and {fact.since}+ refuses it ({fact.source})", field=path,
                       severity=WARNING, hint="use -1 for a dimension that is not fixed, or smaller sizes")


def escapes_folder(child: Path, parent: Path, at: TritonRelease) -> bool:
    """Whether ``child`` lies outside ``parent`` as release ``at`` tests it (core's
    IsChildPathEscapingParentPath, symlinks resolved): a plain prefix test up to 2.69, one that
    stops at a path separator from 2.70. The one home of that test: label files, the runtime library."""
    child_text, parent_text = str(child.resolve()), str(parent.resolve())
    if at >= _PATH_BOUNDARY:
        return not (child_text == parent_text or child_text.startswith(parent_text.rstrip("/") + "/"))
    return not child_text.startswith(parent_text)


@rule("TK805", ERROR, "output label file outside the model folder", family=FAMILY, releases="2.66+")
def labels_inside_model(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    fact = VALIDATIONS["label_file_inside_model"]
    at = ctx.target.release
    if at < fact.since:
        return
    for i, t in enumerate(cfg.output):
        if not t.label_filename:
            continue
        # The server joins the name onto the model folder (an absolute name too) and resolves it.
        joined = Path(os.path.normpath(f"{m.folder.resolve()}/{t.label_filename}"))
        if escapes_folder(joined, m.folder, at):
            ctx.report(m, f"output {t.name!r} label file {t.label_filename!r} lies outside the model folder: "
                       f"Triton {at} refuses the model ('is outside model directory'; {fact.origin()})",
                       field=f"output[{i}].label_filename",
                       hint=f"copy the labels into {m.name}/ and name the file there")


def _strategy_path(cfg: mc.ModelConfig) -> str | None:
    parameter = cfg.parameters.get(STRATEGY_PARAMETER)
    return str(parameter.string_value) if parameter is not None else None


@rule("TK806", ERROR, "batching strategy library refused: with sequence batching, missing, or outside the model",
      family=FAMILY, releases="all; inside the model folder: 2.70+")
def batch_strategy_library(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    path = _strategy_path(cfg)
    if path is None:
        return
    field = f'parameters["{STRATEGY_PARAMETER}"]'
    if cfg.HasField("sequence_batching"):
        ctx.report(m, f"{STRATEGY_PARAMETER} on a model with sequence batching: the server refuses it ('cannot be "
                   "specified with sequence batcher')", field=field,
                   hint=f"drop {STRATEGY_PARAMETER}, or batch with dynamic_batching")
        return
    fact = VALIDATIONS["batch_strategy_inside_model"]
    at = ctx.target.release
    written = PurePosixPath(path)
    parts = written.parts
    # The server reads the path as written: a relative one from its own working directory. On
    # disk here the model folder is m.folder; in the server's file system it is ".../<model>/".
    inside = written.is_absolute() and ".." not in parts and m.name in parts[:-1]
    if not inside:
        where = ("a relative path is read from the server's working directory, not the model folder"
                 if not written.is_absolute() else f"{path!r} does not lie in the model folder (.../{m.name}/...)")
        hint = (f"put the library in {m.name}/ and give its absolute path where the server mounts the repository, "
                f"e.g. /models/{m.name}/libbatching.so")
        if at >= fact.since:
            ctx.report(m, f"{STRATEGY_PARAMETER}: {where}: Triton {at} refuses the model ('Batching library path "
                       f"escapes model repository'; {fact.origin()})", field=field, hint=hint)
        else:
            # Older servers load any path that exists on their machine, which cannot be checked here.
            ctx.report(m, f"{STRATEGY_PARAMETER}: {where}, so whether it exists where the server runs cannot be "
                       f"checked here; Triton {fact.since}+ refuses it ({fact.source})", field=field,
                       severity=WARNING, hint=hint)
        return
    if inside:
        after = parts[len(parts) - 1 - parts[::-1].index(m.name) + 1:]
        local = m.folder.joinpath(*after)
        if not local.is_file():
            ctx.report(m, f"{STRATEGY_PARAMETER} {path!r}: there is no {m.name}/{'/'.join(after)} in this repository, "
                       "and the server refuses a missing library ('Batching library path not found')", field=field,
                       hint=f"put the library at {m.name}/{'/'.join(after)}")


def _name_refused_by_2_67(name: str) -> bool:
    return ".." in name or not name.strip()


@folder_rule("TK807", WARNING, "model name Triton 2.67's load requests refuse", family=FAMILY, releases="2.67")
def load_request_name(ctx: LintContext, m: ModelInfo) -> None:
    fact = VALIDATIONS["load_request_model_name"]
    if ctx.target.release != fact.since or not _name_refused_by_2_67(m.name):
        return
    ctx.report(m, f"Triton {fact.since} refuses load requests (explicit model control, the load API) for a name "
               f"containing '..': {m.name!r} loads at start-up only; 2.68 accepts it ({fact.source})",
               file=f"{m.name}/", hint="rename the model folder (and its config's name) without '..'")


_ALLOCATION = "execution_context_allocation_strategy"


@rule("TK808", ERROR, "TensorRT execution_context_allocation_strategy the backend does not take", family=FAMILY,
      releases="2.58+ (not read before: a warning)")
def tensorrt_allocation_strategy(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    parameter = cfg.parameters.get(_ALLOCATION)
    if parameter is None or not (cfg.backend == "tensorrt" or cfg.platform == "tensorrt_plan"):
        return
    fact = VALIDATIONS["tensorrt_allocation_strategy"]
    value = str(parameter.string_value)
    field = f'parameters["{_ALLOCATION}"]'
    choices = " or ".join(TENSORRT_ALLOCATION_STRATEGIES)
    if ctx.target.release < fact.since:
        ctx.report(m, f"{_ALLOCATION} is read by the TensorRT backend from {fact.since.describe()}: Triton "
                   f"{ctx.target.release} ignores it ({fact.source})", field=field, severity=WARNING,
                   hint=f"drop it, or deploy Triton {fact.since} or later")
    elif value not in TENSORRT_ALLOCATION_STRATEGIES:
        ctx.report(m, f"{_ALLOCATION} {value!r}: the TensorRT backend refuses the model ('Invalid value for "
                   f"'{_ALLOCATION}''; {fact.origin()})", field=field, hint=f"use {choices}")
