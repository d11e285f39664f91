"""Model repository layout: model folders, integer version folders, model files.

::

    model_repository/
      <model>/config.pbtxt
      <model>/<version>/<model file>      version: an integer folder name (no leading zeros)
      <ensemble>/config.pbtxt
      <ensemble>/1/                         ensembles still need a (empty) version folder
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import user_path_errors
from tritonkit._values import excerpt
from tritonkit.errors import ConfigError
from tritonkit.repository.names import name_problem
from tritonkit.repository.pbtxt import CONFIG_FILENAME, atomic_write, read_config, write_config
from tritonkit.repository.spec import ModelSpec
from tritonkit.triton_releases import (
    TritonRelease,
    check_config_for_release,
    default_model_file,
    newest_release,
    platform_backends,
    resolve_release,
)

__all__ = [
    "DEFAULT_MODEL_FILENAMES",
    "PLATFORM_BACKENDS",
    "backend_of",
    "FileSource",
    "ModelEntry",
    "ModelRepository",
    "expected_model_filename",
    "model_folder",
]

#: Platforms the newest Triton release knows, and the backend each one implies (an ensemble: none;
#: the server runs it). Per release: :func:`tritonkit.triton_releases.platform_backends`.
PLATFORM_BACKENDS = platform_backends(newest_release())


def backend_of(config: mc.ModelConfig) -> str:
    """The backend library a model needs: its ``backend``, else its platform's ('' for an ensemble or
    an unknown platform)."""
    if config.backend:
        return str(config.backend)
    return PLATFORM_BACKENDS.get(config.platform, "")


#: The file (or folder) Triton looks for in a version folder, by backend or platform.
DEFAULT_MODEL_FILENAMES: dict[str, str] = {
    "onnxruntime": "model.onnx",
    "onnxruntime_onnx": "model.onnx",
    "tensorrt": "model.plan",
    "tensorrt_plan": "model.plan",
    "pytorch": "model.pt",
    "pytorch_libtorch": "model.pt",
    "tensorflow": "model.savedmodel",
    "tensorflow_savedmodel": "model.savedmodel",
    "tensorflow_graphdef": "model.graphdef",
    "python": "model.py",
    "openvino": "model.xml",
    "dali": "model.dali",
}

#: What a model file can be given as: bytes or text to write, or a path to copy (file or folder).
FileSource: TypeAlias = "bytes | str | Path"


def expected_model_filename(config: mc.ModelConfig, release: TritonRelease | None = None) -> str | None:
    """The model file Triton will look for, or ``None`` when the backend needs none (ensembles,
    TensorRT-LLM, custom backends whose file we cannot know). ``release``: the Triton release
    (default: the newest line tritonkit knows), for platforms whose file changed between releases."""
    if config.default_model_filename:
        return str(config.default_model_filename)
    if config.platform == "ensemble":
        return None
    by_release = default_model_file(config.platform, config.backend, release or newest_release())
    if by_release is not None:
        return by_release
    # Triton uses the backend when both are set (seen on 2.51: platform onnxruntime_onnx with
    # backend python loads model.py), so the backend decides the file name first.
    for key in (config.backend, config.platform):
        if key in DEFAULT_MODEL_FILENAMES:
            return DEFAULT_MODEL_FILENAMES[key]
    return None


def model_folder(root: Path | str, name: str) -> Path:
    """``root/name``, refusing a model name that would not be one folder inside ``root``.

    Every model name that becomes a path (from the command line, a spec, a load request) goes
    through here: an empty or hidden name, ``.``/``..``, a path separator, or a symlink that
    leads out of the repository would read or write another folder than the user named.
    """
    base = Path(root)
    problem = name_problem(name, "model")
    if problem is not None:
        raise ConfigError(
            f"model name {excerpt(name)} {problem} ({base})",
            hint="use the model's own folder name, of printable characters: no '/', no '..', not starting with '.'",
        )
    path = base / name
    if path.resolve().parent != base.resolve():
        raise ConfigError(f"model {excerpt(name)} leads outside the repository {base} (a symlink to {path.resolve()})",
                          hint="keep model folders inside the repository, or serve that repository instead")
    return path


@dataclass(frozen=True)
class ModelEntry:
    """One model folder in a repository."""

    root: Path

    @property
    def name(self) -> str:
        """The folder name (what Triton calls the model)."""
        return self.root.name

    @property
    def config_path(self) -> Path:
        """``<model>/config.pbtxt``."""
        return self.root / CONFIG_FILENAME

    def read_config(self) -> mc.ModelConfig:
        """Parse this model's ``config.pbtxt``."""
        return read_config(self.config_path)

    def version_dirs(self) -> list[Path]:
        """Sub-folders whose names are versions Triton will use, in order.

        Triton 2.51 reads a folder as a version only when its name is a canonical
        non-negative integer: ``0`` and ``3`` are versions, ``01`` and ``v1`` are not.
        """
        found = [p for p in self.root.iterdir() if p.is_dir() and p.name.isascii() and p.name.isdigit() and str(int(p.name)) == p.name]
        return sorted(found, key=lambda p: int(p.name))

    def versions(self) -> list[int]:
        """The version numbers present, ascending."""
        return [int(p.name) for p in self.version_dirs()]

    def version_path(self, version: int) -> Path:
        """``<model>/<version>``."""
        return self.root / str(version)

    def files(self, version: int) -> list[str]:
        """Names in one version folder, sorted."""
        path = self.version_path(version)
        return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


