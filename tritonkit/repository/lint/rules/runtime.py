"""TK012, TK606 — the ``runtime`` library: where the server looks for it, and whether it stays there.

Triton core resolves a model's backend library in ``TritonModel::GetBackendLibraryProperties``
(``src/backend_model.cc``, read at r24.10 and r26.06; facts ``runtime_library_found`` and
``runtime_library_inside_folder`` in :mod:`tritonkit.triton_releases`):

* with ``runtime`` set, the name is joined (``JoinPath``: a name starting with ``/`` is joined too,
  never taken as an absolute path) onto the version folder, the model folder and ``<backend-directory>/<backend>/``, in that order; the
  first that exists is taken, none is "unable to find backend library"; ``runtime: "model.py"``
  (a python-based backend) looks for ``libtriton_python.so`` there and in
  ``<backend-directory>/python/``, and needs ``<backend-directory>/<backend>/model.py``;
* the library found must resolve (symlinks too) inside the folder it was found in, or the model is
  refused: "backend library name ... escapes backend directory" (every release since r24.01; a
  path-prefix test up to 2.69, a path-boundary test from 2.70);
* without ``runtime``, ``libtriton_<backend>.so`` is looked for in the same three folders (no
  confinement test), then ``<backend-directory>/<backend>/model.py`` — TK601's question.

These rules look at files only (``os.stat``, ``realpath``); nothing found is opened or run.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import path_exists
from tritonkit.repository.layout import backend_of
from tritonkit.repository.lint.core import ERROR, INFO, WARNING, LintContext, ModelInfo, rule
from tritonkit.repository.lint.rules.release import escapes_folder
from tritonkit.triton_releases import BEHAVIOURS, VALIDATIONS

__all__ = ["model_brings_backend_library", "runtime_library_name"]

#: ``runtime`` that makes a python-based backend (core ``kPythonFilename``).
PYTHON_BASED = "model.py"
_PATH_BOUNDARY = BEHAVIOURS["path_boundary_test"].since


def runtime_library_name(backend: str) -> str:
    """``libtriton_<backend>.so`` (core ``AssembleCPPRuntimeLibraryName`` on Linux)."""
    return f"libtriton_{backend}.so"


def _join(folder: Path, name: str) -> Path:
    """``folder`` joined with ``name`` as core's ``JoinPath`` does: an absolute name is appended, not taken."""
    return Path(str(folder).rstrip("/") + "/" + name.lstrip("/"))


def _model_folders(m: ModelInfo, version: int) -> list[Path]:
    return [m.folder / str(version), m.folder]


def model_brings_backend_library(m: ModelInfo, cfg: mc.ModelConfig) -> bool:
    """Whether the server finds the model's backend library without the backends folder: ``runtime`` is set
    (TK606 judges it) or ``libtriton_<backend>.so`` is in every version folder or the model folder."""
    if cfg.runtime:
        return True
    backend = backend_of(cfg)
    if not backend or not m.versions:
        return False
    name = runtime_library_name(backend)
    return all(any(path_exists(f / name) for f in _model_folders(m, v)) for v in m.versions)


def _search(folders: Sequence[Path | None], name: str) -> tuple[Path, Path] | None:
    """The first ``(folder, library)`` where ``name`` exists, as ``FindBackendLibraryPath`` takes it."""
    for folder in folders:
        if folder is not None and path_exists(_join(folder, name)):
            return folder, _join(folder, name)
    return None


def _climbs_out(name: str, folder_name: str, at_boundary: bool) -> bool:
    """Whether ``name`` joined onto a folder called ``folder_name`` leaves it, read from the text alone
    (the folder is not on this machine): ``../<folder_name>/x`` comes back; ``../<folder_name>2/x``
    passes the prefix test of releases before 2.70."""
    parts = posixpath.normpath(name.lstrip("/") or ".").split("/")
    ups = len(parts) - len([p for p in parts if p != ".."])
    if ups == 0 or parts[:ups] != [".."] * ups:
        return False
    if ups > 1 or len(parts) == 1:
        return True
    return parts[1] != folder_name and (at_boundary or not parts[1].startswith(folder_name))


def _shown(ctx: LintContext, folder: Path) -> Path:
    """``folder`` as a message shows it: relative to the repository when inside it."""
    return folder.relative_to(ctx.root) if folder.is_relative_to(ctx.root) else folder


def _search_folders(ctx: LintContext, m: ModelInfo, version: int, backend: str, runtime: str) -> list[Path | None]:
    """The folders the server looks for ``runtime`` in, in its order (a folder the target cannot show: ``None``)."""
    folders: list[Path | None] = [*_model_folders(m, version), ctx.target.backend_folder(backend)]
    if runtime == PYTHON_BASED:
        folders.append(ctx.target.backend_folder("python"))
    return folders


@rule("TK012", ERROR, "runtime library outside the folder the server finds it in", family="files",
      releases="all; path-boundary test 2.70+")
