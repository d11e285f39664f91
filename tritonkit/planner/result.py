"""What a plan hands on: numbers with their unit, basis and reasoning, and serving parameters.

Every figure is a :class:`PlanLine`: a JSON key that carries its unit (``kv_bytes_per_token``,
``weights_gib``, ``prefill_ms``), the value, a printable unit, its *basis* — where it comes from —
and a note that says how it was computed or what was assumed. Bases:

* ``input`` — given by the caller (flag, config.json);
* ``datasheet`` — from the GPU catalogue (the source is in the note);
* ``assumption`` — a default the planner chose (override it with the flag in the note);
* ``theory`` — computed from the above;
* ``measured`` — read from a perf ``result.json``, or computed from measured numbers.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tritonkit._fs import atomic_write

if TYPE_CHECKING:
    from tritonkit.planner.predict import PredictionSet

__all__ = [
    "BASES",
    "CapacityPlan",
    "PlanDraft",
    "PlanLine",
    "Report",
    "SearchReport",
    "ServingSuggestion",
]

BASES = ("input", "datasheet", "assumption", "theory", "measured")


@dataclass(frozen=True)
class PlanLine:
    """One number of a plan, with everything needed to judge it."""

    section: str
    key: str
    label: str
    value: float | int | str | None
    unit: str
    basis: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.basis not in BASES:
            raise ValueError(f"unknown basis {self.basis!r}")

    def value_text(self) -> str:
        """The value with its unit, formatted for people."""
        value = self.value
        if value is None:
            return "—"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, int):
            text = f"{value:,}"
        elif isinstance(value, float) and value.is_integer() and abs(value) >= 1:
            text = f"{int(value):,}"  # 512.0 tokens reads as 512 tokens
        elif isinstance(value, float):
            text = _format_float(value)
        else:
            text = str(value)
        return f"{text} {self.unit}".strip()


def _format_float(value: float) -> str:
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


@dataclass(frozen=True)
class ServingSuggestion:
    """Serving parameters derived from a plan, in the form the builders take.

    LLM (TensorRT-LLM names): ``max_batch_size`` (concurrent sequences the engine schedules),
    ``max_num_tokens`` (tokens per engine iteration: one full prompt plus one token per running
    sequence), ``max_input_len`` / ``max_seq_len``, ``kv_cache_free_gpu_mem_fraction`` (share of
    the memory left after the weights that the KV cache may take), ``tensor_parallel``,
    ``pipeline_parallel``, ``expert_parallel``, ``kv_cache_dtype``, ``enable_chunked_prefill`` and,
    for a disaggregated deployment, ``disaggregated`` (prefill and decode workers).
    Any model: ``instance_count`` (model instances per GPU), ``max_queue_delay_us`` (dynamic
    batching window; ``None`` for in-flight batching), and the fleet: ``replicas`` and ``gpus``.
    ``notes`` says where each value comes from.
    """

    max_batch_size: int | None = None
    max_num_tokens: int | None = None
    max_input_len: int | None = None
    max_seq_len: int | None = None
    kv_cache_free_gpu_mem_fraction: float | None = None
    tensor_parallel: int = 1
    instance_count: int = 1
    max_queue_delay_us: int | None = None
    replicas: int | None = None
    gpus: int | None = None
    notes: dict[str, str] = field(default_factory=dict)
    pipeline_parallel: int = 1
    expert_parallel: int = 1
    kv_cache_dtype: str | None = None
    enable_chunked_prefill: bool | None = None
    #: Disaggregated serving: ``prefill_workers``, ``prefill_tensor_parallel``, ``decode_workers``.
    disaggregated: dict[str, Any] | None = None
    #: The attention data-parallel over the ``tensor_parallel`` GPUs (TensorRT-LLM's ``enable_attention_dp``).
    attention_dp: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (``notes`` included)."""
        return asdict(self)


class Report(Protocol):
    """What a plan keeps of a search or an outside model's answer: its JSON view."""

    def to_dict(self) -> dict[str, Any]: ...


class SearchReport(Report, Protocol):
    """What a plan keeps of a deployment search (:class:`tritonkit.planner.search.DeploymentSearch`)."""

    def render_text(self) -> str: ...

    def render_markdown(self) -> str: ...


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


