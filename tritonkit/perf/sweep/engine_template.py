"""An LLM engine's command line as a template, and the knobs swept through it: pure functions.

``tritonkit perf sweep MODEL --engine-cmd TEMPLATE --knob NAME=V1,V2*,V3`` starts the engine once
per variant with the knobs' values put into the template. The template is read here, once, into
words as a POSIX shell would split it (:func:`shlex.split`: quotes group, nothing is expanded);
``{name}`` marks where a value goes, as a whole word (``--max-num-seqs {max_num_seqs}``) or inside
one (``--max-num-seqs={max_num_seqs}``). A value replaces its placeholder inside that one word: it
is never split again, so a value with a space stays one argument. ``{{`` and ``}}`` are literal
braces. ``{port}`` (the free loopback port tritonkit picks) must appear; ``{model}`` (the served
name, MODEL) may. Anything else in braces must be a knob, and every knob must be used: a
misspelt placeholder or an unused knob is a :class:`~tritonkit.errors.ConfigError` naming it,
before any engine starts.

A knob's values are a comma-separated list; ``*`` marks the engine's own default (exactly one per
knob). The default variant is every knob at its default: the engine as it would run untouched,
measured first, and what the winner is compared with.

Example::

    template = EngineTemplate.parse("vllm serve /m --port {port} --max-num-seqs {seqs}", ["seqs"])
    knobs = [parse_knob("seqs=4,16*,64")]
    grid = engine_grid(knobs)                      # default (seqs=16), seqs=4, seqs=64
    argv = template.render(grid[0].values, port=8123, model="tiny")
"""

from __future__ import annotations

import itertools
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit._values import excerpt
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.variants import DEFAULT_ID, Variant

__all__ = ["ENGINE_PRESETS", "RESERVED_PLACEHOLDERS", "EngineKnob", "EngineTemplate", "EngineVariant",
           "engine_grid", "parse_knob", "vllm_template"]

#: Placeholders tritonkit fills itself: the port it picked, and the served model name (MODEL).
RESERVED_PLACEHOLDERS = ("port", "model")

#: ``{{`` / ``}}`` (literal braces) or ``{anything}`` (a placeholder, checked by name).
_BRACES_RE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
#: Characters a variant id may hold as they are (it names a folder); others become ``_``.
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9._=-]")
#: A knob's name: a placeholder's.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class EngineKnob:
    """One swept knob: its ``name`` (the placeholder), its ``values`` in the order given, and the
    engine's ``default`` among them."""

    name: str
    values: tuple[str, ...]
    default: str


