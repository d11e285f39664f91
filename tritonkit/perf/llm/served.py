"""What a served TensorRT-LLM pipeline says about itself: its release line and its tokenizer.

* **The line** (:func:`trtllm_layout`): input names differ between TensorRT-LLM lines (see
  :mod:`tritonkit.trtllm_versions`, the one place they are written down): the minimum output
  length is ``min_length`` up to 0.19 and ``min_tokens`` in 1.x. The line comes from
  ``--trtllm-version``, else from the inputs the model declares, else — for an ensemble or BLS
  that accepts both spellings — from the inputs of the engine model behind it (the ensemble's
  steps, the BLS's ``tensorrt_llm_model_name``). Each request then asks for exactly its output
  length (minimum = maximum) under the name that line reads, as GenAI-Perf's deterministic
  output length does.
* **The tokenizer** (:func:`find_tokenizer`): the preprocessing model's ``tokenizer_dir``
  parameter, read from the server's model config (:class:`~tritonkit.server.admin.ServerAdmin`),
  or from the repository on disk (``--repo``) when the server's path is not a folder here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tritonkit.errors import ConfigError, TritonKitError
from tritonkit.trtllm_versions import (
    TrtllmInterface,
    line_from_inputs,
    llmapi_from_inputs,
    resolve_trtllm_version,
)

if TYPE_CHECKING:
    from tritonkit.perf.llm.prompts import RequestLayout
    from tritonkit.server.admin import ServerAdmin

__all__ = ["FoundTokenizer", "TrtllmChoice", "find_tokenizer", "trtllm_layout"]

#: The layouts of TensorRT-LLM's interfaces (the ensemble / BLS text one, the engine's ids one).
_TRTLLM_LAYOUTS = ("text", "ids")
#: The name upstream's BLS calls its preprocessing model by (tensorrt_llm_bls lib/triton_decoder.py).
_BLS_PREPROCESSING = "preprocessing"


@dataclass(frozen=True)
class TrtllmChoice:
    """The TensorRT-LLM line requests are written for, and where that came from."""

    interface: TrtllmInterface | None
    origin: str
    #: The input the deterministic output length goes in (``None``: the model declares none).
    min_tokens_input: str | None

    def describe(self) -> str:
        """One line for the result's notes."""
        line = "TensorRT-LLM line unknown" if self.interface is None else f"TensorRT-LLM {self.interface.version}"
        sent = (f"; {self.min_tokens_input} = the output length asked for" if self.min_tokens_input
                else "; no minimum-length input: outputs may end early at an end token")
        return f"{line} ({self.origin}){sent}"


@dataclass(frozen=True)
class FoundTokenizer:
    """The folder holding the model's ``tokenizer.json`` and how it was found."""

    path: Path
    origin: str


def _admin(url: str) -> ServerAdmin:
    from tritonkit.server.admin import ServerAdmin

    return ServerAdmin(url, protocol="grpc")


def _inputs(admin: ServerAdmin, model: str) -> set[str]:
    meta = admin.model_metadata(model)
    return {str(t.get("name")) for t in meta.get("inputs", [])}


def _behind(admin: ServerAdmin, model: str) -> list[str]:
    """The models ``model`` calls: its ensemble steps, else a BLS's engine and preprocessing models."""
    config = admin.model_config(model)
    steps = [s.model_name for s in config.ensemble_scheduling.step]
    if steps:
        return steps
    if "tensorrt_llm_model_name" not in config.parameters:
        return []  # neither an ensemble nor a BLS: it calls nothing we know of
    engine = config.parameters["tensorrt_llm_model_name"].string_value
    return [engine or "tensorrt_llm", _BLS_PREPROCESSING]


def _engine_line(url: str, model: str) -> tuple[TrtllmInterface | None, str | None]:
    """The line the engine model behind ``model`` declares, and that model's name."""
    try:
        with contextlib.closing(_admin(url)) as admin:
            for name in _behind(admin, model):
                inputs = _inputs(admin, name)
                if "input_ids" in inputs:
                    return line_from_inputs(inputs), name
    except TritonKitError:
        return None, None  # an engine model we cannot read tells no line; the caller says so
    return None, None