def runtime_inside_folder(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    runtime = str(cfg.runtime)
    backend = backend_of(cfg)
    if not runtime or not backend or cfg.platform == "ensemble":
        return
    fact = VALIDATIONS["runtime_library_inside_folder"]
    at = ctx.target.release
    library = runtime_library_name("python") if runtime == PYTHON_BASED else runtime
    hint = (f"name the library file only (runtime: \"{runtime_library_name(backend)}\") and put it in {m.name}/, a "
            f"version folder, or the {backend} backend's folder")
    seen: set[str] = set()
    for version in m.versions:
        found = _search(_search_folders(ctx, m, version, backend, runtime), library)
        if found is not None:
            folder, path = found
            if str(path) in seen:
                continue
            seen.add(str(path))
            if escapes_folder(path, folder, at):
                ctx.report(m, f"runtime {runtime!r} is found from {_shown(ctx, folder)}/ but resolves outside it "
                           f"({path.resolve()}): Triton {at} refuses the model ('backend library name ... escapes "
                           f"backend directory'; {fact.origin()})", field="runtime", hint=hint)
            elif escapes_folder(path, folder, max(at, _PATH_BOUNDARY)):
                _later_refusal(ctx, m, f"runtime {runtime!r} is found from {_shown(ctx, folder)}/ in a folder whose name "
                               f"only begins with it ({path.resolve()})", hint)
            continue
        if ctx.target.knows_backend_folders or runtime == PYTHON_BASED:
            continue  # not found anywhere: TK606's finding
        if "text" in seen:
            continue
        seen.add("text")
        if _climbs_out(library, backend, at >= _PATH_BOUNDARY):
            ctx.report(m, f"runtime {runtime!r} climbs out of the {backend} backend's folder (and is not in "
                       f"{m.name}/): Triton {at} refuses it — 'escapes backend directory' where such a file exists, "
                       f"'unable to find backend library' where none does ({fact.origin()})", field="runtime",
                       hint=hint)
        elif _climbs_out(library, backend, True):
            _later_refusal(ctx, m, f"runtime {runtime!r} leaves the {backend} backend's folder for one whose name "
                           "only begins with it", hint)


def _later_refusal(ctx: LintContext, m: ModelInfo, what: str, hint: str) -> None:
    """A runtime the target's prefix test lets through and 2.70's path-boundary test refuses: a warning."""
    boundary = BEHAVIOURS["path_boundary_test"]
    ctx.report(m, f"{what}: Triton {ctx.target.release} loads it (its test compares a string prefix), Triton "
               f"{boundary.since}+ refuses it ('escapes backend directory'; {boundary.source})", field="runtime",
               severity=WARNING, hint=hint)


@rule("TK606", ERROR, "runtime library the server cannot find", family="target")
def runtime_found(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    runtime = str(cfg.runtime)
    backend = backend_of(cfg)
    if not runtime or not backend or cfg.platform == "ensemble" or not m.versions:
        return
    fact = VALIDATIONS["runtime_library_found"]
    target = ctx.target
    library = runtime_library_name("python") if runtime == PYTHON_BASED else runtime
    if not target.knows_backend_folders:
        hint = "lint with the server's backends (--backend-dir DIR, --bundled or --server-bin) to check it"
        if runtime == PYTHON_BASED:
            ctx.report(m, f"runtime \"model.py\" makes {backend!r} a python-based backend: whether the backends "
                       f"hold {backend}/model.py and the python backend is not known here", field="runtime",
                       severity=INFO, hint=hint)
        elif any(_search(_model_folders(m, v), library) is None for v in m.versions):
            ctx.report(m, f"runtime {runtime!r} is not in {m.name}/ or its version folders; whether the {backend} "
                       "backend's folder holds it is not known here", field="runtime", severity=INFO, hint=hint)
        return
    for version in m.versions:
        folders = _search_folders(ctx, m, version, backend, runtime)
        if _search(folders, library) is None:
            shown = ", ".join(f"{_shown(ctx, f)}/" for f in folders if f is not None)
            joined = f" (a leading '/' is joined too: {library.lstrip('/')} under each)" if library.startswith("/") else ""
            ctx.report(m, f"runtime {runtime!r} is in none of the folders Triton {target.release} searches: {shown}"
                       f"{joined} ({target.source}): 'unable to find backend library' ({fact.origin()})",
                       field="runtime", hint=f"put {posixpath.basename(library)} in {m.name}/ or in the {backend} "
                       "backend's folder, or drop runtime to use the backend's own library")
            return
    own = ctx.target.backend_folder(backend)
    if runtime == PYTHON_BASED and (own is None or not path_exists(own / PYTHON_BASED)):
        ctx.report(m, f"runtime \"model.py\" makes {backend!r} a python-based backend, but the target has no "
                   f"{backend}/{PYTHON_BASED} in its backends ({target.source}): 'unable to find Python backend based "
                   f"backend library' ({fact.origin()})", field="runtime",
                   hint=f"install the {backend} backend (its folder with model.py) in the backends folder")
