"""Which Triton release: the lines tritonkit knows (2.51 … 2.73), the NGC tags that ship each, and
reading a release from a version, an NGC tag, an image or what a server or an install reports.

The record every upstream fact is written in (:class:`ReleaseFact`, read at a :class:`Source`) lives
here too; :mod:`tritonkit.triton_releases` holds the facts themselves (what each line parses, serves
and checks) and re-exports every name of this module, so either import path works.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering
from typing import Literal

from tritonkit.errors import ConfigError

__all__ = ["BUNDLED_LINE", "CARRIED_OVER", "KNOWN_LINES", "NEWEST_LINE", "PYTRITON_SERVER_LINES", "FactKind",
           "ReleaseChoice",
           "ReleaseFact", "Source", "TritonRelease", "install_release", "known_lines_text", "newest_release",
           "non_ascii_problem",
           "release", "release_fact", "release_of_image", "release_of_version", "resolve_release"]

_ORG = "triton-inference-server"


@dataclass(frozen=True)
class Source:
    """Where a fact was read: ``triton-inference-server/<repo>`` ``path`` on release branch ``tag``."""

    repo: str
    path: str
    tag: str

    def __str__(self) -> str:
        return f"{_ORG}/{self.repo} {self.path} @ {self.tag}"


@total_ordering
@dataclass(frozen=True)
class TritonRelease:
    """One release line (``2.52``); ordered, printed as ``2.52``."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, TritonRelease):
            return NotImplemented
        return (self.major, self.minor) < (other.major, other.minor)

    @property
    def ngc_tags(self) -> tuple[str, ...]:
        """The NGC container tags (``yy.mm``) that ship this line."""
        return _NGC[str(self)]

    @property
    def branch(self) -> str:
        """The upstream release branch of its first NGC tag (``r24.11``)."""
        return f"r{self.ngc_tags[0]}"

    @property
    def facts_line(self) -> TritonRelease:
        """The line whose facts stand for this one: itself, or the line they are carried over from
        (:data:`CARRIED_OVER`: 2.73's release branches could not be read)."""
        carried = CARRIED_OVER.get(str(self))
        return release(carried[0]) if carried is not None else self

    @property
    def read_at(self) -> str:
        """The release branch its facts were read at (``r26.08`` for 2.73, whose facts are 2.72's)."""
        return self.facts_line.branch

    @property
    def carried_over(self) -> str:
        """``carried over from 2.72: r26.09 not read`` for a line whose facts are another's (the full
        reason: :data:`CARRIED_OVER`); ``""`` when they were read at its own branch."""
        carried = CARRIED_OVER.get(str(self))
        return f"carried over from {carried[0]}: {self.branch} not read" if carried is not None else ""

    def describe(self) -> str:
        """``Triton 2.52 (NGC 24.11)``."""
        return f"Triton {self} (NGC {', '.join(self.ngc_tags)})"


# Release lines and the NGC tags that ship them: the server's TRITON_VERSION file on each
# release branch r24.10 … r26.08 (r25.06 is 2.59.0, r25.07 is 2.59.1); 2.73 is NGC 26.09 by the
# server's main at e1db8a603 (2026-08-19, "Update default branch to track 2.73.0 / 26.09":
# TRITON_VERSION 2.73.0dev, build.py triton_container_version 26.09dev).
_NGC: dict[str, tuple[str, ...]] = {
    "2.51": ("24.10",), "2.52": ("24.11",), "2.53": ("24.12",), "2.54": ("25.01",), "2.55": ("25.02",),
    "2.56": ("25.03",), "2.57": ("25.04",), "2.58": ("25.05",), "2.59": ("25.06", "25.07"), "2.60": ("25.08",),
    "2.61": ("25.09",), "2.62": ("25.10",), "2.63": ("25.11",), "2.64": ("25.12",), "2.65": ("26.01",),
    "2.66": ("26.02",), "2.67": ("26.03",), "2.68": ("26.04",), "2.69": ("26.05",), "2.70": ("26.06",),
    "2.71": ("26.07",), "2.72": ("26.08",), "2.73": ("26.09",),
}
#: Lines whose own release branches could not be read: line → (the line whose facts stand for it, why).
#: ``scripts/upstream-facts`` reports a line here as soon as its branches appear in the clones.
CARRIED_OVER: dict[str, tuple[str, str]] = {
    "2.73": ("2.72", "no r26.09 branch in the upstream snapshots read on 2026-12-05 (server: r26.08 and main "
                     "e1db8a603, whose src/command_line_parser.cc is r26.08's; core: r26.06 and main of 2026-06-09; "
                     "python_backend: r26.07); tritonclient 2.73.0 is published (2026-09)"),
}
#: Every release line tritonkit knows, oldest first.
KNOWN_LINES: tuple[str, ...] = tuple(_NGC)
#: The line of the server bundled in nvidia-pytriton 0.7.0 (its metadata reports 2.51.0).
BUNDLED_LINE = "2.51"
#: The newest line tritonkit knows: what ``repo lint`` checks when no release is named.
NEWEST_LINE = KNOWN_LINES[-1]
#: nvidia-pytriton wheel version → the tritonserver line it bundles (checked live in the tests).
PYTRITON_SERVER_LINES: dict[str, str] = {"0.7.0": "2.51"}

