"""The joint sweep's folder: one stored outcome per joint configuration, so a re-run resumes.

Layout (``OUT`` is the joint sweep's folder; see :mod:`tritonkit.perf.sweep.store` for ``sweep.json``
and the ``alone-<model>/`` single-model sweeps inside it)::

    OUT/joint/<a_id-b_id>/outcome.json   a finished joint configuration (measured, or refused)
    OUT/joint/<a_id-b_id>/L<total>/<m>/  its joint ladder: one perf_analyzer run per model and step
    OUT/rejected/joint-<a_id-b_id>.outcome.json   a stored outcome that failed its checks

As in the single-model sweep, an outcome is read back checked (every field typed, numbers finite
and in range, the configuration the folder names); a corrupt one is moved aside and measured
again, and a ``failed`` one (perf_analyzer did not complete) is measured again.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write, read_json
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.joint import JointOutcome, JointStep, joint_dir_name
from tritonkit.perf.sweep.outcome import StepPoint, StoredResultError, _list, _mapping, _number
from tritonkit.perf.sweep.variants import Variant

__all__ = ["JointStore"]

OUTCOME_FILE = "outcome.json"
_HINT = "delete the sweep folder (or pass another --out) to start afresh"


def _step_from_dict(data: Any, where: str) -> JointStep:
    data = _mapping(data, where, "step")
    points = _mapping(data.get("points"), where, "points")
    return JointStep(total=_number(data, "total", where, low=1e-9),
                     points={str(m): StepPoint.from_dict(p, f"{where} points[{m}]") for m, p in points.items()})


def joint_outcome_from_dict(data: Any, where: str) -> JointOutcome:
    """A stored joint outcome, checked field by field (:class:`StoredResultError` names the bad one)."""
    data = _mapping(data, where, "outcome")
    variants = _mapping(data.get("variants"), where, "variants")
    try:
        parsed = {str(m): Variant.from_dict(_mapping(v, where, f"variants[{m}]")) for m, v in variants.items()}
    except (KeyError, TypeError, ValueError, AssertionError) as exc:
        raise StoredResultError(f"{where}: field 'variants' is malformed ({exc!r})", field_name="variants") from exc
    if any(v.instances < 1 or v.max_batch_size < 0 for v in parsed.values()):
        raise StoredResultError(f"{where}: field 'variants' holds an impossible variant", field_name="variants")
    steps = [_step_from_dict(s, f"{where} steps[{i}]") for i, s in enumerate(_list(data, "steps", where))]
    for index, step in enumerate(steps):
        if set(step.points) != set(parsed):
            raise StoredResultError(f"{where}: steps[{index}] measures {sorted(step.points)}, not the models "
                                    f"{sorted(parsed)}", field_name="steps")
    return JointOutcome(name=str(data.get("name", "")), variants=parsed, steps=steps,
                        reason=str(data.get("reason", "")), duration_s=_number(data, "duration_s", where, default=0.0),
                        refused=str(data.get("refused", "")))


class JointStore:
    """Reads and writes the joint configurations' outcomes under ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def run_dir(self, variants: Mapping[str, Variant]) -> Path:
        return self.root / "joint" / joint_dir_name(variants)

    def load(self, variants: Mapping[str, Variant]) -> JointOutcome | None:
        """The stored, finished outcome of this configuration (``None``: none, or it failed); a
        malformed one, or one for another configuration, raises :class:`StoredResultError`."""
        path = self.run_dir(variants) / OUTCOME_FILE
        if not path.is_file():
            return None
        try:
            outcome = joint_outcome_from_dict(read_json(path, what="joint sweep result", hint=_HINT), where=str(path))
        except StoredResultError:
            raise
        except ConfigError as exc:  # not JSON at all (truncated, empty)
            raise StoredResultError(exc.message, field_name="(file)", hint=_HINT) from exc
        expected = {m: v.knobs_id for m, v in variants.items()}
        found = {m: v.knobs_id for m, v in outcome.variants.items()}
        if found != expected:
            raise StoredResultError(f"{path}: field 'variants' holds {found}, not the configuration {expected} "
                                    "its folder names", field_name="variants")
        return None if outcome.failed else outcome

    def reject(self, variants: Mapping[str, Variant]) -> Path:
        """Move a bad ``outcome.json`` to ``OUT/rejected/joint-<key>.outcome.json``; return where."""
        target = self.root / "rejected" / f"joint-{joint_dir_name(variants)}.{OUTCOME_FILE}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.run_dir(variants) / OUTCOME_FILE, target)
        return target

    def discard(self, variants: Mapping[str, Variant]) -> None:
        """Remove what an interrupted or failed measurement of this configuration left."""
        shutil.rmtree(self.run_dir(variants), ignore_errors=True)

    def save(self, outcome: JointOutcome) -> Path:
        """Write ``outcome`` atomically: from now on a re-run reuses it (unless it failed)."""
        data = {**outcome.to_dict(), "steps": [s.to_dict() for s in outcome.steps]}
        return atomic_write(self.run_dir(outcome.variants) / OUTCOME_FILE, json.dumps(data, indent=2) + "\n")
