"""``config.pbtxt`` text: render, parse, read, write — through protobuf ``text_format``.

Rendering is pure and stable: top-level fields come in the order people read a
config (identity, tensors, scheduling, instances, the rest), each rendered by
protobuf's own ``text_format``, so any field the schema has is written and
anything written parses back to an identical ``ModelConfig``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write, clean_stale_temps, read_user_text
from tritonkit._values import excerpt
from tritonkit.errors import ConfigError, ConfigSyntaxError

__all__ = [
    "CONFIG_FILENAME",
    "ConfigSyntaxError",
    "FieldLines",
    "atomic_write",
    "enum_name",
    "field_lines",
    "parse_config",
    "read_config",
    "render_config",
    "write_config",
]

CONFIG_FILENAME = "config.pbtxt"
#: The largest ``config.pbtxt`` read: the longest real ones (TensorRT-LLM's) are tens of kilobytes.
MAX_CONFIG_BYTES = 16 * 1024 * 1024

# The order a reader expects; fields not named here follow in field-number order.
_FIELD_ORDER = (
    "name",
    "platform",
    "backend",
    "runtime",
    "max_batch_size",
    "version_policy",
    "input",
    "output",
    "batch_input",
    "batch_output",
    "dynamic_batching",
    "sequence_batching",
    "ensemble_scheduling",
    "instance_group",
    "optimization",
    "model_transaction_policy",
    "response_cache",
    "parameters",
    "model_warmup",
    "default_model_filename",
    "cc_model_filenames",
    "metric_tags",
    "model_operations",
    "model_repository_agents",
    "model_metrics",
)


def is_repeated(fd: Any) -> bool:
    """Whether a protobuf field descriptor is repeated (``label`` is deprecated in protobuf 6)."""
    flag = getattr(fd, "is_repeated", None)
    if isinstance(flag, bool):
        return flag
    return bool(fd.label == fd.LABEL_REPEATED)


def _ordered_fields() -> list[Any]:
    by_name = mc.ModelConfig.DESCRIPTOR.fields_by_name
    known = [by_name[n] for n in _FIELD_ORDER if n in by_name]
    rest = sorted((f for f in mc.ModelConfig.DESCRIPTOR.fields if f.name not in _FIELD_ORDER),
                  key=lambda f: f.number)
    return known + rest


_ORDERED_FIELDS = _ordered_fields()


def render_config(config: mc.ModelConfig) -> str:
    """Render ``config`` as ``config.pbtxt`` text (pure; same input, same bytes)."""
    present = {f.name for f, _ in config.ListFields()}
    chunks: list[str] = []
    for fd in _ORDERED_FIELDS:
        if fd.name == "max_batch_size" and fd.name not in present:
            # WAR: proto3 text_format omits zero scalars, so a non-batching model would
            # have no max_batch_size line at all. Triton's auto-complete (and people
            # reading the file) then cannot tell "0 on purpose" from "unset"; some
            # backends fill in their own batch size. Writing it explicitly removes the doubt.
            chunks.append("max_batch_size: 0\n")
            continue
        if fd.name not in present:
            continue
        single = mc.ModelConfig()
        # Copy one field by round-tripping through a message holding only it.
        if is_repeated(fd):
            if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
                getattr(single, fd.name).MergeFrom(getattr(config, fd.name))
            else:
                getattr(single, fd.name).extend(getattr(config, fd.name))
        elif fd.message_type is not None:
            getattr(single, fd.name).CopyFrom(getattr(config, fd.name))
        else:
            setattr(single, fd.name, getattr(config, fd.name))
        chunks.append(text_format.MessageToString(single, as_utf8=True))
    return _compact_lists("".join(chunks))


def _list_only_names() -> frozenset[str]:
    """Scalar field names that are repeated wherever they occur in the schema (``dims``, ``gpus``, ...)."""
    repeated: set[str] = set()
    singular: set[str] = set()
    seen: set[str] = set()
    stack = [mc.ModelConfig.DESCRIPTOR]
    while stack:
        desc = stack.pop()
        if desc.full_name in seen:
            continue
        seen.add(desc.full_name)
        for fd in desc.fields:
            if fd.message_type is not None:
                stack.append(fd.message_type)
            else:
                (repeated if is_repeated(fd) else singular).add(fd.name)
    return frozenset(repeated - singular)


_LIST_ONLY = _list_only_names()
_SCALAR_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>\w+): (?P<value>[^{}\n]+)$")


def _compact_lists(text: str) -> str:
    """Write runs of a repeated scalar (``dims: 3`` / ``dims: 224``) as one ``dims: [ 3, 224 ]`` line.

    text_format prints one line per element; Triton's documentation (and people) write lists.
    A singular field is printed at most once per message, so a run of the same key at the same
    indent can only be a repeated field, and the list form parses back to the same message.
    Fields that are repeated everywhere in the schema (``dims``) get the list form even when single.
    """
    out: list[str] = []
    run_key: tuple[str, str] | None = None
    run_values: list[str] = []

    def flush() -> None:
        if run_key is None:
            return
        indent, key = run_key
        if len(run_values) == 1 and key not in _LIST_ONLY:
            out.append(f"{indent}{key}: {run_values[0]}")
        else:
            out.append(f"{indent}{key}: [ {', '.join(run_values)} ]")

    for line in text.split("\n"):
        match = _SCALAR_LINE.match(line)
        if match is not None and (match.group("indent"), match.group("key")) == run_key:
            run_values.append(match.group("value"))
            continue
        flush()
        if match is not None:
            run_key, run_values = (match.group("indent"), match.group("key")), [match.group("value")]
        else:
            run_key, run_values = None, []
            out.append(line)
    flush()
    return "\n".join(out)


# ---------------------------------------------------------------------------- enums


def _enum_problem(descriptor: Any, number: int) -> str | None:
    if int(number) in descriptor.values_by_number:
        return None
    known = ", ".join(v.name for v in descriptor.values)
    return f"{number} is not a {descriptor.name} (known: {known})"


def enum_name(enum: Any, number: int, *, field: str) -> str:
    """The name of ``number`` in the protobuf enum ``enum`` (``mc.DataType``, ``mc.ModelInstanceGroup.Kind``…).

    Every enum of a config becomes a name through here. protobuf's text format accepts any number
    for an enum field (``data_type: -3``, ``kind: 12``): a number the enum does not define is a
    :class:`ConfigError` naming ``field`` and the names it may take, never a ``ValueError``.
    """
    descriptor = getattr(enum, "DESCRIPTOR", enum)
    problem = _enum_problem(descriptor, number)
    if problem is not None:
        raise ConfigError(f"{field}: {problem}", hint="write the value by its name")
    return str(descriptor.values_by_number[int(number)].name)


def _unknown_enums(message: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(field path, problem) for every enum value in ``message`` its enum does not define."""
    for fd, value in message.ListFields():
        path = f"{prefix}.{fd.name}" if prefix else fd.name
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            for key, item in value.items():
                if hasattr(item, "ListFields"):
                    yield from _unknown_enums(item, f"{path}[\"{key}\"]")
            continue
        items = list(value) if is_repeated(fd) else [value]
        for index, item in enumerate(items):
            where = f"{path}[{index}]" if is_repeated(fd) else path
            if fd.enum_type is not None:
                problem = _enum_problem(fd.enum_type, item)
                if problem is not None:
                    yield where, problem
            elif fd.message_type is not None:
                yield from _unknown_enums(item, where)