# ASCII digits only: Python's \d also matches other scripts' digits ("２.６０" is not 2.60).
#: What a user writes for a release: ``2.60``, ``2.60.0``, ``v2.60.0`` — nothing after the patch number.
_STATED = re.compile(r"^v?([0-9]+)\.([0-9]+)(?:\.[0-9]+)?$", re.ASCII)
#: What a server or an install reports: ``2.51.0``, ``2.73.0dev``, ``2.60.0-rc1``.
_VERSION = re.compile(r"^\s*v?([0-9]+)\.([0-9]+)(?:\.[0-9]+)?(?:[A-Za-z][A-Za-z0-9]*)?(?:[-+.][A-Za-z0-9]+)*\s*$",
                      re.ASCII)
_NGC_TAG = re.compile(r"^r?([0-9]{2}\.[0-9]{2})$", re.ASCII)


def release(line: str) -> TritonRelease:
    """The known line ``line`` (``"2.52"``); for the constants of this module (no user input)."""
    major, minor = line.split(".")
    return TritonRelease(int(major), int(minor))


def newest_release() -> TritonRelease:
    """The newest line tritonkit knows (what is checked when no release is named)."""
    return release(NEWEST_LINE)


def known_lines_text() -> str:
    """``2.51 (NGC 24.10), 2.52 (NGC 24.11), … 2.73 (NGC 26.09)`` for help texts and errors."""
    return ", ".join(f"{line} (NGC {'/'.join(tags)})" for line, tags in _NGC.items())


def non_ascii_problem(text: str) -> str | None:
    """What in ``text`` is not the plain ASCII a version is written in (a phrase: ``a non-ASCII digit ('２',
    U+FF12)``), or ``None``. Python's ``\\d`` and ``int()`` read other scripts' digits; versions are ASCII."""
    odd = next((c for c in text if not c.isascii() or not c.isprintable()), None)
    if odd is None:
        return None
    kind = "a non-ASCII digit" if odd.isdigit() else "a non-ASCII or unprintable character"
    return f"{kind} ({odd!r}, U+{ord(odd):04X})"


def release_of_version(text: str, *, origin: str = "--server-version") -> TritonRelease:
    """A known line from ``2.52``, ``2.52.0``, ``2.59.1``, an NGC tag ``24.11`` or a branch ``r24.11``.

    The text is read exactly (spaces around it aside): ASCII digits only — ``２.６０`` is refused,
    not read as 2.60 — and at most ``MAJOR.MINOR.PATCH`` (``2.60.0.1`` is refused). Anything
    else, or a line tritonkit does not know, is a :class:`ConfigError` listing the known lines
    (the CLI exits 2).
    """
    stripped = text.strip(" \t\r\n")  # ASCII white space only: a no-break space is not typed by accident
    odd = non_ascii_problem(stripped)
    if odd is not None:
        plain = "".join(str(int(c)) if c.isdecimal() else c for c in stripped if c.isdecimal() or c in ".v")
        example = f", e.g. {plain}" if _STATED.match(plain) else ""
        raise ConfigError(f"{origin} {text!r} holds {odd}: a release is written in ASCII digits",
                          hint=f"retype it in ASCII{example}; known lines: {known_lines_text()}")
    tag = _NGC_TAG.match(stripped)
    if tag is not None:
        for line, tags in _NGC.items():
            if tag.group(1) in tags:
                return release(line)
    match = _STATED.match(stripped)
    if match is not None and f"{int(match.group(1))}.{int(match.group(2))}" in _NGC:
        return TritonRelease(int(match.group(1)), int(match.group(2)))
    if match is None and not _NGC_TAG.match(stripped):
        raise ConfigError(f"{origin} {text!r} is not a Triton release: write MAJOR.MINOR (2.60), MAJOR.MINOR.PATCH "
                          "(2.60.0) or an NGC tag (25.08)", hint=f"use one of {known_lines_text()}")
    raise ConfigError(f"{origin} {text!r} is not a Triton release tritonkit knows",
                      hint=f"use one of {known_lines_text()}")


