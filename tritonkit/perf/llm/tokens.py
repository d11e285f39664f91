"""Counting prompt tokens with the model's own tokenizer, and building prompts of an exact length.

A prompt of "128 tokens" must be 128 tokens to the served model's tokenizer, not 128 words: a
subword tokenizer sees ~2–3 tokens per word, so a word count overshoots the engine's input limit.
:func:`load_tokenizer` reads a Hugging Face ``tokenizer.json`` (the file, or the folder holding
it: a TensorRT-LLM repository's ``tokenizer_dir``); :func:`fit_prompt` picks words until the
tokenizer counts exactly the length asked for.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tritonkit._fs import is_folder, is_regular_file, shown_path
from tritonkit._values import excerpt
from tritonkit.errors import ConfigError, MissingComponentError

__all__ = ["TokenCounter", "fit_prompt", "load_tokenizer"]

#: Text → its token count (special tokens not added: they are the server's, not the prompt's).
TokenCounter = Callable[[str], int]

_FILLERS = tuple("abcdefghijklmnopqrstuvwxyz")


def load_tokenizer(path: str | os.PathLike[str]) -> TokenCounter:
    """A token counter from a ``tokenizer.json`` file or a folder holding one."""
    source = Path(path)
    file = source / "tokenizer.json" if is_folder(source) else source
    if not is_regular_file(file):
        raise ConfigError(f"no tokenizer at {shown_path(source)}: expected a tokenizer.json (or a folder holding one)",
                          hint="pass the model's tokenizer folder, e.g. the preprocessing model's tokenizer_dir")
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise MissingComponentError("the tokenizers library is not installed", hint="pip install tokenizers") from exc
    try:
        tokenizer: Any = Tokenizer.from_file(str(file))
    except Exception as exc:  # the library raises its own exception type for a bad file
        raise ConfigError(f"{shown_path(file)} is not a tokenizer.json the tokenizers library can read: "
                          f"{excerpt(str(exc), 120)}", hint="pass the model's tokenizer.json, or its folder") from exc

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def fit_prompt(target: int, words: Sequence[str], count: TokenCounter, rng: np.random.Generator) -> tuple[str, int]:
    """Text of exactly ``target`` tokens (as ``count`` sees it) from random ``words``; (text, tokens).

    Words are added while they fit; the rest is filled with the shortest pieces the tokenizer
    knows. Should the tokenizer merge across words so that no exact fit exists, the closest
    length at or below the target is returned, with its true count.
    """
    if target < 1:
        raise ConfigError(f"a prompt needs at least 1 token, got {target}")
    parts: list[str] = []
    tokens = 0
    for _ in range(target * 4):  # every accepted word adds at least one token
        if tokens >= target:
            break
        word = words[int(rng.integers(0, len(words)))]
        trial = " ".join([*parts, word])
        trial_tokens = count(trial)
        if trial_tokens <= target:
            parts, tokens = [*parts, word], trial_tokens
            continue
        for filler in _FILLERS:
            trial = " ".join([*parts, filler])
            trial_tokens = count(trial)
            if tokens < trial_tokens <= target:
                parts, tokens = [*parts, filler], trial_tokens
                break
        else:
            break  # nothing fits: return what we have, with its true count
    return " ".join(parts), tokens
