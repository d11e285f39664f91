"""TK0xx — files and layout: the config exists and parses, no template placeholders left,
the name matches the folder, version folders exist, the backend and its model file are there."""

from __future__ import annotations

import re
import shlex

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import is_folder, path_exists
from tritonkit._values import excerpt
from tritonkit.repository.layout import expected_model_filename
from tritonkit.repository.lint.core import (
    ERROR,
    INFO,
    WARNING,
    LintContext,
    ModelInfo,
    folder_rule,
    is_version_name,
    rule,
)
from tritonkit.repository.names import name_problem
from tritonkit.triton_releases import (
    PLATFORM_ALIASES,
    PLATFORMS,
    guessable_model_files,
    newest_release,
    platform_backends,
)

FAMILY = "files"


#: Backends tritonserver ties to a platform: naming one of them with another platform is refused.
PAIRED_BACKENDS = frozenset({"tensorrt", "onnxruntime", "pytorch", "tensorflow"})

_PLACEHOLDER = re.compile(r"\$\{[^}\n]*\}?")

#: Sub-folders with a meaning other than "version" that Triton (or a backend) uses: core's
#: ModelLifeCycle skips warmup/, initial_state/ and configs/ (``--model-config-name``'s
#: ``configs/<name>.pbtxt``) when it lists versions (src/model_repository_manager/model_lifecycle.cc, r24.10).
_KNOWN_NON_VERSION_DIRS = {"warmup", "initial_state", "configs", "__pycache__"}


@folder_rule("TK001", WARNING, "model folder has no config.pbtxt", family=FAMILY)
def missing_config(ctx: LintContext, m: ModelInfo) -> None:
    onnx_files = [m.folder / str(v) / "model.onnx" for v in m.versions if (m.folder / str(v) / "model.onnx").is_file()]
    if m.text is None and m.read_error is None and onnx_files:
        # An ONNX folder without a config loads only on a server with the onnxruntime backend, whose
        # auto-complete guesses batching from the file; the bundled server (python backend only) loads none.
        newest = onnx_files[-1]
        version = newest.parent.name
        ctx.report(m, f"no config.pbtxt beside {m.name}/{version}/model.onnx: a server without the onnxruntime "
                   "backend cannot load it, and one with it guesses batching and instances",
                   file=f"{m.name}/", severity=ERROR,
                   hint=f"tritonkit build onnx {shlex.quote(str(newest))} --name {shlex.quote(m.name)} "
                        f"--repo {shlex.quote(str(ctx.root))} --version {version} "
                        "--force (verifies the model and writes its config.pbtxt)")
    elif m.text is None and m.read_error is None:
        ctx.report(m, "no config.pbtxt: Triton will auto-complete one from the model file, and nothing "
                   "in it can be checked here", file=f"{m.name}/",
                   hint="write the config (tritonkit repo add, or ModelRepository.add_model)")
    elif m.read_error is not None:
        ctx.report(m, f"config.pbtxt cannot be read: {m.read_error}", severity=ERROR,
                   hint="make it a readable UTF-8 text file")


@folder_rule("TK002", ERROR, "config.pbtxt does not parse", family=FAMILY)
def syntax_error(ctx: LintContext, m: ModelInfo) -> None:
    exc = m.syntax_error
    if exc is None or _PLACEHOLDER.search(m.text or ""):
        return  # a placeholder explains the parse error better (TK003)
    detail = exc.message.split(": ", 1)[-1] if exc.message.startswith(m.rel_config) else exc.message
    ctx.report(m, f"syntax error: {detail}", line=exc.line, column=exc.column,
               hint="fix the text at that line and column (field names and types are in Triton's model_config.proto)")


