"""A lock on a folder, so that two writers never work in it at once; refused with who holds it.

The lock is ``FOLDER/.tritonkit.lock``, held with ``flock`` for as long as the holder runs and
filled with who holds it (pid, host, since, what for). ``flock`` is released by the kernel when
the holder dies, however it dies, so a lock left by a SIGKILL never blocks anyone: the next
writer takes it over and is told whose it was. A second writer while the holder lives is refused
with a :class:`LockedError` naming the holder.

``flock`` locks are per open file, not per process: two locks taken by one process on the same
folder refuse each other too, which is what a library user running two sweeps on threads needs.

Example::

    with FolderLock(out_dir, what="sweep folder", purpose="perf sweep resnet") as lock:
        if lock.taken_over is not None:
            print(lock.taken_over)
        ...
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from tritonkit._fs import path_error
from tritonkit.errors import LockedError

__all__ = ["LOCK_FILENAME", "FolderLock", "LockedError", "model_folder_lock"]

LOCK_FILENAME = ".tritonkit.lock"


def _describe(holder: dict[str, Any]) -> str:
    since = holder.get("since_utc", "?")
    purpose = holder.get("purpose")
    return (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since {since}"
            + (f" ({purpose})" if purpose else ""))


def _read_holder(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 4096):
        raw += chunk
    try:
        data = json.loads(raw.decode("utf-8", errors="replace")) if raw.strip() else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


class FolderLock:
    """An exclusive lock on ``folder`` (created when missing) for the life of a ``with`` block.

    ``lock_file`` puts the lock elsewhere (``folder`` is then neither needed nor created): every
    writer of that folder must name the same file.

    ``what`` names the folder in messages (``"sweep folder"``, ``"model folder"``); ``purpose``
    is recorded for whoever is refused. After entering, ``taken_over`` is a sentence when a
    dead holder's lock was taken over (``None`` otherwise).
    """

    def __init__(self, folder: str | os.PathLike[str], *, what: str = "folder", purpose: str = "",
                 lock_file: str | os.PathLike[str] | None = None) -> None:
        self.folder = Path(folder)
        # ``lock_file``: the lock of a folder that does not exist yet (a model being built) lives
        # elsewhere, so that the folder itself can appear in one rename.
        self.path = Path(lock_file) if lock_file is not None else self.folder / LOCK_FILENAME
        self.what = what
        self.purpose = purpose
        self.taken_over: str | None = None
        self._fd: int | None = None

    def acquire(self) -> FolderLock:
        """Take the lock, or raise :class:`LockedError` naming the live holder."""
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this FolderLock")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            while True:
                try:
                    fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                except FileNotFoundError:  # a lock folder of its own, removed by a releaser just now
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    holder = _read_holder(fd)
                    os.close(fd)
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise
                    raise LockedError(
                        f"the {self.what} {self.folder} is in use by another tritonkit process: {_describe(holder)}",
                        holder=holder,
                        hint="wait for it to finish, or choose another folder (two writers would spoil each "
                             "other's results)",
                    ) from None
                # A releaser unlinks the file after we opened it: then we hold a lock on a file
                # nobody else will see. Only a lock on the file now at the path counts.
                try:
                    same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    break
                os.close(fd)
            previous = _read_holder(fd)
            if previous.get("pid") is not None:
                # flock was free, so its writer is gone (the kernel releases it when a process dies).
                self.taken_over = (f"the {self.what} {self.folder} was locked by {_describe(previous)}, which is "
                                   "no longer running; its lock was taken over")
            record = {"pid": os.getpid(), "host": socket.gethostname(),
                      "since_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "purpose": self.purpose}
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, (json.dumps(record) + "\n").encode())
        except OSError as exc:
            raise path_error(exc, f"lock the {self.what}", self.path) from exc
        self._fd = fd
        return self

    def release(self) -> None:
        """Remove the lock file and let go (nothing when not held)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()  # while still holding it: a waiter that opened it re-checks the inode
        os.close(fd)
        if self.path.parent != self.folder:
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()  # a lock folder of its own goes once empty

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def model_folder_lock(model_dir: str | os.PathLike[str], *, purpose: str) -> FolderLock:
    """The lock every writer of a model folder takes (a build, a sweep's write-back).

    An existing folder holds its own lock file (Triton reads only numbered folders in a model
    folder). A model not built yet is locked outside the repository — the folder must appear
    whole in one rename, and the repository holds nothing but models — by a file named after
    its full path in ``<temp>/tritonkit-locks-<uid>/`` (one folder per user: a shared one would
    be writable by its creator only).
    """
    folder = Path(model_dir)
    if folder.is_dir():
        return FolderLock(folder, what="model folder", purpose=purpose)
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:24]
    beside = Path(tempfile.gettempdir()) / f"tritonkit-locks-{os.getuid()}" / f"{key}.lock"
    return FolderLock(folder, what="model folder", purpose=purpose, lock_file=beside)
