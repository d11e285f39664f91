"""A tiny deterministic language model in numpy: weights from a seed, no download.

It exists so the serving path (tokenize, schedule, decode, stream, detokenize) can run and be
measured on a CPU; the text it writes means nothing. One attention layer over the whole context
(so a step's work grows with the context), a residual MLP, tied-free output projection, greedy
decoding with a small penalty on recently generated tokens so the output does not loop at once.
Only ``allowed`` token ids are generated (the builder passes the ones that decode to printable
text, never a special token), so a request always runs to its requested length.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TinyLM"]


class TinyLM:
    """``next_token(context)`` → ``(token id, its log-probability)``; the same seed gives the same model."""

    def __init__(self, vocab_size: int, *, hidden_size: int = 64, seed: int = 0,
                 allowed: list[int] | None = None, recent_window: int = 8, recent_penalty: float = 4.0) -> None:
        if vocab_size < 2:
            raise ValueError(f"vocab_size {vocab_size} is too small")
        rng = np.random.default_rng(seed)
        scale = 1.0 / np.sqrt(hidden_size)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.embed = (rng.standard_normal((vocab_size, hidden_size)) * scale).astype(np.float32)
        self.w_query = (rng.standard_normal((hidden_size, hidden_size)) * scale).astype(np.float32)
        self.w_mlp = (rng.standard_normal((hidden_size, hidden_size)) * scale).astype(np.float32)
        self.w_out = (rng.standard_normal((hidden_size, vocab_size)) * scale * 4.0).astype(np.float32)
        self.blocked = np.ones(vocab_size, dtype=bool)
        self.blocked[np.asarray(allowed if allowed else range(vocab_size), dtype=np.int64)] = False
        self.recent_window = recent_window
        self.recent_penalty = recent_penalty

    def logits(self, context: np.ndarray) -> np.ndarray:
        """Logits of the next token after ``context`` (1-D int token ids, at least one)."""
        ids = np.asarray(context, dtype=np.int64) % self.vocab_size
        x = self.embed[ids]                                  # [T, H]
        query = x[-1] @ self.w_query                         # [H]
        scores = x @ query / np.sqrt(self.hidden_size)       # [T]: attention over the whole context
        weights = np.exp(scores - scores.max())
        weights /= weights.sum()
        h = weights @ x + x[-1]
        h = h + np.tanh(h @ self.w_mlp)
        out: np.ndarray = (h @ self.w_out).astype(np.float64)
        out[self.blocked] = -np.inf                          # never end early, never emit padding
        return out

    def next_token(self, context: np.ndarray, generated: list[int] | None = None,
                   banned: set[int] | None = None) -> tuple[int, float]:
        """Greedy next token and its log-probability; ``generated`` (this request's output so far)
        is penalised over the last ``recent_window`` tokens; ``banned`` ids are never chosen
        (bad words)."""
        token, log_prob, _ = self.step(context, generated, banned)
        return token, log_prob

    def step(self, context: np.ndarray, generated: list[int] | None = None,
             banned: set[int] | None = None) -> tuple[int, float, np.ndarray]:
        """:meth:`next_token` plus the step's logits (``-inf`` where blocked), for logits outputs."""
        logits = self.logits(context)
        if generated:
            recent = np.asarray(generated[-self.recent_window:], dtype=np.int64)
            logits[recent] -= self.recent_penalty
        if banned:
            logits[np.asarray(sorted(t % self.vocab_size for t in banned), dtype=np.int64)] = -np.inf
        token = int(np.argmax(logits))
        finite = logits[np.isfinite(logits)]
        log_z = finite.max() + np.log(np.exp(finite - finite.max()).sum())
        return token, float(logits[token] - log_z), logits

    def generate(self, prompt: list[int], max_tokens: int) -> tuple[list[int], list[float]]:
        """The whole greedy continuation of ``prompt`` (what the served engine streams, token by token)."""
        context = list(prompt)
        tokens: list[int] = []
        log_probs: list[float] = []
        for _ in range(max_tokens):
            token, lp = self.next_token(np.asarray(context), tokens)
            tokens.append(token)
            log_probs.append(lp)
            context.append(token)
        return tokens, log_probs