def parse_knob(text: str, option: str = "--knob") -> EngineKnob:
    """``NAME=V1,V2*,V3`` → :class:`EngineKnob` (``*`` marks the engine's default; exactly one)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not _NAME_RE.match(name):
        raise ConfigError(f"{option} {excerpt(text)} is not NAME=V1,V2*,V3",
                          hint="e.g. --knob max_num_seqs=4,16*,64 (NAME is the placeholder {NAME} in the command; "
                               "* marks the engine's default)")
    if name in RESERVED_PLACEHOLDERS:
        raise ConfigError(f"{option} {name}: {{{name}}} is filled by tritonkit, not swept",
                          hint=f"name the knob otherwise; {{{name}}} stays in the command as it is")
    raw = [v.strip() for v in rest.split(",")]
    if not raw or any(not v or v == "*" for v in raw):
        raise ConfigError(f"{option} {name}: empty value in {excerpt(rest)}", hint="e.g. 4,16*,64")
    defaults = [v[:-1].strip() for v in raw if v.endswith("*")]
    values = tuple(v[:-1].strip() if v.endswith("*") else v for v in raw)
    if len(defaults) != 1:
        raise ConfigError(f"{option} {name}: {'no value is' if not defaults else 'several values are'} marked "
                          f"as the engine's default", hint=f"mark exactly one with *, e.g. {name}={values[0]}*"
                          + "".join(f",{v}" for v in values[1:]))
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        raise ConfigError(f"{option} {name}: {', '.join(repeated)} is given twice", hint="list each value once")
    return EngineKnob(name, values, defaults[0])


def _placeholders(word: str) -> list[str]:
    """The placeholder names in one word (``{{``/``}}`` are literal braces); a lone brace is an error."""
    names = [m.group(1) for m in _BRACES_RE.finditer(word) if m.group(1) is not None]
    rest = _BRACES_RE.sub("", word)
    if "{" in rest or "}" in rest:
        raise ConfigError(f"--engine-cmd: unmatched brace in {excerpt(word)}",
                          hint="a placeholder is {NAME} inside one word; write a literal brace as {{ or }}")
    return [n.strip() for n in names]


@dataclass(frozen=True)
class EngineTemplate:
    """An engine's command line, split into ``words``, with the knobs it places (``knobs``).
    ``value_words``: for a preset, what a knob's value stands for on the command line
    (``{"chunked_prefill": {"on": "--enable-chunked-prefill"}}``); a value not listed is put in as it is."""

    text: str
    words: tuple[str, ...]
    knobs: tuple[str, ...]
    value_words: Mapping[str, Mapping[str, str]] | None = None

    @classmethod
    def parse(cls, text: str, knobs: Iterable[str], *,
              value_words: Mapping[str, Mapping[str, str]] | None = None) -> EngineTemplate:
        """Read ``text`` (see the module docstring); every placeholder a knob or reserved, every knob used."""
        try:
            words = shlex.split(text)
        except ValueError as exc:  # an unclosed quote
            raise ConfigError(f"--engine-cmd {excerpt(text)} cannot be split into words: {exc}",
                              hint="close every quote, as a shell would need") from exc
        if not words:
            raise ConfigError("--engine-cmd is empty", hint="give the engine's command, e.g. 'vllm serve DIR --port {port}'")
        wanted = list(knobs)
        used = {name for word in words for name in _placeholders(word)}
        known = set(wanted) | set(RESERVED_PLACEHOLDERS)
        unknown = sorted(used - known)
        if unknown:
            raise ConfigError(f"--engine-cmd places {', '.join('{' + n + '}' for n in unknown)}, which no --knob "
                              f"names", hint=f"add --knob {unknown[0]}=V1,V2* or fix the spelling (knobs: "
                              f"{', '.join(wanted) or 'none'}; tritonkit fills {{port}} and {{model}})")
        unused = [k for k in wanted if k not in used]
        if unused:
            raise ConfigError(f"--knob {unused[0]} is not used by --engine-cmd", hint=f"place {{{unused[0]}}} in the "
                              "command where its value goes, e.g. --max-num-seqs {" + unused[0] + "}")
        if "port" not in used:
            raise ConfigError("--engine-cmd does not place {port}", hint="tritonkit picks a free loopback port per "
                              "variant: put {port} where the engine takes its port, e.g. --port {port}")
        return cls(text, tuple(words), tuple(wanted), value_words)

    def render(self, values: Mapping[str, str], *, port: int, model: str) -> list[str]:
        """The command's argv with ``values`` (every knob's), ``port`` and ``model`` in place."""
        missing = [k for k in self.knobs if k not in values]
        if missing:
            raise ConfigError(f"no value for knob {missing[0]}", hint="give every knob of the template a value")
        filled = {**{k: self._word(k, values[k]) for k in self.knobs}, "port": str(port), "model": model}

        def fill(match: re.Match[str]) -> str:
            if match.group(1) is None:
                return match.group(0)[0]  # {{ → {, }} → }
            return filled[match.group(1).strip()]

        argv = [_BRACES_RE.sub(fill, word) for word in self.words]
        # A preset's switch knob may stand for nothing at all (an empty word is no argument).
        return [word for word, raw in zip(argv, self.words, strict=True) if word or not _placeholders(raw)]

    def _word(self, knob: str, value: str) -> str:
        return (self.value_words or {}).get(knob, {}).get(value, value)


@dataclass(frozen=True)
class EngineVariant(Variant):
    """One variant of an engine sweep: its knobs' values, in the order of the knobs (``values``).

    A :class:`~tritonkit.perf.sweep.variants.Variant` so that the Triton sweep's search, noise and
    tie rules (:mod:`tritonkit.perf.sweep.search`) take it as they are; the Triton knobs are fixed
    (one instance, no batcher) and never read, its ``id`` and words are the engine's."""

    knobs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, knobs: Sequence[tuple[str, str]], *, is_default: bool = False) -> EngineVariant:
        return cls(instances=1, max_batch_size=0, window_us=None, is_default=is_default, knobs=tuple(knobs))

    @property
    def values(self) -> dict[str, str]:
        return dict(self.knobs)

    @property
    def knobs_id(self) -> str:
        """``max_num_seqs=16+max_num_batched_tokens=2048`` (path-safe)."""
        return "+".join(_UNSAFE_RE.sub("_", f"{k}={v}") for k, v in self.knobs) or DEFAULT_ID

    def describe(self) -> str:
        text = ", ".join(f"{k} {v}" for k, v in self.knobs)
        return f"engine default ({text})" if self.is_default else text

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "is_default": self.is_default, "knobs": dict(self.knobs)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineVariant:
        knobs = data.get("knobs")
        if not isinstance(knobs, dict) or not all(isinstance(v, str) for v in knobs.values()):
            raise ValueError(f"knobs must map names to text, not {knobs!r}")
        return cls.of(tuple((str(k), v) for k, v in knobs.items()), is_default=bool(data.get("is_default", False)))

    def tie_key(self) -> tuple[Any, ...]:
        """Between tied variants: the default first (nothing to change), then the smaller values
        (numbers by size, knob by knob: fewer sequences, smaller batches hold less memory)."""
        def order(value: str) -> tuple[int, float, str]:
            try:
                return (0, float(value), value)
            except ValueError:
                return (1, 0.0, value)

        return (not self.is_default, tuple(order(v) for _, v in self.knobs), self.id)