# ---------------------------------------------------------------------------- parse, read, write


def parse_config(text: str, *, path: Path | str | None = None) -> mc.ModelConfig:
    """Parse ``config.pbtxt`` text into Triton's ``ModelConfig``.

    A syntax error becomes :class:`ConfigSyntaxError` naming the file, line and column; so does
    an enum written as a number the enum does not define (protobuf's text format takes any), and
    nesting too deep for the parser.
    """
    config = mc.ModelConfig()
    where = str(path) if path is not None else "<config>"
    try:
        text_format.Parse(text, config)
    except RecursionError:
        raise ConfigSyntaxError(f"{where}: nested too deeply to read", path=path,
                                hint="a config nests a few levels deep: look for unbalanced braces") from None
    except ValueError as exc:  # protobuf's own range check of an enum number, raised outside ParseError
        raise ConfigSyntaxError(f"{where}: a number out of range for its field ({excerpt(str(exc), 80)})", path=path,
                                hint="write an enum by its name (Triton's model_config.proto lists them)") from exc
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        detail = str(exc)
        # ParseError's text starts with "line:col : "; keep only the explanation.
        if line is not None and detail.startswith(f"{line}:"):
            detail = detail.split(" : ", 1)[-1]
        pos = f":{line}:{column}" if line is not None else ""
        raise ConfigSyntaxError(f"{where}{pos}: {detail}", line=line, column=column, path=path,
                                hint="fix the syntax at that position (see Triton's model_config.proto "
                                "for field names and types)") from exc
    for field_path, problem in _unknown_enums(config):
        line = field_lines(text).line_of(field_path)
        pos = f":{line}" if line is not None else ""
        raise ConfigSyntaxError(f"{where}{pos}: {field_path}: {problem}", line=line, path=path,
                                hint="write the value by its name (Triton's model_config.proto lists them)")
    return config


def read_config(path: Path | str) -> mc.ModelConfig:
    """Read a ``config.pbtxt`` file (or a model folder holding one)."""
    p = Path(path)
    with contextlib.suppress(OSError, ValueError):  # a path the reader below names, however it is wrong
        if p.is_dir() and p.name != CONFIG_FILENAME:
            p = p / CONFIG_FILENAME
    # A writer killed between its temp file and the rename left one behind: the next reader cleans it.
    clean_stale_temps(p)
    text = read_user_text(p, what="model config", max_bytes=MAX_CONFIG_BYTES,
                          hint=f"give a model folder holding {CONFIG_FILENAME}, or that file")
    return parse_config(text, path=p)


