"""A real byte-level BPE tokenizer, trained here from a short built-in text (no download).

The CPU reference engine needs a tokenizer that behaves like a model's own: special tokens,
``tokenizer.json`` and ``tokenizer_config.json`` in Hugging Face's format (so the same
pre/postprocessing code reads a real model's folder), byte-level so any text round-trips.
Training on a fixed corpus with fixed settings gives the same vocabulary on every run.
"""

from __future__ import annotations

import json
from pathlib import Path

from tritonkit._fs import atomic_write
from tritonkit.errors import MissingComponentError

__all__ = ["REFERENCE_SPECIAL_TOKENS", "TOKENIZER_FILES", "build_reference_tokenizer"]

#: Files a tokenizer folder must hold for the pre/postprocessing models.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

#: Special tokens, in id order: 0 pad, 1 begin, 2 end, 3 unknown.
REFERENCE_SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")

# Text about what the reference engine is for: any fixed text works, this one at least reads well.
_CORPUS = """
A model repository holds one folder per model and a configuration for each of them.
The server loads every model, batches requests that arrive close together, and streams tokens
back to the client as soon as they are generated. In-flight batching lets a new request join the
running batch at the next step, and lets a finished one leave, so short requests are not held
behind long ones. The key and value cache grows with every token of context, and the memory left
after the weights decides how many sequences can run at once. Time to first token is the prefill
of the prompt plus one decode step; the decode speed each user sees falls as the batch grows.
Load tests step the concurrency up, watch the latency percentiles and the error rate, and find the
knee where a healthy system turns overloaded. A tokenizer turns text into numbers and back again.
The quick brown fox jumps over the lazy dog, and the five boxing wizards jump quickly.
Numbers such as 0 1 2 3 4 5 6 7 8 9 10 100 1000 appear in prompts too, with punctuation: , . ; : ! ?
"""


def build_reference_tokenizer(folder: str | Path, *, vocab_size: int = 512) -> int:
    """Train the reference tokenizer and write ``tokenizer.json`` + ``tokenizer_config.json``.

    Returns the vocabulary size actually reached (at most ``vocab_size``: a short corpus runs out
    of merges). Raises :class:`MissingComponentError` when the ``tokenizers`` library is absent.
    """
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise MissingComponentError("the tokenizers library is not installed; the reference engine's "
                                    "tokenizer is built with it", hint="pip install tokenizers") from exc
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(REFERENCE_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = [line for line in _CORPUS.strip().splitlines() if line]
    tokenizer.train_from_iterator(lines, trainer=trainer)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "tokenizer.json", tokenizer.to_str(pretty=False))
    pad, bos, eos, unk = REFERENCE_SPECIAL_TOKENS
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "unk_token": unk,
        # Like Llama's: prompts start with <s> (preprocessing adds it, add_special_tokens being true by default).
        "add_bos_token": True,
        "model_max_length": 1 << 20,
    }
    atomic_write(out / "tokenizer_config.json", json.dumps(config, indent=2) + "\n")
    return int(tokenizer.get_vocab_size())
