"""The engine build as a pure command, and the checks of an engine against the runtime and configs.

:func:`engine_build_plan` is the plan file (JSON) and :func:`engine_build_argv` the command that
runs the LLM-API script (``pymodels/build_engine.py``) on it; both are pure. :func:`run_engine_build`
runs it only where ``tensorrt_llm`` imports and a GPU is visible, and otherwise raises
:class:`~tritonkit.errors.MissingComponentError` saying what was written and how to run it.
:func:`check_engine` reads the ``config.json`` TensorRT-LLM writes into an engine folder and
refuses a runtime of another version, and Triton settings the engine cannot serve.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write
from tritonkit._model_files import read_model_json
from tritonkit.builders.trtllm.params import EngineParams
from tritonkit.errors import BuildError, ConfigError, MissingComponentError
from tritonkit.repository import Hardware

__all__ = [
    "BUILD_SCRIPT",
    "PLAN_FILE",
    "EngineInfo",
    "check_engine",
    "engine_build_argv",
    "engine_build_plan",
    "read_engine_config",
    "runtime_version",
    "run_engine_build",
    "same_release",
    "write_build_files",
]

BUILD_SCRIPT = "build_engine.py"
PLAN_FILE = "engine_plan.json"
_SCRIPT_SOURCE = Path(__file__).parent / "pymodels" / "build_engine.py"
_NGC_HINT = ("run it in an NGC TensorRT-LLM container on the GPU machine (nvcr.io/nvidia/tritonserver:<yy.mm>-"
             "trtllm-python-py3): python3 <repo>/build_engine.py <repo>/engine_plan.json")


def engine_build_plan(params: EngineParams, *, hf_model: str, engine_dir: str) -> dict[str, Any]:
    """The plan the build script reads: paths as the build machine sees them, and every build value."""
    return {"hf_model": hf_model, "engine_dir": engine_dir, "params": params.to_dict()}


def engine_build_argv(repo: str | Path, *, python: str = "python3") -> list[str]:
    """``[python, <repo>/build_engine.py, <repo>/engine_plan.json]``."""
    root = Path(repo)
    return [python, str(root / BUILD_SCRIPT), str(root / PLAN_FILE)]


def write_build_files(repo: str | Path, plan: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write the build script and its plan into the repository folder (atomically); returns both paths.

    Triton reads only sub-folders of a repository, so the two files beside the models are ignored
    by the server.
    """
    root = Path(repo)
    script = atomic_write(root / BUILD_SCRIPT, _SCRIPT_SOURCE.read_text(encoding="utf-8"))
    os.chmod(script, 0o755)
    plan_path = atomic_write(root / PLAN_FILE, json.dumps(plan, indent=2) + "\n")
    return script, plan_path