def trtllm_layout(
    layout: RequestLayout, input_names: Iterable[str], *, model: str, url: str, requested: str | None = None
) -> tuple[RequestLayout, TrtllmChoice | None]:
    """``layout`` with the minimum-length input of the model's TensorRT-LLM line (see the module docstring).

    Not a TensorRT-LLM layout: returned unchanged (``requested`` is then a mistake). A
    ``requested`` line whose spelling the model does not declare is refused: Triton would
    reject every request ("unexpected inference input").
    """
    if layout.name == "llmapi":
        # The LLM-API model: no minimum-length input; its line is told by its tensors (or named).
        line = resolve_trtllm_version(requested, need_engine=False) if requested is not None \
            else llmapi_from_inputs(input_names)
        origin = f"--trtllm-version {requested}" if requested is not None else \
            f"the LLM-API tensors model {model!r} declares"
        return layout, TrtllmChoice(line, origin, None)
    if layout.name not in _TRTLLM_LAYOUTS:
        if requested is not None:
            raise ConfigError(f"--trtllm-version applies to TensorRT-LLM models; {model!r} speaks the "
                              f"{layout.name} interface", hint="drop --trtllm-version")
        return layout, None
    inputs = set(input_names)
    declared = line_from_inputs(inputs)
    interface: TrtllmInterface | None
    if requested is not None:
        interface, origin = resolve_trtllm_version(requested), f"--trtllm-version {requested}"
        if declared is not None and declared.min_tokens_input != interface.min_tokens_input:
            raise ConfigError(
                f"model {model!r} declares {declared.min_tokens_input!r} (TensorRT-LLM {declared.version}'s name), "
                f"but TensorRT-LLM {interface.version} (--trtllm-version {requested}) reads "
                f"{interface.min_tokens_input!r}", hint="pass the version the serving container ships, or drop "
                                                      "--trtllm-version to follow the model's inputs")
    elif declared is not None:
        interface, origin = declared, f"from the inputs model {model!r} declares"
    else:
        interface, engine = _engine_line(url, model) if layout.name == "text" else (None, None)
        origin = (f"from the inputs of its engine model {engine!r}" if interface is not None
                  else f"model {model!r} and the models behind it declare no line's names")
    name = interface.min_tokens_input if interface is not None else None
    if name not in inputs:
        name = None
    return replace(layout, min_tokens_input=name), TrtllmChoice(interface, origin, name)


def _tokenizer_dir_of(admin: ServerAdmin, model: str) -> tuple[str, str] | None:
    """(``tokenizer_dir``, the model holding it) from ``model`` or the models it calls."""
    for name in (model, *_behind(admin, model)):
        try:
            params = admin.model_config(name).parameters
        except TritonKitError:
            continue
        if "tokenizer_dir" in params and params["tokenizer_dir"].string_value:
            return params["tokenizer_dir"].string_value, name
    return None


def _from_repo(repo: Path, model_name: str) -> str | None:
    from tritonkit.repository.pbtxt import read_config

    config_path = repo / model_name / "config.pbtxt"
    if not config_path.is_file():
        return None
    params = read_config(config_path).parameters
    return params["tokenizer_dir"].string_value if "tokenizer_dir" in params else None


def find_tokenizer(model: str, url: str, *, repo: Path | None = None) -> FoundTokenizer | None:
    """The tokenizer folder of the TensorRT-LLM pipeline ``model`` belongs to, or ``None`` if it names none.

    Read from the server's config of the preprocessing model (``tokenizer_dir``); where that
    path is not a folder on this machine (a server in a container), from ``repo``'s copy of the
    same config (a relative path there is taken from the model's folder). A named folder
    without ``tokenizer.json`` is an error, not a silent fall-back to counting words.
    """
    try:
        with contextlib.closing(_admin(url)) as admin:
            found = _tokenizer_dir_of(admin, model)
    except TritonKitError:
        found = None
    if found is None:
        return None
    value, holder = found
    where = f"parameter tokenizer_dir of model {holder!r} (the server's config)"
    path = Path(value)
    if not path.is_dir() and repo is not None:
        on_disk = _from_repo(repo, holder)
        if on_disk:
            path = Path(on_disk) if Path(on_disk).is_absolute() else repo / holder / on_disk
            where = f"parameter tokenizer_dir of {repo / holder / 'config.pbtxt'}"
    if not (path / "tokenizer.json").is_file():
        raise ConfigError(f"{where} names {value}, which holds no tokenizer.json here",
                          hint="pass --tokenizer with the model's tokenizer folder, or --repo with the repository "
                               "on this machine")
    return FoundTokenizer(path, where)
