"""The baseline store: every kept run of a model, classic ladders and LLM runs kept apart.

Baselines live at fixed, predictable paths, one folder per model, one file per run, named by the
run's UTC start time so they sort in time order; LLM runs have their own subfolder so that "the
newest classic baseline" can never be an LLM file (nor the other way round)::

    results/baselines/<model>/20261129T101500Z.json        classic (PerfResult)
    results/baselines/<model>/llm/20261130T110000Z.json    LLM (LLMResult)

LLM baselines written before the subfolder existed (``<model>/llm-<UTC>.json``) are still found
as LLM baselines and never listed as classic ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.perf.measure.folders import safe_name, utc_stamp
from tritonkit.perf.measure.result import PerfResult

if TYPE_CHECKING:
    from tritonkit.perf.llm.result import LLMResult

__all__ = [
    "DEFAULT_BASELINE_ROOT",
    "BaselineKind",
    "baseline_path",
    "latest_baseline",
    "list_baselines",
    "safe_name",
    "save_baseline",
    "utc_stamp",
]

#: Where baselines are kept unless told otherwise (relative to the working directory).
DEFAULT_BASELINE_ROOT = Path("results") / "baselines"

BaselineKind = Literal["classic", "llm"]

_LLM_FOLDER = "llm"
_LEGACY_LLM_PREFIX = "llm-"


def _identity(result: PerfResult | LLMResult) -> tuple[str, str, BaselineKind]:
    if isinstance(result, PerfResult):
        return result.metadata.model, result.metadata.started_utc, "classic"
    return result.model, result.started_utc, "llm"


def _folder(model: str, root: str | Path, kind: BaselineKind) -> Path:
    folder = Path(root) / safe_name(model)
    return folder / _LLM_FOLDER if kind == "llm" else folder


def baseline_path(result: PerfResult | LLMResult, root: str | Path = DEFAULT_BASELINE_ROOT) -> Path:
    """Where :func:`save_baseline` keeps ``result`` (see the module docstring for the layout)."""
    model, started, kind = _identity(result)
    return _folder(model, root, kind) / f"{utc_stamp(started)}.json"


def save_baseline(result: PerfResult | LLMResult, root: str | Path = DEFAULT_BASELINE_ROOT) -> Path:
    """Keep ``result`` as a timestamped baseline for its model (atomic; same run → same file)."""
    target = baseline_path(result, root)
    try:
        atomic_write(target, result.to_json())
    except OSError as exc:
        raise ConfigError(f"cannot write the baseline {target}: {exc.strerror or exc}",
                          hint="free some space or choose another --baseline-dir") from exc
    return target


def _sort_key(path: Path) -> str:
    return path.name.removeprefix(_LEGACY_LLM_PREFIX)


def list_baselines(model: str, root: str | Path = DEFAULT_BASELINE_ROOT, kind: BaselineKind = "classic") -> list[Path]:
    """The model's baselines of ``kind``, oldest first."""
    folder = Path(root) / safe_name(model)
    return baselines_in(folder, kind)


def baselines_in(folder: Path, kind: BaselineKind = "classic") -> list[Path]:
    """The baselines of ``kind`` in one model's baseline ``folder`` (or its ``llm/``), oldest first."""
    if kind == "llm" and folder.name == _LLM_FOLDER and not (folder / _LLM_FOLDER).is_dir():
        folder = folder.parent  # given the llm/ subfolder itself
    if not folder.is_dir():
        return []
    visible = [p for p in folder.glob("*.json") if not p.name.startswith(".")]
    if kind == "classic":
        return sorted(p for p in visible if not p.name.startswith(_LEGACY_LLM_PREFIX))
    legacy = [p for p in visible if p.name.startswith(_LEGACY_LLM_PREFIX)]
    current = [p for p in (folder / _LLM_FOLDER).glob("*.json") if not p.name.startswith(".")]
    return sorted([*legacy, *current], key=_sort_key)


def latest_baseline(model: str, root: str | Path = DEFAULT_BASELINE_ROOT, kind: BaselineKind = "classic") -> Path | None:
    """The model's newest baseline of ``kind``, or ``None`` when it has none."""
    found = list_baselines(model, root, kind)
    return found[-1] if found else None
