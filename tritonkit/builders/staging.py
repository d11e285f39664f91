"""Build a model folder beside the repository, then move it in with one rename.

The staging folder lives in the repository's *parent* folder: on the same file system (so
the final ``os.replace`` is a rename, not a copy) but outside the repository, where a
server polling the repository would otherwise see a half-written model.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from tritonkit.errors import ConfigError

__all__ = ["StagedModel", "validate_model_name"]

_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


def validate_model_name(name: str, repo: Path) -> Path:
    """Return ``repo/name``, refusing a name that is empty, hidden, or would land outside ``repo``."""
    if not name or not _NAME_RE.match(name) or name in (".", ".."):
        raise ConfigError(f"model name {name!r} is not a plain folder name",
                          hint="use letters, digits, '_', '-' and '.', not starting with '.' or '-' "
                               "(no '/' or '..': the model must stay inside the repository folder)")
    if (repo / name).resolve().parent != repo.resolve():
        raise ConfigError(f"model name {name!r} would escape the repository folder {repo}",
                          hint="use a plain folder name")
    return repo / name


class StagedModel:
    """A model folder under construction: ``with StagedModel(repo, name, version, force=...) as stage:``
    write into ``stage.version_dir`` (and ``stage.model_dir``), call ``stage.commit()``; leaving the
    block without committing (an exception) deletes everything staged and the repository is untouched."""

    def __init__(self, repo: Path | str, name: str, version: int, *, force: bool) -> None:
        self.repo = Path(repo)
        self.name = name
        self.version = version
        self.force = force
        self.target = validate_model_name(name, self.repo)
        if self.repo.exists() and not self.repo.is_dir():
            raise ConfigError(f"repository {self.repo} exists and is not a folder", hint="choose another --repo")
        if self.target.exists() and not force:
            raise ConfigError(f"model {name!r} already exists in {self.repo}",
                              hint="pass --force to replace it, or choose another --name")
        self._root: Path | None = None

    def __enter__(self) -> StagedModel:
        self.repo.parent.mkdir(parents=True, exist_ok=True)
        self._root = Path(tempfile.mkdtemp(prefix=f".tritonkit-build-{self.name}-", dir=self.repo.parent))
        self.version_dir.mkdir(parents=True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    @property
    def staging_root(self) -> Path:
        """The temporary folder that stands in for the repository until :meth:`commit`."""
        if self._root is None:
            raise RuntimeError("StagedModel used outside its with-block")
        return self._root

    @property
    def model_dir(self) -> Path:
        """``<staging>/<name>``."""
        return self.staging_root / self.name

    @property
    def version_dir(self) -> Path:
        """``<staging>/<name>/<version>``."""
        return self.model_dir / str(self.version)

    def commit(self) -> Path:
        """Move the staged model folder into the repository; return its final path.

        An existing folder (allowed by ``force``) is renamed aside first and deleted after the
        new one is in, so a reader sees either the old model or the new one.
        """
        self.repo.mkdir(parents=True, exist_ok=True)
        if self.target.exists():
            aside = self.staging_root / ".replaced"
            os.replace(self.target, aside)
            try:
                os.replace(self.model_dir, self.target)
            except OSError:
                os.replace(aside, self.target)
                raise
        else:
            os.replace(self.model_dir, self.target)
        return self.target