class ModelRepository:
    """A Triton model repository on disk.

    >>> repo = ModelRepository.init("model_repository")          # doctest: +SKIP
    >>> repo.add_model(spec, files={"model.onnx": Path("m.onnx")})  # doctest: +SKIP
    """

    def __init__(self, root: Path | str, *, server_version: str | None = None) -> None:
        self.root = Path(root)
        #: The Triton release the configs are written for: a config with a field it cannot read,
        #: or a platform it does not serve, is refused (default: the newest line tritonkit knows).
        self.release: TritonRelease = resolve_release(server_version).release

    @classmethod
    def init(cls, root: Path | str, *, server_version: str | None = None) -> ModelRepository:
        """Create the repository folder (fine if it exists and is a folder)."""
        written_for = cls(root, server_version=server_version)  # an unknown release is refused before mkdir
        path = Path(root)
        if path.exists() and not path.is_dir():
            raise ConfigError(f"{path}: exists and is not a folder", hint="choose another path for the repository")
        with user_path_errors("create the repository folder"):
            path.mkdir(parents=True, exist_ok=True)
        return written_for

    def _require(self) -> None:
        if not self.root.is_dir():
            raise ConfigError(f"{self.root}: repository folder does not exist",
                              hint=f"create it with `tritonkit repo init {self.root}`")

    def model_names(self) -> list[str]:
        """Names of the model folders (every sub-folder not starting with '.'), sorted."""
        self._require()
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def models(self) -> list[ModelEntry]:
        """Every model folder."""
        return [ModelEntry(self.root / n) for n in self.model_names()]

    def model(self, name: str) -> ModelEntry:
        """One model folder; :class:`ConfigError` if it is not there."""
        path = model_folder(self.root, name)
        if not path.is_dir():
            raise ConfigError(f"model {name!r} not found in {self.root}",
                              hint=f"models here: {', '.join(self.model_names()) or '(none)'}")
        return ModelEntry(path)

    def __contains__(self, name: object) -> bool:
        try:
            return isinstance(name, str) and model_folder(self.root, name).is_dir()
        except ConfigError:
            return False

    def add_model(
        self,
        config: ModelSpec | mc.ModelConfig,
        *,
        files: Mapping[str, FileSource] | None = None,
        version: int = 1,
        overwrite: bool = False,
    ) -> ModelEntry:
        """Write a model: ``<name>/config.pbtxt`` and ``<name>/<version>/`` with ``files``.

        ``files`` maps a name inside the version folder to bytes/text to write or a
        :class:`~pathlib.Path` to copy (a folder is copied whole, e.g. a SavedModel).
        The version folder is always created, even empty (ensembles need one).
        """
        proto = config.to_proto() if isinstance(config, ModelSpec) else config
        if not proto.name:
            raise ConfigError("cannot add a model without a name", hint="set ModelConfig.name")
        check_config_for_release(proto, self.release, model=proto.name)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ConfigError(f"model {proto.name!r}: version {version!r} must be a non-negative integer",
                              hint="use 1 for a first version")
        entry = ModelEntry(model_folder(self.root, proto.name))
        if entry.config_path.exists() and not overwrite:
            raise ConfigError(f"model {proto.name!r} already exists in {self.root}",
                              hint="pass overwrite=True (CLI: --force) to replace its config and files")
        version_dir = entry.version_path(version)
        with user_path_errors(f"write model {proto.name!r}"):
            version_dir.mkdir(parents=True, exist_ok=True)
            for filename, source in (files or {}).items():
                self._place(version_dir / filename, source)
            write_config(proto, entry.config_path)
        return entry

    def write_config(self, config: ModelSpec | mc.ModelConfig) -> Path:
        """(Re)write only ``<name>/config.pbtxt`` (refused, like :meth:`add_model`, when the target
        release cannot read it)."""
        proto = config.to_proto() if isinstance(config, ModelSpec) else config
        check_config_for_release(proto, self.release, model=proto.name)
        with user_path_errors(f"write the config of model {proto.name!r}"):
            return write_config(proto, model_folder(self.root, proto.name) / CONFIG_FILENAME)

    @staticmethod
    def _place(target: Path, source: FileSource) -> None:
        if isinstance(source, Path):
            if source.is_dir():
                if target.exists():
                    shutil.rmtree(target)
                shutil.copytree(source, target)
            elif source.is_file():
                tmp = target.with_name(f".{target.name}.tmp")
                shutil.copyfile(source, tmp)
                tmp.replace(target)
            else:
                raise ConfigError(f"model file source {source} does not exist", hint="check the path")
        else:
            atomic_write(target, source)
