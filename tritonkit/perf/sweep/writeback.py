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
from tritonkit.repository import CONFIG_FILENAME, render_config

__all__ = ["WriteBack", "restore_command", "write_winner"]


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


def write_winner(repo: Path, model: str, config: mc.ModelConfig, *, now: datetime | None = None) -> WriteBack:
    """Write ``config`` as ``repo/model/config.pbtxt``, first copying the present file to
    ``config.pbtxt.orig-<UTC>``. Writes nothing when the rendered text is already there."""
    path = Path(repo) / model / CONFIG_FILENAME
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: nothing to write the winner over",
                          hint="pass the repository the sweep served")
    original = path.read_bytes()
    text = render_config(config)
    if original == text.encode("utf-8"):
        return WriteBack(path, None)
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    backup = path.with_name(f"{CONFIG_FILENAME}.orig-{stamp}")
    counter = 1
    while backup.exists():  # two write-backs in one second must not overwrite the first backup
        counter += 1
        backup = path.with_name(f"{CONFIG_FILENAME}.orig-{stamp}-{counter}")
    atomic_write(backup, original)
    atomic_write(path, text)
    return WriteBack(path, backup)
