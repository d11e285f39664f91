"""What a shared library's ELF headers say about it, read from the file in small pieces, never by loading it.

A library in a user's folder is only ever read here: loading it (``ctypes``, ``dlopen``) would run its
constructors, which may do anything. The one fact read is the names of the symbol versions the
library defines (its ``.gnu.version_d`` section, the ``VERS_1.19.2 { global: … }`` of its linker
version script); a file that is not ELF, or is cut short, defines none.
"""

from __future__ import annotations

import os
import struct

from tritonkit._fs import open_user_file

__all__ = ["MAX_LIBRARY_BYTES", "symbol_versions"]

#: The largest library read (ONNX Runtime's are tens of MB; a GPU build's a few hundred).
MAX_LIBRARY_BYTES = 4 * 1024**3
#: The most of any one table read (ONNX Runtime's string table of dynamic symbols is ~12 KB).
_MAX_TABLE_BYTES = 16 * 1024**2
_SHT_GNU_VERDEF = 0x6FFFFFFD
_VER_FLG_BASE = 0x1  # the entry naming the file itself (its soname), not a version


def symbol_versions(path: os.PathLike[str] | str, *, what: str, hint: str | None = None) -> list[str]:
    """The symbol versions the ELF library at ``path`` defines (``["VERS_1.19.2"]``), in file order.

    Raises :class:`~tritonkit.errors.ConfigError` (see :func:`~tritonkit._fs.open_user_file`) when
    ``path`` is not a regular file of at most :data:`MAX_LIBRARY_BYTES`."""
    with open_user_file(path, what=what, hint=hint, max_bytes=MAX_LIBRARY_BYTES) as fd:
        try:
            return _version_definitions(fd)
        except (struct.error, ValueError, IndexError):  # a header pointing past its tables: cut short
            return []


def _table(fd: int, offset: int, size: int) -> bytes:
    if size > _MAX_TABLE_BYTES or offset < 0:
        raise ValueError("table out of bounds")
    return os.pread(fd, size, offset)


def _version_definitions(fd: int) -> list[str]:
    header = os.pread(fd, 64, 0)
    if header[:4] != b"\x7fELF" or len(header) < 52 or header[4] not in (1, 2) or header[5] not in (1, 2):
        return []
    order = "<" if header[5] == 1 else ">"
    wide = header[4] == 2  # ELFCLASS64 (Elf64_Ehdr, Elf64_Shdr), else ELFCLASS32
    shoff = struct.unpack_from(order + ("Q" if wide else "I"), header, 0x28 if wide else 0x20)[0]
    entsize, count = struct.unpack_from(order + "HH", header, 0x3A if wide else 0x2E)
    layout = order + ("IIQQQQII" if wide else "IIIIIIII")
    table = _table(fd, shoff, entsize * count)
    # (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info) of each section
    sections = [struct.unpack_from(layout, table, i * entsize) for i in range(count)]
    verdef = next((s for s in sections if s[1] == _SHT_GNU_VERDEF), None)
    if verdef is None:
        return []
    data, strings = _table(fd, verdef[4], verdef[5]), _table(fd, sections[verdef[6]][4], sections[verdef[6]][5])
    names, at = [], 0
    for _ in range(verdef[7]):  # sh_info: how many Elf_Verdef entries
        _, flags, _, _, _, aux, step = struct.unpack_from(order + "HHHHIII", data, at)
        if not flags & _VER_FLG_BASE:
            start = struct.unpack_from(order + "I", data, at + aux)[0]  # Elf_Verdaux.vda_name
            names.append(strings[start:strings.index(b"\0", start)].decode("ascii", "replace"))
        if step == 0:
            break
        at += step
    return names
