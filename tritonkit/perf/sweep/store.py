"""The sweep folder: one result per variant, so a re-run skips what is finished.

Layout (``OUT`` is ``--out``)::

    OUT/sweep.json                     settings the results depend on, then the whole summary
    OUT/variants/<id>/outcome.json     a finished variant (measured, or refused by the server);
                                       <id> names the knobs (i2-b4-w5ms), the default's included
    OUT/variants/<id>/ladder/          its ladder: result.json and perf_analyzer's raw files
    OUT/variants/<id>/confirm-<n>/     re-measurements of a leading variant
    OUT/report.md, OUT/sweep.png       the report

A variant without ``outcome.json`` (never started, or interrupted), or whose outcome is
``failed`` (a step did not complete), is measured again; one with it is read back, checked
(:meth:`VariantOutcome.from_dict`), and reused. A corrupt one is moved to
``OUT/rejected/<id>.outcome.json`` and measured again. Results are only reused under the same
settings (:meth:`~tritonkit.perf.sweep.settings.SweepSettings.record`): a changed SLA, load
ladder, step window, model config, rate tolerance, GPU memory cap or headroom makes the folder
refuse to resume rather than mix measurements. While a sweep runs, :func:`sweep_locks` holds the folder
(and the model folders it may write): one home for the local, joint and cluster sweeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write, read_json
from tritonkit._lock import FolderLock, LockedError, model_folder_lock
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.outcome import STATUS_FAILED, StoredResultError, VariantOutcome

__all__ = ["SweepStore", "sweep_locks"]

SWEEP_FILE = "sweep.json"
OUTCOME_FILE = "outcome.json"
_HINT = "delete the sweep folder (or pass another --out) to start afresh"


def _read(path: Path, what: str) -> Any:
    return read_json(path, what=what, hint=_HINT)


class SweepStore:
    """Reads and writes the per-variant files under ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def variant_dir(self, variant_id: str) -> Path:
        return self.root / "variants" / variant_id

    def ladder_dir(self, variant_id: str) -> Path:
        return self.variant_dir(variant_id) / "ladder"

    def confirm_dir(self, variant_id: str, index: int) -> Path:
        return self.variant_dir(variant_id) / f"confirm-{index}"

    def begin(self, settings: dict[str, Any]) -> int:
        """Check ``settings`` against a previous run here (``ConfigError`` if they differ), record them,
        and return how many finished variants can be reused."""
        path = self.root / SWEEP_FILE
        if path.exists() and not path.is_file():
            raise ConfigError(f"sweep record {path} is not a file", hint=f"move it away, or {_HINT}")
        if path.is_file():
            record = _read(path, "sweep record")
            previous = record.get("settings") if isinstance(record, dict) else None
            if not isinstance(previous, dict):
                raise ConfigError(f"sweep record {path}: field 'settings' is missing or not an object",
                                  hint=_HINT)
            changed = sorted(k for k in set(settings) | set(previous) if settings.get(k) != previous.get(k))
            if changed:
                raise ConfigError(
                    f"{self.root} holds a sweep made with different {', '.join(changed)}; its results "
                    "cannot be reused",
                    hint="pass another --out folder, or delete that one to start afresh",
                )
        else:
            self.write_summary({"settings": settings})
        return len(self.finished())

    def finished(self) -> dict[str, VariantOutcome]:
        """Every finished variant's valid outcome, by its knobs id (the default config is stored
        under its knobs too, so a sweep re-run after the winner was written back still finds it).
        Failed and corrupt ones are left out: a resumed sweep measures them again."""
        found: dict[str, VariantOutcome] = {}
        for path in sorted((self.root / "variants").glob(f"*/{OUTCOME_FILE}")):
            try:
                outcome = self._read(path)
            except ConfigError:  # malformed, or not JSON at all (truncated, empty): measured again
                continue
            if outcome.status != STATUS_FAILED:
                found[outcome.variant.knobs_id] = outcome
        return found

    @staticmethod
    def _read(path: Path) -> VariantOutcome:
        return VariantOutcome.from_dict(_read(path, "sweep variant result"), where=f"{path}")

    def load(self, variant_id: str) -> VariantOutcome | None:
        """The stored outcome of ``variant_id`` to reuse; ``None`` when there is none or it failed.
        A malformed or impossible one raises :class:`StoredResultError` naming the file and field."""
        path = self.variant_dir(variant_id) / OUTCOME_FILE
        if not path.is_file():
            return None
        try:
            outcome = self._read(path)
        except StoredResultError:
            raise
        except ConfigError as exc:  # not JSON at all
            raise StoredResultError(exc.message, field_name="(file)", hint=_HINT) from exc
        return None if outcome.status == STATUS_FAILED else outcome

    def reject(self, variant_id: str) -> Path:
        """Move a bad ``outcome.json`` to ``OUT/rejected/<id>.outcome.json`` (kept for whoever wants
        to see it, out of the variant's folder, which is measured afresh); return where."""
        path = self.variant_dir(variant_id) / OUTCOME_FILE
        target = self.root / "rejected" / f"{variant_id}.{OUTCOME_FILE}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        return target

    def save(self, outcome: VariantOutcome) -> Path:
        """Write ``outcome`` atomically: from now on a re-run reuses it."""
        return atomic_write(self.variant_dir(outcome.variant.knobs_id) / OUTCOME_FILE,
                            json.dumps(outcome.to_dict(), indent=2) + "\n")

    def discard_partial(self, variant_id: str) -> None:
        """Remove what an interrupted measurement of ``variant_id`` left (no outcome yet)."""
        folder = self.variant_dir(variant_id)
        if folder.is_dir() and not (folder / OUTCOME_FILE).is_file():
            shutil.rmtree(folder, ignore_errors=True)
        elif folder.is_dir():
            # A failed outcome measured again: its old ladder files must not mix with the new ones.
            for sub in folder.iterdir():
                if sub.is_dir():
                    shutil.rmtree(sub, ignore_errors=True)

    def write_summary(self, summary: dict[str, Any]) -> Path:
        path = self.root / SWEEP_FILE
        if path.is_file() and "settings" not in summary:
            summary = {"settings": _read(path, "sweep record").get("settings", {}), **summary}
        return atomic_write(path, json.dumps(summary, indent=2) + "\n")


@contextlib.contextmanager
def sweep_locks(out_dir: Path, model_dirs: Sequence[Path], purpose: str, *, read_only: bool = False,
                say: Callable[[str], None] = lambda _text: None) -> Iterator[None]:
    """Hold the sweep folder and ``model_dirs`` for the whole sweep: a second sweep into either is
    refused (it would delete this one's partial results, or measure under its load and write a
    winner over it). ``read_only``: a model folder that cannot be locked (no write permission) is
    only read, and ``say`` hears so; ``say`` also hears each lock taken over from a dead holder."""
    with contextlib.ExitStack() as stack:
        locks = [stack.enter_context(FolderLock(out_dir, what="sweep folder", purpose=purpose))]
        for model_dir in model_dirs:
            try:
                locks.append(stack.enter_context(model_folder_lock(model_dir, purpose=purpose)))
            except LockedError:
                raise
            except ConfigError as exc:
                if not read_only or not isinstance(exc.__cause__, OSError):
                    raise
                say(f"{model_dir} cannot be locked ({exc.message}); it is only read")
        for lock in locks:
            if lock.taken_over:
                say(lock.taken_over)
        yield
