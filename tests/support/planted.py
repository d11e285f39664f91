"""A backends folder whose library would betray being run: a real shared object built here with ``cc``,
whose constructor writes a marker file the moment anything loads it (``dlopen``, ``ctypes``, a child
process that links it). A command that only inspects a backends folder must leave the marker absent.
A test needing one is skipped, saying so, where this machine has no C compiler."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["planted_library"]

_PLANTED = r"""
#include <stdio.h>
const char decoy[] = "VERS_9.9.9 1.2.3";
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen("%s", "w");
    if (f) { fputs("ran", f); fclose(f); }
}
int OrtGetApiBase(void) { return 0; }
"""


def planted_library(tmp_path: Path, *, version_script: str | None) -> tuple[Path, Path]:
    """A shared object whose constructor writes ``ran`` when anything loads it, and the file it would write."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc) here to build the planted library")
    source, marker = tmp_path / "planted.c", tmp_path / "constructor-ran"
    source.write_text(_PLANTED % marker)
    folder = tmp_path / "backends" / "onnxruntime"
    folder.mkdir(parents=True)
    argv = ["cc", "-shared", "-fPIC", "-o", str(folder / "libonnxruntime.so"), str(source)]
    if version_script is not None:
        (tmp_path / "symbols.map").write_text(version_script)
        argv.append(f"-Wl,--version-script={tmp_path / 'symbols.map'}")
    subprocess.run(argv, check=True, capture_output=True)
    (folder / "libtriton_onnxruntime.so").write_bytes(b"")
    return folder, marker


