"""Mutations of valid input, for the reader fuzzes: bytes flipped, cut, spliced; a JSON document's
values swapped for extremes, wrong types, deep nesting or odd text; a text's numbers and lines.

Every mutator takes a :class:`random.Random`, so one function serves the suite (hypothesis hands it a
seeded ``st.randoms()``) and the long campaign (``python -m tests.fuzz.campaign``: a seed of its own).
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

from hypothesis import strategies as st

#: Values a JSON field is swapped for: number extremes, wrong types, odd text.
EXTREMES: list[Any] = [
    1e308, -1e308, 1.7976931348623157e308, 5e-324, -0.0, 0, -1, 1, 2**31, 2**63, -(2**63), 10**400, -(10**40),
    float("nan"), float("inf"), float("-inf"), 0.5, True, False, None, "", " ", "0", "1e999", "NaN", "-1",
    "\u202e\u0000x", "é\ufffd", "²", "١٢", "x" * 5000,
    [], {}, [1, 2], {"a": 1}, [[[[[]]]]], "\n", "../../etc/passwd",
]
#: Number tokens a text's numbers are swapped for.
NUMBER_TEXTS = ["1e308", "-1e308", "1e999", "-0", "-0.0", "nan", "NaN", "inf", "-inf", "99999999999999999999999999",
                "-99999999999999999999", "0x7fffffff", "9223372036854775808", "0", "-1", "1.5", "1e-400", "²", "1_0", ""]
#: Odd text spliced into a file.
SPLICES = ["\x00", "\xff", "\ufeff", "\u202e", "é", "\U0001f600", "{", "}", "[", "]", '"', "\\", "\n", "\r\n", "#",
           ":", ",", "<", "'", "\t", "{" * 300, "[" * 300]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (keys and indices), the document itself first; 20 levels deep at most."""
    found = [prefix]
    items = (() if len(prefix) > 20 else doc.items() if isinstance(doc, dict)
             else enumerate(doc) if isinstance(doc, list) else ())
    for key, value in items:
        found.extend(_paths(value, (*prefix, key)))
    return found


def _nested(rng: random.Random) -> Any:
    depth = rng.choice([50, 500, 5000])
    value: Any = 1
    for _ in range(depth):
        value = [value] if rng.random() < 0.5 else {"k": value}
    return value


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def _dump(doc: Any) -> str:
    try:
        return json.dumps(doc, allow_nan=True, ensure_ascii=False)
    except (RecursionError, ValueError):
        return "[" * 100_000


def mutate_json(rng: random.Random, doc: Any) -> bytes:
    """``doc`` (parsed JSON) with one to three of its values changed, as bytes; now and then also
    byte-mutated."""
    doc = json.loads(json.dumps(doc))
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(_paths(doc))
        op = rng.random()
        if op < 0.55:
            doc = _replace(doc, path, copy.deepcopy(rng.choice(EXTREMES)))
        elif op < 0.65:
            doc = _replace(doc, path, _nested(rng))
        elif op < 0.8 and path:  # a field gone
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            del parent[path[-1]]
        elif op < 0.9 and path:  # a field of the wrong shape: its value wrapped or unwrapped
            parent = doc
            for key in path:
                parent = parent[key]
            doc = _replace(doc, path, [parent] if not isinstance(parent, list) else {"items": parent})
        else:  # a key renamed, or a stray one added
            container = doc
            for key in path:
                container = container[key]
            if isinstance(container, dict):
                container[rng.choice(["", "\u0000", "é", "x" * 300, "steps", "metrics", "__class__"])] = copy.deepcopy(rng.choice(EXTREMES))
    text = _dump(doc)
    if rng.random() < 0.5:  # a huge int written as Python's json writes none: digits past a float
        text = re.sub(r"(?<![\w.\"])(\d+)(?![\w.\"])", lambda m: m.group(1) + "0" * 400 if rng.random() < 0.1
                      else m.group(1), text)
    data = text.encode("utf-8", "surrogatepass")
    return mutate_bytes(rng, data) if rng.random() < 0.2 else data


def mutate_text(rng: random.Random, text: str) -> bytes:
    """``text`` with numbers swapped for extremes, lines dropped or repeated, odd characters spliced in."""
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        if op < 0.45:
            numbers = list(re.finditer(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text))
            if numbers:
                m = rng.choice(numbers)
                text = text[:m.start()] + rng.choice(NUMBER_TEXTS) + text[m.end():]
                lines = text.splitlines(keepends=True)
                continue
        if op < 0.65 and lines:
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(i, lines[i] * rng.choice([1, 2, 50]))
        elif op < 0.85 and text:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(SPLICES) + text[at:]
            lines = text.splitlines(keepends=True)
            continue
        elif text:  # a word swapped for one of another line
            words = re.findall(r"[A-Za-z_]+", text)
            if words:
                old, new = rng.choice(words), rng.choice(words + ["é", "", "x" * 300])
                text = text.replace(old, new, 1)
                lines = text.splitlines(keepends=True)
                continue
        text = "".join(lines)
    data = "".join(lines).encode("utf-8", "surrogatepass")
    return mutate_bytes(rng, data) if rng.random() < 0.2 else data


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """``data`` with bytes flipped, cut short, a slice repeated or random bytes spliced in."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if op < 0.4 and buf:
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif op < 0.6 and buf:
            del buf[rng.randrange(len(buf)):]
        elif op < 0.8 and buf:
            i = rng.randrange(len(buf))
            j = min(len(buf), i + rng.randint(1, 64))
            buf[i:i] = buf[i:j] * rng.randint(1, 20)
        else:
            i = rng.randrange(len(buf) + 1)
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return bytes(buf)


def mutant(rng: random.Random, valid: bytes, *, as_json: bool = False) -> bytes:
    """One mutant of ``valid``: structural (its JSON values, or its text's numbers and lines) mostly,
    bytewise else. ``as_json``: ``valid`` is one JSON document (JSON Lines: one per line)."""
    text = valid.decode("utf-8")
    if as_json and rng.random() < 0.75:
        lines = text.splitlines()
        if len(lines) > 1 and all(line.strip().startswith(("{", "[")) for line in lines if line.strip()):
            i = rng.randrange(len(lines))
            lines[i] = mutate_json(rng, json.loads(lines[i])).decode("utf-8", "replace")
            return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
        return mutate_json(rng, json.loads(text))
    if rng.random() < 0.7:
        return mutate_text(rng, text)
    return mutate_bytes(rng, valid)


def randoms() -> st.SearchStrategy[random.Random]:
    """The suite's source of mutations: a Random hypothesis seeds (so a failure replays and shrinks)."""
    return st.randoms(use_true_random=False)
