"""Land a build in the repository so that a reader never sees half a model and nothing is lost.

Where the staging folder goes — never a folder of its own in the repository root, because
tritonserver takes every folder there (hidden ones too) for a model and stops on one it cannot load:

- the model folder exists: inside it, ``<model>/.tritonkit-staging-…``; Triton reads only
  canonical integer folders in a model folder as versions and skips the rest;
- a new model: a temporary folder on the repository's file system but outside it (the system
  temporary folder, else the repository's parent), so the commit is one rename; when neither is
  writable there (a writable repository under a read-only parent), inside the new model's own
  folder, with ``config.pbtxt`` moved in last.

The commit touches only what the build owns: a new model folder; or one version folder and
``config.pbtxt``, keeping the model's other versions and any other files. Replacing a version
swaps the old and new folders in one ``renameat2(RENAME_EXCHANGE)`` where the file system has it,
else renames the old one aside and puts it back on any failure. Until ``config.pbtxt`` is in
place an interruption (an exception, Ctrl-C, SIGTERM) rolls back; the old version is deleted only
after. SIGTERM acts like Ctrl-C while a build runs on the main thread, so staging is removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType, TracebackType

from tritonkit._fs import path_error, user_path_errors
from tritonkit._lock import FolderLock, model_folder_lock
from tritonkit.builders.versions import check_versions_agree, merged_config
from tritonkit.errors import BuildError, ConfigError
from tritonkit.repository import model_folder, read_config, write_config

__all__ = [
    "STAGING_PREFIX",
    "StagedModel",
    "staging_errors",
    "validate_model_name",
]

#: Name prefix of staging folders; never a number, so Triton never reads one as a version.
STAGING_PREFIX = ".tritonkit-staging-"
_OWNER_FILE = "owner.pid"
_RENAME_EXCHANGE = 2  # linux/fs.h
# A staging folder without its owner file younger than this may belong to a build starting right now.
_UNOWNED_GRACE_S = 60.0


def validate_model_name(name: str, repo: Path) -> Path:
    """Return ``repo/name``, refusing a name that is empty, hidden, holds a control character, or would
    land outside ``repo`` (the repository's one rule for model names: :func:`~tritonkit.repository.model_folder`)."""
    return model_folder(repo, name)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2``); False where the system or file system lacks it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StagedModel:
    """A model version under construction.

    ``with StagedModel(repo, name, version, force=...) as stage:`` write the version's files into
    ``stage.version_dir`` and ``config.pbtxt`` into ``stage.model_dir``, then ``stage.commit()``.
    Leaving the block without committing deletes everything staged; the repository is as it was.

    ``temp_dirs`` are the places tried for a new model's staging (default: the system temporary
    folder, then the repository's parent); only those on the repository's file system are used.
    ``fault_hook`` is called with the name of each commit step (``"staged"``, ``"aside"``,
    ``"swapped"``, ``"config"``) so tests can interrupt there; ``exchange=False`` uses the
    two-rename swap even where ``renameat2`` exists.
    """

    def __init__(self, repo: Path | str, name: str, version: int, *, force: bool,
                 temp_dirs: Sequence[Path] | None = None, fault_hook: Callable[[str], None] | None = None,
                 exchange: bool = True) -> None:
        self.repo = Path(repo)
        self.name = name
        self.version = version
        self.force = force
        self.target = validate_model_name(name, self.repo)
        self.temp_dirs = list(temp_dirs) if temp_dirs is not None else None
        self.fault_hook = fault_hook
        self.exchange = exchange
        self.outcome = ""
        if self.repo.exists() and not self.repo.is_dir():
            raise ConfigError(f"repository {self.repo} exists and is not a folder", hint="choose another --repo")
        if self.target.exists() and not self.target.is_dir():
            raise ConfigError(f"{self.target} exists and is not a folder, so model {name!r} cannot go there",
                              hint="move that file away, or choose another --name")
        if self.version_target.exists() and not force:
            raise ConfigError(f"model {name!r} already has version {version} in {self.repo}",
                              hint=f"pass --force to replace version {version} (other versions stay), or add "
                                   f"--version {self.next_free_version()}")
        self._root: Path | None = None
        self._created_model_dir = False
        self._created_repo = False
        self._lock: FolderLock | None = None
        self._previous_handler: signal.Handlers | Callable[[int, FrameType | None], object] | int | None = None

    @property
    def version_target(self) -> Path:
        """``<repo>/<name>/<version>``: where the new version lands."""
        return self.target / str(self.version)

    def next_free_version(self) -> int:
        """The version after the highest one present (1 for a new model)."""
        present = [int(p.name) for p in self.target.iterdir() if p.name.isascii() and p.name.isdigit()] if self.target.is_dir() else []
        return max(present, default=0) + 1

    def existing_config_path(self) -> Path | None:
        """The model's ``config.pbtxt`` when the model already exists with one."""
        path = self.target / "config.pbtxt"
        return path if path.is_file() else None

    # ------------------------------------------------------------------ staging

    def __enter__(self) -> StagedModel:
        # SIGTERM first: from here on every way out removes what was staged.
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
        self._created_repo = not self.repo.exists()
        try:
            # A second build (or a sweep's write-back) of this model while this one runs is refused:
            # interleaved commits would pair one build's version with the other's config.
            self._lock = model_folder_lock(self.target, purpose=f"build {self.name}").acquire()
            with user_path_errors("create the staging folder for the build"):
                self._make_staging()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _make_staging(self) -> None:
        self.repo.mkdir(parents=True, exist_ok=True)
        if self.target.is_dir():
            self._clear_leftovers()
            self._root = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.target))
        else:
            # The commit renames into the repository: find out now, not after minutes of work.
            with user_path_errors(f"write model {self.name!r} into the repository", self.repo):
                fd, probe = tempfile.mkstemp(prefix=STAGING_PREFIX, dir=self.repo)
                os.close(fd)
                os.unlink(probe)
            self._root = self._outside_staging()
            if self._root is None:
                self.target.mkdir()
                self._created_model_dir = True
                self._root = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.target))
        (self._root / _OWNER_FILE).write_text(str(os.getpid()), encoding="utf-8")
        self.version_dir.mkdir(parents=True)

    def _outside_staging(self) -> Path | None:
        device = self.repo.stat().st_dev
        candidates = self.temp_dirs if self.temp_dirs is not None else [Path(tempfile.gettempdir()),
                                                                         self.repo.resolve().parent]
        for folder in candidates:
            try:
                if folder.stat().st_dev != device:
                    continue
                self._clear_leftovers(folder)  # a new model's build killed here (SIGKILL) left its staging
                return Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=folder))
            except OSError:
                continue
        return None

    def _clear_leftovers(self, where: Path | None = None) -> None:
        """Remove staging folders of builds that died (SIGKILL) in ``where`` (default: the model
        folder), restoring a version set aside by one."""
        for folder in (where or self.target).glob(STAGING_PREFIX + "*"):
            if not folder.is_dir() or folder.is_symlink():
                continue
            try:
                owner = int((folder / _OWNER_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                # No owner yet: another build may have just created it; only an old one is abandoned.
                owner = 0
                if time.time() - folder.stat().st_mtime < _UNOWNED_GRACE_S:
                    continue
            if owner and _pid_alive(owner):
                continue
            marker = folder / "version"
            number = marker.read_text(encoding="utf-8").strip() if marker.is_file() else ""
            if where is None and (folder / "replaced").is_dir() and number.isascii() and number.isdigit() \
                    and not (self.target / number).exists():
                os.replace(folder / "replaced", self.target / number)
            shutil.rmtree(folder, ignore_errors=True)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._previous_handler = None
        if self._root is not None:
            if isinstance(exc, (BuildError, ConfigError)):
                self._reword(exc)
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if not self.outcome:
            # A failed build leaves no folder it created, unless something else was put there meanwhile.
            for created, folder in ((self._created_model_dir, self.target), (self._created_repo, self.repo)):
                if created:
                    with contextlib.suppress(OSError):
                        folder.rmdir()

    def _reword(self, exc: BuildError | ConfigError) -> None:
        """Name the repository, not the staging folder about to vanish, in a failure's message and fix
        (a full disk while copying weights fails on a staged file)."""
        def user(text: str) -> str:
            return text.replace(str(self.model_dir), str(self.target)).replace(str(self.staging_root), str(self.repo))
        exc.message = user(exc.message)
        exc.args = (exc.message,)
        exc.hint = user(exc.hint) if exc.hint else exc.hint

    @property
    def staging_root(self) -> Path:
        """The temporary folder that stands in for the repository until :meth:`commit`."""
        if self._root is None:
            raise RuntimeError("StagedModel used outside its with-block")
        return self._root

    @property
    def model_dir(self) -> Path:
        """``<staging>/<name>``: write ``config.pbtxt`` here."""
        return self.staging_root / self.name

    @property
    def version_dir(self) -> Path:
        """``<staging>/<name>/<version>``: write the version's files here."""
        return self.model_dir / str(self.version)

    # ------------------------------------------------------------------ commit

    def _step(self, name: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(name)

    def commit(self) -> Path:
        """Move the staged version (and config) into the repository; return the model folder.

        :attr:`outcome` then says what happened ("new model", "added version 2 beside 1",
        "replaced version 2"). A model whose other versions declare different inputs or outputs
        is refused with a :class:`ConfigError` before anything moves.
        """
        staged_config = self.model_dir / "config.pbtxt"
        with user_path_errors(f"write model {self.name!r} into the repository", self.repo):
            if not self.target.exists():
                self._step("staged")
                os.replace(self.model_dir, self.target)
                self.outcome = f"new model, version {self.version}"
                return self.target
            others = [v for v in self._versions() if v != self.version]
            existing = self.existing_config_path()
            if existing is not None:
                old = read_config(existing)
                new = read_config(staged_config)
                if others:
                    check_versions_agree(old, new, model=self.name, versions=others, config_path=existing)
                write_config(merged_config(old, new), staged_config)
            replacing = self.version_target.exists()
            self._step("staged")
            self._swap_in(staged_config, replacing=replacing)
        if self._created_model_dir:
            self.outcome = f"new model, version {self.version}"
            return self.target
        kept = ", ".join(str(v) for v in others)
        if replacing:
            self.outcome = f"replaced version {self.version}" + (f" (kept {kept})" if kept else "")
        else:
            self.outcome = f"added version {self.version}" + (f" beside {kept}" if kept else "")
        return self.target

    def _versions(self) -> list[int]:
        return sorted(int(p.name) for p in self.target.iterdir()
                      if p.is_dir() and p.name.isdigit() and str(int(p.name)) == p.name)

    def _swap_in(self, staged_config: Path, *, replacing: bool) -> None:
        """New version folder in, then config.pbtxt; rolled back on any interruption before the config."""
        target, staged = self.version_target, self.version_dir
        aside = self.staging_root / "replaced"
        exchanged = False
        if replacing:
            (self.staging_root / "version").write_text(str(self.version), encoding="utf-8")
            exchanged = self.exchange and _exchange(staged, target)
            if not exchanged:
                os.replace(target, aside)
                try:
                    self._step("aside")
                    os.replace(staged, target)
                except BaseException:
                    os.replace(aside, target)
                    raise
        else:
            os.replace(staged, target)
        try:
            self._step("swapped")
            if staged_config.exists():
                os.replace(staged_config, self.target / "config.pbtxt")
        except BaseException:
            self._roll_back(exchanged=exchanged, replacing=replacing)
            raise
        self._step("config")

    def _roll_back(self, *, exchanged: bool, replacing: bool) -> None:
        target, staged = self.version_target, self.version_dir
        if exchanged:
            _exchange(staged, target)
        elif replacing:
            os.replace(target, staged)
            os.replace(self.staging_root / "replaced", target)
        else:
            os.replace(target, staged)


def _without_staging_paths(message: str, stage: StagedModel, user_file: Path) -> str:
    """``message`` with staging paths replaced by what the user knows: their file or the final folder."""
    root = str(stage.staging_root)
    for staged in sorted({str(p) for p in stage.staging_root.rglob("*.onnx")}, key=len, reverse=True):
        message = message.replace(staged, f"{user_file} (as prepared for serving)")
    return message.replace(str(stage.model_dir), str(stage.target)).replace(root, str(stage.repo))


@contextlib.contextmanager
def staging_errors(stage: StagedModel, user_file: Path) -> Iterator[None]:
    """Build and config errors raised inside name the user's file, never a staging path; an
    ``OSError`` becomes a :class:`ConfigError` naming the model."""
    try:
        yield
    except (BuildError, ConfigError) as exc:
        exc.message = _without_staging_paths(exc.message, stage, user_file)
        exc.args = (exc.message,)
        raise
    except OSError as exc:
        raise path_error(exc, f"build model {stage.name!r}") from exc