@dataclass(frozen=True)
class CapacityPlan:
    """A finished plan: titled lines by section, the serving suggestion, warnings, the inputs, and
    any predictions made from the measurement (saved with the plan for a later ``--check``)."""

    kind: str  # "llm" | "measured"
    title: str
    lines: tuple[PlanLine, ...]
    suggestion: ServingSuggestion
    warnings: tuple[str, ...] = ()
    inputs: dict[str, Any] = field(default_factory=dict)
    predictions: PredictionSet | None = None
    #: The deployment search that chose this plan's configuration (an LLM planned with ``search=``).
    search: SearchReport | None = None
    #: Each engine's serving parameters (:func:`tritonkit.planner.serving_plan.engine_parameters`).
    engines: dict[str, Any] | None = None
    #: What NVIDIA's performance model answered, when it did (:mod:`tritonkit.planner.external`).
    external: Report | None = None

    def line(self, key: str) -> PlanLine:
        """The line with JSON key ``key`` (``KeyError`` if the plan has none)."""
        for item in self.lines:
            if item.key == key:
                return item
        raise KeyError(key)

    def value(self, key: str) -> Any:
        """The value of line ``key``."""
        return self.line(key).value

    def sections(self) -> list[str]:
        return list(dict.fromkeys(item.section for item in self.lines))

    def to_dict(self) -> dict[str, Any]:
        """JSON view: ``{section: {key: value}}`` plus ``explain`` (unit, basis, note per key)."""
        sections: dict[str, dict[str, Any]] = {}
        explain: dict[str, dict[str, str]] = {}
        for item in self.lines:
            sections.setdefault(item.section, {})[item.key] = item.value
            explain[item.key] = {"label": item.label, "unit": item.unit, "basis": item.basis, "note": item.note}
        return {
            "kind": self.kind,
            "title": self.title,
            "inputs": self.inputs,
            **sections,
            "serving": self.suggestion.to_dict(),
            "warnings": list(self.warnings),
            "explain": explain,
            **({"predictions": self.predictions.to_dict()} if self.predictions is not None else {}),
            **({"search": self.search.to_dict()} if self.search is not None else {}),
            **({"engines": self.engines} if self.engines is not None else {}),
            **({"performance_model": self.external.to_dict()} if self.external is not None else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str) + "\n"

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_dict` as JSON atomically (temp file in the same folder, then ``os.replace``)."""
        return atomic_write(path, self.to_json())

    def render_markdown(self) -> str:
        """The plan as Markdown: a table per section (quantity, value, basis, how), the serving parameters,
        the search's table, the warnings."""
        out: list[str] = [f"# {self.title}"]
        for section in self.sections():
            out += ["", f"## {section}", "", "| quantity | value | basis | how |", "|---|---:|---|---|"]
            out += [f"| {_cell(i.label)} | {_cell(i.value_text())} | {i.basis} | {_cell(i.note)} |"
                    for i in self.lines if i.section == section]
        out += ["", "## serving parameters", "", "| parameter | value | why |", "|---|---:|---|"]
        out += [f"| {key} | {value} | {_cell(self.suggestion.notes.get(key, ''))} |"
                for key, value in self.suggestion.to_dict().items()
                if key not in ("notes", "disaggregated") and value is not None]
        if self.search is not None:
            out += ["", "## search", "", self.search.render_markdown().rstrip("\n")]
        if self.warnings:
            out += ["", "## warnings", "", *[f"- {_cell(w)}" for w in self.warnings]]
        return "\n".join(out) + "\n"

    def render_text(self) -> str:
        """A plain-text table: quantity, value with unit, basis, and how it was obtained."""
        out: list[str] = [self.title, "=" * len(self.title)]
        label_w = max((len(item.label) for item in self.lines), default=10)
        value_w = max((len(item.value_text()) for item in self.lines), default=10)
        for section in self.sections():
            out.append("")
            out.append(f"[{section}]")
            for item in self.lines:
                if item.section != section:
                    continue
                row = f"  {item.label:<{label_w}}  {item.value_text():>{value_w}}  {item.basis:<10}"
                out.append(f"{row}  {item.note}".rstrip())
        out.append("")
        out.append("[serving parameters]")
        for key, value in self.suggestion.to_dict().items():
            if key in ("notes", "disaggregated") or value is None:
                continue
            note = self.suggestion.notes.get(key, "")
            out.append(f"  {key:<32} {value!s:>10}  {note}".rstrip())
        if self.search is not None:
            out.append("")
            out.append(self.search.render_text().rstrip("\n"))
        if self.predictions is not None:
            out.append("")
            out.append(self.predictions.render_text().rstrip("\n"))
        if self.warnings:
            out.append("")
            out.append("[warnings]")
            out.extend(f"  ! {w}" for w in self.warnings)
        return "\n".join(out) + "\n"


@dataclass
class PlanDraft:
    """A plan being written: its lines in the order they are added and its warnings, finished
    into a :class:`CapacityPlan` (the LLM plan and the measured plan are both written this way)."""

    lines: list[PlanLine] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, section: str, key: str, label: str, value: float | int | str | None, unit: str, basis: str,
            note: str = "") -> None:
        """Add one line (see :class:`PlanLine` for the fields)."""
        self.lines.append(PlanLine(section, key, label, value, unit, basis, note))

    def finish(self, kind: str, title: str, suggestion: ServingSuggestion, inputs: dict[str, Any]) -> CapacityPlan:
        """The finished plan, with the lines and warnings added so far."""
        return CapacityPlan(kind=kind, title=title, lines=tuple(self.lines), suggestion=suggestion,
                            warnings=tuple(self.warnings), inputs=inputs)