def engine_grid(knobs: Sequence[EngineKnob]) -> list[EngineVariant]:
    """Every combination of the knobs' values, the default (every knob at its ``*``) first."""
    names = [k.name for k in knobs]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"--knob {twice} is given twice", hint="give each knob once, with all its values")
    default = tuple((k.name, k.default) for k in knobs)
    grid = [EngineVariant.of(default, is_default=True)]
    for combo in itertools.product(*(k.values for k in knobs)):
        pairs = tuple(zip(names, combo, strict=True))
        if pairs != default:
            grid.append(EngineVariant.of(pairs))
    return grid


#: vLLM's CPU build (0.32): each knob's placeholder and the flag it goes with; ``chunked_prefill`` is a
#: switch (``on``/``off``). Read against vLLM 0.32's ``vllm/engine/arg_utils.py`` (EngineArgs: the flags
#: are its fields in kebab case; booleans take ``--no-`` too).
ENGINE_PRESETS: dict[str, dict[str, tuple[str, ...]]] = {
    "vllm": {"max_num_seqs": ("--max-num-seqs", "{max_num_seqs}"),
             "max_num_batched_tokens": ("--max-num-batched-tokens", "{max_num_batched_tokens}"),
             "chunked_prefill": ("{chunked_prefill}",)},
}
_SWITCHES = {"chunked_prefill": {"on": "--enable-chunked-prefill", "off": "--no-enable-chunked-prefill"}}


def vllm_template(python: str, model_dir: str, knobs: Sequence[EngineKnob], *,
                  max_model_len: int = 512) -> EngineTemplate:
    """The ``--engine vllm`` preset: vLLM's OpenAI server (as :func:`tritonkit.perf.llm.engine.vllm_cpu_argv`
    starts it) serving ``model_dir`` as ``{model}`` on ``{port}``, with the preset's flag for each knob."""
    preset = ENGINE_PRESETS["vllm"]
    strange = [k.name for k in knobs if k.name not in preset]
    if strange:
        raise ConfigError(f"--engine vllm has no knob {strange[0]}", hint=f"sweep {', '.join(preset)}, or give the "
                          "whole command with --engine-cmd")
    for knob in knobs:
        bad = [v for v in knob.values if knob.name in _SWITCHES and v not in _SWITCHES[knob.name]]
        if bad:
            raise ConfigError(f"--knob {knob.name}: {excerpt(bad[0])} is not on or off", hint=f"{knob.name}=on*,off")
    words = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--served-model-name",
             "{model}", "--host", "127.0.0.1", "--port", "{port}", "--max-model-len", str(max_model_len),
             "--enforce-eager"]
    for knob in knobs:
        words += preset[knob.name]
    return EngineTemplate.parse(shlex.join(words), [k.name for k in knobs], value_words=_SWITCHES)
