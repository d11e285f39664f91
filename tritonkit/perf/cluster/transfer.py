"""Folders as bytes, to travel through Ray's object store: a model folder to a node, a sweep's
results back. An uncompressed tar in memory (model files compress poorly); unpacking refuses any
member that would land outside the target folder, links that lead out of it, and devices.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from collections.abc import Iterable
from pathlib import Path

from tritonkit._lock import LOCK_FILENAME
from tritonkit.errors import ClusterError

__all__ = ["pack_contents", "pack_folders", "replace_folder", "unpack"]


def _no_lock(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    # A folder lock belongs to the machine that held it: landing one would overwrite the driver's own.
    return None if Path(member.name).name == LOCK_FILENAME else member


def pack_folders(root: Path, names: Iterable[str]) -> bytes:
    """``root/<name>`` for each of ``names`` (folders or files; missing ones skipped), as one tar
    whose members are relative to ``root``; folder locks are left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in dict.fromkeys(names):
            path = root / name
            if path.exists() and name != LOCK_FILENAME:
                tar.add(path, arcname=name, filter=_no_lock)
    return buffer.getvalue()


def pack_contents(folder: Path) -> bytes:
    """Everything in ``folder`` (not the folder itself), as :func:`pack_folders` packs it."""
    return pack_folders(folder, sorted(p.name for p in folder.iterdir()) if folder.is_dir() else [])


def _inside(target: Path, member: tarfile.TarInfo) -> bool:
    resolved = (target / member.name).resolve()
    if resolved != target and target not in resolved.parents:
        return False
    if member.issym() or member.islnk():
        link = (resolved.parent / member.linkname).resolve() if member.issym() else (target / member.linkname).resolve()
        return link == target or target in link.parents
    return member.isfile() or member.isdir()


def unpack(blob: bytes, target: Path) -> Path:
    """Unpack ``blob`` (from :func:`pack_folders`) into ``target`` (created); returns ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    root = target.resolve()
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r") as tar:
        members = tar.getmembers()
        bad = [m.name for m in members if not _inside(root, m)]
        if bad:
            raise ClusterError(f"refusing to unpack {', '.join(bad[:3])}: outside {target} or not a plain file",
                               hint="the folder sent between nodes must hold only files and folders")
        tar.extractall(root, members=members)  # noqa: S202 - every member checked above
    return target


def replace_folder(incoming: Path, final: Path) -> None:
    """Make ``incoming`` (a folder beside ``final``) the folder ``final``: whatever ``final`` held is
    moved aside and removed only once the new one is in place, so a crash leaves one whole folder."""
    aside = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(aside)
    incoming.rename(final)
    shutil.rmtree(aside, ignore_errors=True)
