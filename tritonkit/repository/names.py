"""The names a repository gives things — models, tensors, instance groups — checked once, here.

The writer (:mod:`tritonkit.repository.spec`, :func:`tritonkit.repository.layout.model_folder`) refuses
a name this module says is unusable, and the linter reports the same names in a repository it reads,
so a name the toolkit writes is one it would pass, and the other way round.

``model_config.proto`` types every name as a plain ``string``, and Triton 2.51 loads a config whose
tensor names hold a newline. But a name travels further than the config: a model name is a folder
name and a URL path segment (``/v2/models/NAME``), a tensor name a key of perf_analyzer's JSON input
files and of the server's log lines, every name a Prometheus label value and a line of
``config.pbtxt``. A control character (NUL, a newline, …) breaks one of those silently: a request
that reaches another model, a log line that forges another, a JSON key the user cannot type. So
a name must not be empty and must hold no control character; a model name is also one folder, not
hidden (``.``, ``..``, no ``/`` or ``\\``) and at most 255 bytes long, because Triton finds a model
by its folder.
"""

from __future__ import annotations

import unicodedata
from typing import Literal

from tritonkit._values import excerpt
from tritonkit.errors import ConfigError

__all__ = ["MAX_FOLDER_NAME_BYTES", "NameKind", "check_name", "name_problem"]

NameKind = Literal["model", "tensor", "instance group"]

#: The longest file or folder name Linux file systems take (NAME_MAX): a model name is a folder name.
MAX_FOLDER_NAME_BYTES = 255
#: Unicode's control characters and the line and paragraph separators (which split lines too).
_UNUSABLE_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})


def name_problem(name: object, kind: NameKind) -> str | None:
    """What makes ``name`` unusable as a ``kind`` name, or ``None`` when it is fine."""
    if not isinstance(name, str):
        return f"is not text ({type(name).__name__})"
    if not name:
        return "is empty"
    if any(unicodedata.category(c) == "Cs" for c in name):
        # Bytes that were not UTF-8 (a command line's surrogate escapes): no config, lock file or
        # URL can carry them.
        return "is not UTF-8 text"
    control = next((c for c in name if unicodedata.category(c) in _UNUSABLE_CATEGORIES), None)
    if control is not None:
        return f"holds the control character {control!r}"
    if kind == "model" and (name.startswith(".") or "/" in name or "\\" in name):
        return "is not a plain folder name inside the repository"
    if kind == "model" and len(name.encode("utf-8", "surrogateescape")) > MAX_FOLDER_NAME_BYTES:
        return f"is longer than a folder name can be ({MAX_FOLDER_NAME_BYTES} bytes)"
    return None


def check_name(name: object, kind: NameKind, where: str) -> str:
    """``name`` when it is a usable ``kind`` name; else a :class:`ConfigError` naming ``where`` and why."""
    problem = name_problem(name, kind)
    if problem is not None:
        folder = "; a model name is its folder: no '/', no '..', not starting with '.'" if kind == "model" else ""
        shown = ascii(name) if isinstance(name, str) and problem == "is not UTF-8 text" else excerpt(name)
        raise ConfigError(f"{where}: {kind} name {shown} {problem}",
                          hint=f"give a name of printable characters{folder}")
    return str(name)