def write_config(config: mc.ModelConfig, path: Path | str) -> Path:
    """Write ``config`` to ``path`` atomically; a folder gets ``config.pbtxt`` inside it."""
    p = Path(path)
    if p.is_dir() or p.suffix == "":
        p = p / CONFIG_FILENAME
    return atomic_write(p, render_config(config))


# ---------------------------------------------------------------------------- line index


class FieldLines:
    """Maps field paths (``dynamic_batching.preferred_batch_size[1]``, ``input[0].dims``) to lines."""

    def __init__(self, lines: dict[str, int]) -> None:
        self._lines = lines

    def paths(self) -> list[str]:
        """Every field path written in the text, in the order first seen."""
        return list(self._lines)

    def has(self, field_path: str) -> bool:
        """Whether ``field_path`` itself is written in the text (even with a zero value)."""
        return field_path in self._lines

    def line_of(self, field_path: str) -> int | None:
        """The 1-based line of ``field_path``, or of its nearest enclosing field written in the file."""
        path = field_path
        while path:
            if path in self._lines:
                return self._lines[path]
            # Walk up: "a.b[1].c" -> "a.b[1]" -> "a.b" -> "a".
            if path.endswith("]"):
                path = path[: path.rfind("[")]
            elif "." in path:
                path = path[: path.rfind(".")]
            else:
                break
        return None


def field_lines(text: str) -> FieldLines:
    """Index where each field path first appears in ``text`` (best effort; never raises).

    Map fields (``parameters``, ``input_map``) are indexed by key: ``parameters["k"]``.
    """
    lines: dict[str, int] = {}
    # An index for messages must never break linting: a text it cannot follow just has fewer lines.
    with contextlib.suppress(Exception):
        _index(text, lines)
    return FieldLines(lines)


def _index(text: str, out: dict[str, int]) -> None:
    tok = text_format.Tokenizer(text.splitlines())

    def line() -> int:
        return int(tok._line) + 1  # type: ignore[attr-defined]  # Tokenizer has no public line accessor

    def skip_scalar() -> None:
        if tok.token == "-":
            tok.NextToken()
        tok.NextToken()
        while not tok.AtEnd() and tok.token[:1] in ("'", '"'):  # adjacent strings concatenate
            tok.NextToken()

    # Frames: ["msg", path prefix, repeat counters, descriptor]
    #      or ["list", base path, parent counters, next index, element descriptor].
    # The descriptor tells repeated fields (indexed: "input[0]") from singular ones ("dynamic_batching").
    stack: list[list[Any]] = [["msg", "", {}, mc.ModelConfig.DESCRIPTOR]]
    while not tok.AtEnd():
        frame = stack[-1]
        token = tok.token
        if frame[0] == "list":
            if token == "]":
                frame[2][frame[1].rsplit(".", 1)[-1]] = frame[3]
                stack.pop()
                tok.NextToken()
            elif token == ",":
                tok.NextToken()
            else:
                item = f"{frame[1]}[{frame[3]}]"
                out.setdefault(item, line())
                frame[3] += 1
                if token in ("{", "<"):
                    tok.NextToken()
                    stack.append(["msg", item, {}, frame[4]])
                else:
                    skip_scalar()
            continue
        if token in ("}", ">"):
            tok.NextToken()
            if len(stack) > 1:
                stack.pop()
            continue
        if token in (",", ";") or not (token[:1].isalpha() or token[:1] == "_"):
            tok.NextToken()
            continue
        name, at = token, line()
        prefix, counters, desc = frame[1], frame[2], frame[3]
        fd = desc.fields_by_name.get(name) if desc is not None else None
        repeated = fd is not None and is_repeated(fd)
        sub_desc = fd.message_type if fd is not None else None
        tok.NextToken()
        if tok.token == ":":
            tok.NextToken()
        base = f"{prefix}.{name}" if prefix else name
        index = counters.get(name, 0)
        here = f"{base}[{index}]" if repeated else base
        out.setdefault(base, at)
        if tok.token in ("{", "<"):
            counters[name] = index + 1
            out.setdefault(here, at)
            tok.NextToken()
            stack.append(["msg", here, {}, sub_desc])
        elif tok.token == "[":
            tok.NextToken()
            stack.append(["list", base, counters, index, sub_desc])
        else:
            counters[name] = index + 1
            out.setdefault(here, at)
            if name == "key" and prefix.endswith("]") and tok.token[:1] == '"':
                # A map entry ("parameters { key: "k" ... }"): index it by key too.
                out.setdefault(f'{prefix[: prefix.rfind("[")]}[{tok.token}]', at)
            skip_scalar()