@folder_rule("TK003", ERROR, "template placeholder ${...} left in config", family=FAMILY)
def placeholders(ctx: LintContext, m: ModelInfo) -> None:
    if m.text is None or "${" not in m.text:
        return
    for number, line in enumerate(m.text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        for match in _PLACEHOLDER.finditer(line):
            field = line[: match.start()].strip().rstrip(":").split()[-1:] or [""]
            ctx.report(m, f"unfilled template placeholder {match.group(0)}", line=number, column=match.start() + 1,
                       field=field[0].strip('{"'),
                       hint="fill the template (e.g. TensorRT-LLM's fill_template.py) or replace the value by hand")


@rule("TK004", ERROR, "name in config does not match the model folder, or is not a usable name", family=FAMILY)
def name_matches_folder(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if (problem := name_problem(cfg.name or m.name, "model")) is not None:
        ctx.report(m, f"model name {excerpt(cfg.name or m.name)} {problem}", field="name" if cfg.name else "",
                   hint="rename the folder (and the config's name): printable characters only")
    elif cfg.name and cfg.name != m.name:
        ctx.report(m, f"name {cfg.name!r} does not match folder {m.name!r}", field="name",
                   hint=f'set name: "{m.name}" or rename the folder; Triton identifies the model by its folder')


@folder_rule("TK005", ERROR, "no integer version folder", family=FAMILY)
def has_version(ctx: LintContext, m: ModelInfo) -> None:
    if m.versions:
        return
    others = [d for d in m.subdirs if d not in _KNOWN_NON_VERSION_DIRS]
    seen = f" (found {', '.join(others)}: not integers)" if others else ""
    ctx.report(m, f"no version folder{seen}", file=f"{m.name}/",
               hint=f"put the model files in {m.name}/1/ (version folders are integers without leading "
               "zeros; an ensemble needs an empty one)")


@folder_rule("TK006", INFO, "sub-folder Triton will not treat as a version", family=FAMILY)
def non_integer_dirs(ctx: LintContext, m: ModelInfo) -> None:
    if not m.versions:
        return  # TK005 already names them
    for d in m.subdirs:
        if d in _KNOWN_NON_VERSION_DIRS or is_version_name(d):
            continue
        ctx.report(m, f"sub-folder {d!r} is not a version (not an integer, or leading zeros) and is ignored",
                   file=f"{m.name}/{d}/", hint=f"rename it to {int(d)}" if d.isascii() and d.isdigit()
                   else "rename it to an integer if it holds a model version")


@rule("TK007", WARNING, "neither backend nor platform set", family=FAMILY)
def backend_or_platform(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if not cfg.backend and not cfg.platform:
        # Triton 2.51 guesses the backend from the model file's name (model.py -> python) and loads it.
        ctx.report(m, "neither backend nor platform is set: Triton has to guess the backend from the "
                   "model file's name", field="name",
                   hint='state it: backend: "onnxruntime" (or "python", "tensorrt", ...) or platform: "ensemble"')


def _guessable(m: ModelInfo, guessable: dict[str, bool | None]) -> bool:
    """Whether tritonserver can work out the backend of a config that names none (from the
    model files in ``guessable``: the target release's)."""
    cfg = m.parsed_config
    if cfg.default_model_filename:
        return cfg.default_model_filename in guessable
    if "." in m.name:
        return True  # "model.<backend>" names its backend (whether that backend exists is TK601's business)
    if not m.subdirs:
        return False
    # The server looks only in the first sub-folder, in name order ("10" before "2").
    first = m.folder / sorted(m.subdirs)[0]
    for name, is_dir in guessable.items():
        path = first / name
        if path_exists(path) and (is_dir is None or is_folder(path) == is_dir):
            return True
    return False


@rule("TK011", ERROR, "backend cannot be worked out", family=FAMILY, releases="model.pt2: 2.68+")
def backend_guessable(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    at = ctx.target.release
    guessable = guessable_model_files(at)
    if cfg.backend or cfg.platform or _guessable(m, guessable):
        return
    known = ", ".join(sorted(guessable))
    newer = ("; model.pt2 tells the server only from Triton 2.68 (2.67 guesses the pytorch backend from it "
             "but looks for model.pt)" if "model.pt2" not in guessable and _guessable(m, guessable_model_files(
                 newest_release())) else "")
    ctx.report(m, "neither backend nor platform is set and no model file tells the server which backend to use "
               f"(Triton {at} looks for {known} in the first version folder){newer}", field="name",
               hint='state the backend: backend: "python" (or "onnxruntime", "tensorrt", "pytorch" with a platform, '
                    '...)')


@rule("TK008", ERROR, "unknown platform, or platform and backend disagree", family=FAMILY,
      releases="torch_aoti: 2.67+")
def platform_known(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if not cfg.platform:
        return
    at = ctx.target.release
    known = platform_backends(at)
    if cfg.platform in PLATFORM_ALIASES:
        meant, fact = PLATFORM_ALIASES[cfg.platform]
        why = (f"from {fact.since.describe()} auto-complete reads it as the pytorch backend, but validation then "
               "refuses the platform/backend pair" if at >= fact.since else f"Triton {at} does not know it")
        ctx.report(m, f"platform {cfg.platform!r} is an alias of {meant!r} that no release tritonkit knows serves: "
                   f"{why} ({fact.source})", field="platform", hint=f'write platform: "{meant}"')
        return
    if cfg.platform not in known:
        newer = PLATFORMS.get(cfg.platform)
        if newer is not None:
            ctx.report(m, f"platform {cfg.platform!r} is new in {newer.since.describe()}: Triton {at} refuses it "
                       f"('unexpected platform type'; {newer.source})", field="platform",
                       hint=f"target Triton {newer.since} or later (--server-version), or use a platform "
                            f"Triton {at} knows")
            return
        ctx.report(m, f"unknown platform {cfg.platform!r}", field="platform",
                   hint=f"use one of {', '.join(sorted(known))}, or set backend instead of platform")
        return
    implied = known[cfg.platform]
    if cfg.platform == "ensemble" and cfg.backend:
        ctx.report(m, f'platform is "ensemble" but backend is {cfg.backend!r}: the server runs ensembles itself',
                   field="backend", hint="drop backend from an ensemble")
        return
    if cfg.backend in PAIRED_BACKENDS and implied and cfg.backend != implied:
        # tritonserver knows which platform each of these backends serves and refuses a mismatch.
        ctx.report(m, f"platform {cfg.platform!r} is served by backend {implied!r}, not {cfg.backend!r}",
                   field="platform", hint=f'drop platform (backend: "{cfg.backend}" is enough), or make them agree')
    elif cfg.backend and implied and cfg.backend != implied:
        # Triton 2.51 loads this and uses the backend; the platform is then misleading.
        ctx.report(m, f"platform {cfg.platform!r} means backend {implied!r}, but backend is {cfg.backend!r} "
                   "(Triton uses the backend)", field="platform", severity=WARNING,
                   hint="drop one of the two, or make them agree")


def _served_versions(m: ModelInfo) -> list[int]:
    """The versions Triton will try to load under the config's version policy."""
    cfg = m.parsed_config
    policy = cfg.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "all":
        return list(m.versions)
    if choice == "specific":
        return [v for v in policy.specific.versions if v in m.versions]
    keep = policy.latest.num_versions if choice == "latest" else 1
    return m.versions[-keep:] if keep > 0 else []


@rule("TK009", ERROR, "the model file the backend needs is missing", family=FAMILY,
      releases="torch_aoti default file: 2.68+")
def model_file_present(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    filename = expected_model_filename(cfg, ctx.target.release)
    if filename is None:
        return
    for version in _served_versions(m):
        if filename not in m.version_files(version):
            stall = (" (the python backend then waits for its stub instead of failing fast)"
                     if (cfg.backend == "python") else "")
            ctx.report(m, f"version {version} has no {filename}{stall}",
                       file=f"{m.name}/{version}/", field="default_model_filename" if cfg.default_model_filename
                       else "", hint=f"put the model file at {m.name}/{version}/{filename}"
                       + ("" if cfg.default_model_filename else " or set default_model_filename"))


@rule("TK010", ERROR, "version policy selects no existing version", family=FAMILY)
def version_policy(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    policy = cfg.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "specific" and not policy.specific.versions:
        ctx.report(m, "version_policy specific { } lists no version, so no version is served",
                   field="version_policy.specific", hint="list the versions to serve: specific { versions: [ 1 ] }")
    elif choice == "specific":
        missing = [v for v in policy.specific.versions if v not in m.versions]
        if missing:
            ctx.report(m, f"version_policy names version(s) {missing} that have no folder "
                       f"(present: {m.versions or 'none'})", field="version_policy.specific.versions",
                       hint="create the folders or list only versions that exist")
    elif choice == "latest" and policy.latest.num_versions == 0:
        ctx.report(m, "version_policy latest { num_versions: 0 } serves no version",
                   field="version_policy.latest.num_versions", hint="use num_versions >= 1")

