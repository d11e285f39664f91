"""The sweeps' written contract: the keys of every document a sweep writes or prints.

``sweep_contract.json`` beside this module holds, per document kind (``local/sweep.json``,
``joint/--json``, ``cluster/cluster.json`` …), the sorted keys of the document and of the nested
objects named with it (``settings``, ``variants.0``); a key recorded as ``name?`` is written only
under some conditions (a warning, a GPU's figures) and may be absent. The tests that already run a sweep call
:func:`check_contract` on what it wrote, so a key added, renamed or dropped fails a test naming
it. After a deliberate change, re-run those tests with ``TRITONKIT_CONTRACT_RECORD=1`` to record
the new keys, and review the diff of the JSON file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["check_contract"]

CONTRACT = Path(__file__).with_name("sweep_contract.json")


def _at(doc: Any, path: str) -> Any:
    for part in path.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def check_contract(kind: str, doc: Mapping[str, Any], *nested: str) -> None:
    """Assert that ``doc`` (and each of its ``nested`` objects, by dotted path) has exactly the keys
    recorded for ``kind``; with ``TRITONKIT_CONTRACT_RECORD=1`` record them instead."""
    found = {kind: sorted(doc)} | {f"{kind} {path}": sorted(_at(doc, path)) for path in nested}
    if os.environ.get("TRITONKIT_CONTRACT_RECORD"):
        recorded = json.loads(CONTRACT.read_text()) if CONTRACT.is_file() else {}
        CONTRACT.write_text(json.dumps(dict(sorted((recorded | found).items())), indent=1) + "\n")
        return
    recorded = json.loads(CONTRACT.read_text())
    for name, keys in found.items():
        assert name in recorded, f"no recorded contract for {name!r}: record it (TRITONKIT_CONTRACT_RECORD=1)"
        optional = {k[:-1] for k in recorded[name] if k.endswith("?")}
        required = {k for k in recorded[name] if not k.endswith("?")}
        added, missing = sorted(set(keys) - required - optional), sorted(required - set(keys))
        assert not added and not missing, f"{name}: keys added {added}, keys missing {missing}"

