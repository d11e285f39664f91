"""Write the winning configuration into the repository, keeping the old one beside it.

The old ``config.pbtxt`` is copied byte for byte to ``config.pbtxt.orig-<UTC>`` in the same
model folder: Triton ignores extra files in a model folder (only integer sub-folders are
versions, and another sub-folder would be reported as one that is not), so the backup never
changes what the server loads. Restoring is one copy, printed with the result.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.repository import CONFIG_FILENAME, model_folder, render_config

__all__ = ["PendingWriteBack", "WriteBack", "plan_write_back", "restore_command", "write_winner"]


@dataclass(frozen=True)
class WriteBack:
    """Where the winner was written and where the previous config went (``None``: nothing changed,
    because the winner is the config already there)."""

    config_path: Path
    backup_path: Path | None

    @property
    def restore_command(self) -> str | None:
        """The shell command that puts the previous config back (``None`` when nothing changed)."""
        return restore_command(self.backup_path, self.config_path) if self.backup_path else None

    def to_dict(self) -> dict[str, str | None]:
        return {"config_path": str(self.config_path),
                "backup_path": str(self.backup_path) if self.backup_path else None,
                "restore_command": self.restore_command}


def restore_command(backup: Path, config: Path) -> str:
    return f"cp {shlex.quote(str(backup))} {shlex.quote(str(config))}"


@dataclass(frozen=True)
class PendingWriteBack:
    """A write-back decided but not yet done: where the winner goes, where the old file will be
    kept, and the bytes of both. The sweep writes its report first and only then calls
    :meth:`commit`, so a failure before it leaves the repository untouched."""

    planned: WriteBack
    original: bytes
    text: str

    def commit(self) -> WriteBack:
        """Copy the old config to the backup, then write the winner (each atomically)."""
        if self.planned.backup_path is None:
            return self.planned
        if self.planned.config_path.read_bytes() != self.original:
            raise ConfigError(f"{self.planned.config_path} changed while the sweep ran: the winner was not written",
                              hint="sweep again against the config as it is now")
        atomic_write(self.planned.backup_path, self.original)
        atomic_write(self.planned.config_path, self.text)
        return self.planned


def plan_write_back(repo: Path, model: str, config: mc.ModelConfig, *, now: datetime | None = None) -> PendingWriteBack:
    """Decide writing ``config`` as ``repo/model/config.pbtxt`` with the present file kept as
    ``config.pbtxt.orig-<UTC>``; nothing is written (a winner that is already there needs no backup)."""
    path = model_folder(Path(repo), model) / CONFIG_FILENAME
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: nothing to write the winner over",
                          hint="pass the repository the sweep served")
    original = path.read_bytes()
    text = render_config(config)
    if original == text.encode("utf-8"):
        return PendingWriteBack(WriteBack(path, None), original, text)
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    backup = path.with_name(f"{CONFIG_FILENAME}.orig-{stamp}")
    counter = 1
    while backup.exists():  # two write-backs in one second must not overwrite the first backup
        counter += 1
        backup = path.with_name(f"{CONFIG_FILENAME}.orig-{stamp}-{counter}")
    return PendingWriteBack(WriteBack(path, backup), original, text)


def write_winner(repo: Path, model: str, config: mc.ModelConfig, *, now: datetime | None = None) -> WriteBack:
    """Write ``config`` as ``repo/model/config.pbtxt``, first copying the present file to
    ``config.pbtxt.orig-<UTC>``. Writes nothing when the rendered text is already there."""
    return plan_write_back(repo, model, config, now=now).commit()