def runtime_version() -> str | None:
    """The installed ``tensorrt_llm`` version, or ``None`` when it is not installed here."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover - Python >= 3.8 has it
        return None
    try:
        return version("tensorrt_llm")
    except PackageNotFoundError:
        try:
            return version("tensorrt-llm")
        except PackageNotFoundError:
            return None


def run_engine_build(repo: str | Path, *, timeout_s: float = 4 * 3600.0) -> str:
    """Run the written build (GPU machines); returns the TensorRT-LLM version that built the engine.

    Needs ``tensorrt_llm`` importable by this interpreter and an NVIDIA GPU; otherwise raises
    :class:`MissingComponentError` (the files stay written, with the command to run them).
    """
    version = runtime_version()
    if version is None:
        raise MissingComponentError("tensorrt_llm is not installed here, so the engine was not built; the build "
                                    f"script and its plan are in {repo}", hint=_NGC_HINT)
    if not Hardware.detect().gpus:
        raise MissingComponentError("no NVIDIA GPU is visible (nvidia-smi lists none), so the engine was not built; "
                                    f"the build script and its plan are in {repo}", hint=_NGC_HINT)
    argv = engine_build_argv(repo, python=sys.executable)
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        code = proc.wait(timeout=timeout_s)
    except BaseException:
        os.killpg(proc.pid, 9)
        proc.wait()
        raise
    if code != 0:
        raise BuildError(f"the engine build exited with {code}: {' '.join(argv)}",
                         hint="read its output above; a CUDA out-of-memory error means smaller limits or more --tp")
    return version


@dataclass(frozen=True)
class EngineInfo:
    """What an engine folder's ``config.json`` says (the fields the checks use)."""

    path: Path
    version: str
    max_batch_size: int
    max_input_len: int
    max_seq_len: int
    max_num_tokens: int | None
    max_beam_width: int
    tp_size: int
    pp_size: int
    world_size: int
    paged_kv_cache: bool
    use_paged_context_fmha: bool

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: Path) -> EngineInfo:
        """Read TensorRT-LLM's engine ``config.json`` (0.9 onwards: ``pretrained_config`` + ``build_config``)."""
        try:
            build = config["build_config"]
            mapping = config.get("pretrained_config", {}).get("mapping", {})
            plugin = build.get("plugin_config", {})
            tp = int(mapping.get("tp_size", 1))
            pp = int(mapping.get("pp_size", 1))
            # kv_cache_type replaced plugin_config.paged_kv_cache in 0.12; read whichever is there.
            kv_type = build.get("kv_cache_type")
            paged = str(kv_type).upper() == "PAGED" if kv_type is not None else bool(plugin.get("paged_kv_cache"))
            return cls(
                path=path,
                version=str(config["version"]),
                max_batch_size=int(build["max_batch_size"]),
                max_input_len=int(build["max_input_len"]),
                max_seq_len=int(build["max_seq_len"]),
                max_num_tokens=int(build["max_num_tokens"]) if build.get("max_num_tokens") is not None else None,
                max_beam_width=int(build.get("max_beam_width", 1)),
                tp_size=tp,
                pp_size=pp,
                world_size=int(mapping.get("world_size", tp * pp)),
                paged_kv_cache=paged,
                use_paged_context_fmha=bool(plugin.get("use_paged_context_fmha", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: not a TensorRT-LLM engine config ({type(exc).__name__}: {exc})",
                              hint="point at the folder trtllm-build or LLM.save() wrote (it holds config.json "
                                   "and rank*.engine)") from exc


def read_engine_config(engine_dir: str | Path) -> EngineInfo:
    """Parse ``<engine_dir>/config.json``."""
    path = Path(engine_dir) / "config.json"
    data = read_model_json(path, what="engine config", hint="build the engine first (build_engine.py)")
    return EngineInfo.from_config(data, path)


_RELEASE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)((?:rc|a|b)\d+|\.dev\d+)?")


def same_release(a: str, b: str) -> bool:
    """Whether two TensorRT-LLM versions build and load the same engines: the release and any
    pre-release tag must match; ``.postN`` and ``+local`` suffixes (packaging fixes) do not count."""
    ma, mb = _RELEASE.match(a), _RELEASE.match(b)
    if ma is None or mb is None:
        return a.strip() == b.strip()
    return ma.group(1) == mb.group(1) and (ma.group(2) or "") == (mb.group(2) or "")


def check_engine(
    engine_dir: str | Path,
    *,
    runtime: str | None,
    triton_max_batch_size: int | None = None,
    gpu_ids: Sequence[int] | None = None,
    enable_kv_cache_reuse: bool = False,
) -> EngineInfo:
    """Refuse an engine the runtime cannot serve as configured; returns what the engine says.

    ``runtime`` is the TensorRT-LLM version of the server that will load it (``None``: unknown,
    not checked). Engines serialize TensorRT and TensorRT-LLM internals, so another release
    refuses them at load time or, worse, misbehaves: the check stops that before deploying.
    """
    info = read_engine_config(engine_dir)
    where = str(info.path)
    if runtime is not None and not same_release(info.version, runtime):
        raise ConfigError(f"{where}: the engine was built by TensorRT-LLM {info.version} but the runtime is "
                          f"{runtime}; engines load only in the release that built them",
                          hint=f"rebuild the engine with TensorRT-LLM {runtime} (build_engine.py in that container), "
                               f"or serve it with a container that ships TensorRT-LLM {info.version}")
    if triton_max_batch_size is not None and triton_max_batch_size > info.max_batch_size:
        raise ConfigError(f"{where}: Triton max_batch_size {triton_max_batch_size} exceeds the engine's "
                          f"max_batch_size {info.max_batch_size}",
                          hint=f"set --max-batch-size {info.max_batch_size} or less, or rebuild the engine")
    if gpu_ids is not None and len(gpu_ids) != info.world_size:
        raise ConfigError(f"{where}: the engine was built for world size {info.world_size} "
                          f"(tp {info.tp_size} × pp {info.pp_size}) but {len(gpu_ids)} GPU id(s) are given "
                          f"({','.join(map(str, gpu_ids))})",
                          hint=f"give exactly {info.world_size} GPU ids (--gpu-ids), or rebuild with matching --tp/--pp")
    if enable_kv_cache_reuse and not info.use_paged_context_fmha:
        raise ConfigError(f"{where}: KV-cache reuse needs an engine built with use_paged_context_fmha, "
                          "and this one was not", hint="rebuild with paged context FMHA, or drop --kv-reuse")
    if not info.paged_kv_cache:
        raise ConfigError(f"{where}: the engine has no paged KV cache; in-flight batching needs it",
                          hint="rebuild with kv_cache_type paged")
    return info
