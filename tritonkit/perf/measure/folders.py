"""Where runs and baselines go: one definition of a run folder's name, its UTC stamp and a safe model name.

Every run folder is ``<root>/<UTC stamp>-<model>[-<kind>]`` (``20261129T101500Z-resnet``,
``20261129T101500Z-resnet-sweep``): the stamp first so that a folder listing is in time order.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["run_folder", "safe_name", "utc_stamp"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(model: str) -> str:
    """``model`` as one path-safe folder name (model names may carry e.g. ``org/model``)."""
    return _UNSAFE.sub("_", model).strip("._") or "model"


def utc_stamp(utc_iso: str | None = None) -> str:
    """``2026-11-29T10:15:00Z`` → ``20261129T101500Z``; now when missing or unreadable."""
    moment: datetime | None = None
    if utc_iso:
        try:
            moment = datetime.fromisoformat(utc_iso.replace("Z", "+00:00"))
        except ValueError:
            moment = None
    if moment is None:
        moment = datetime.now(timezone.utc)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def run_folder(model: str, root: str | os.PathLike[str] = "results", *, kind: str | None = None) -> Path:
    """A fresh run's folder: ``<root>/<UTC stamp now>-<model>`` plus ``-<kind>`` (e.g. ``sweep``)."""
    suffix = f"-{kind}" if kind else ""
    return Path(root) / f"{utc_stamp()}-{safe_name(model)}{suffix}"