@dataclass(frozen=True)
class ReleaseChoice:
    """The release to check against, and where that choice came from (shown with the report)."""

    release: TritonRelease
    origin: str
    note: str = ""


def resolve_release(requested: str | None = None, *, reported: str | None = None,
                    reported_by: str = "the server") -> ReleaseChoice:
    """``requested`` (``--server-version``), else the version ``reported`` by a server, else the newest line.

    A requested line tritonkit does not know is refused (:class:`ConfigError`, exit 2). A
    server reporting a version newer than the newest known line is checked as that line (with a
    note: newer releases keep what it parses and checks); one older than 2.51 is refused.
    """
    if requested is not None:
        return ReleaseChoice(release_of_version(requested), "--server-version")
    if reported is not None:
        match = _VERSION.match(reported)
        if match is not None:
            found = TritonRelease(int(match.group(1)), int(match.group(2)))
            newest = newest_release()
            if found > newest:
                return ReleaseChoice(newest, reported_by,
                                     note=f"{reported_by} reports {reported}, newer than {NEWEST_LINE}, the newest "
                                          f"line tritonkit knows: checked as {NEWEST_LINE}")
            reported = str(found)  # "2.73.0dev" is line 2.73
        return ReleaseChoice(release_of_version(reported, origin=f"{reported_by} reports version"), reported_by)
    return ReleaseChoice(newest_release(), "the newest line tritonkit knows")


def release_of_image(image: str) -> TritonRelease | None:
    """The line an NGC tritonserver image ships (``nvcr.io/nvidia/tritonserver:24.10-py3`` → 2.51), or ``None``."""
    name, _, tag = image.rpartition(":")
    if "@" in image or "tritonserver" not in name:
        return None
    match = re.match(r"^([0-9]{2}\.[0-9]{2})(?:$|-)", tag)
    if match is None:
        return None
    return next((release(line) for line, tags in _NGC.items() if match.group(1) in tags), None)


# ---------------------------------------------------------------------------- the fact record

FactKind = Literal["config-field", "platform", "validation", "server-flag", "behaviour", "component"]


@dataclass(frozen=True)
class ReleaseFact:
    """One thing a release added or changed: ``subject`` (a proto path, platform, flag, rule), from ``since``."""

    since: TritonRelease
    kind: FactKind
    subject: str
    what: str
    source: Source

    def origin(self) -> str:
        """``Triton 2.52 (NGC 24.11); triton-inference-server/core … @ r24.11`` for messages."""
        return f"{self.since.describe()}; {self.source}"


def release_fact(since: str, kind: FactKind, subject: str, what: str, repo: str, path: str,
                 tag: str | None = None) -> ReleaseFact:
    """A fact of release line ``since``, read at ``repo``'s ``path`` on that line's branch (or ``tag``)."""
    at = release(since)
    return ReleaseFact(at, kind, subject, what, Source(repo, path, tag or at.branch))


def install_release(version: str | None) -> TritonRelease | None:
    """The line of an install's version (``ServerInstall.version``), or ``None`` when it is unknown or
    older than the lines tritonkit knows (then nothing is checked before the server starts)."""
    if version is None:
        return None
    try:
        return resolve_release(reported=version, reported_by="the install").release
    except ConfigError:
        return None

