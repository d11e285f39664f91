"""Spec files: a command's settings kept in the repository (``--config FILE``), and the spec of a
command line (``--print-config``).

A spec is TOML (YAML for ``.yaml``/``.yml``): one table per command, named by its words
(``[perf.sweep]``, ``[perf.run]``, ``[perf.compare]``, ``[plan]``), or one command's keys at the top
of the file. A key is a parameter's long option name with ``_`` for ``-`` (``max_batch_size``,
``duration_s``) or an argument's name (``model``; ``perf sweep``'s ``repo`` and ``model``), so an
option added to a command is a key without an edit here. The file fills what the command line leaves
out, each value through click's own conversion of its option (types, bounds, callbacks): the settings
values are filled by the one parser of options. A flag given wins; where each setting came from is
kept (:func:`sources`). An unknown key, a wrong type or a value the option refuses is a
:class:`~tritonkit.errors.ConfigError` (exit 2) naming the file, the line and the key, with the
closest valid key.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import yaml

from tritonkit._fs import read_user_text, shown_path
from tritonkit.cli._common import Number, Words, option_name
from tritonkit.errors import ConfigError, TritonKitError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the stdlib has it from 3.11
    import tomli as tomllib

__all__ = ["SpecOption", "read_spec", "sources", "spec_text"]

_OWN = ("config", "print_config", "junit", "help")
_RAW, _FILE = "tritonkit.spec.raw", "tritonkit.spec.file"
_S = click.core.ParameterSource


def _keys(command: click.Command) -> dict[str, click.Parameter]:
    """Every spec key of ``command``: an argument by its name, a variadic one by the words of its
    metavar (``[REPO] MODEL [MODEL...]``: ``repo``, ``model``); an option by its long name
    (``--max-batch-size`` → ``max_batch_size``), or, where an argument has that name, by its
    parameter's (``perf sweep``'s ``--repo``: ``local_repo``)."""
    keys: dict[str, click.Parameter] = {}
    params = [p for p in command.params if p.name not in _OWN and p.name is not None]
    for param in (p for p in params if isinstance(p, click.Argument)):
        words = re.findall(r"[A-Z][A-Z_]*", param.metavar or "") if param.nargs == -1 else []
        keys.update((word.lower(), param) for word in words or [param.name or ""])
    for option in (p for p in params if isinstance(p, click.Option)):
        key = option_name(option).lstrip("-").replace("-", "_")
        keys[option.name if key in keys and option.name else key] = option
    return dict(sorted(keys.items(), key=lambda item: command.params.index(item[1])))


def _lines_toml(text: str) -> dict[tuple[str, ...], int]:
    """Where each table and key of a TOML text starts (tomllib keeps no positions)."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), 1):
        if header := re.match(r"\s*\[\s*([^\[\]]+?)\s*\]", line):
            table = tuple(p.strip().strip("\"'") for p in header.group(1).split("."))
            lines.setdefault(table, number)
        elif key := re.match(r"\s*([\w\"'. -]+?)\s*=", line):
            lines.setdefault(table + tuple(p.strip().strip("\"'") for p in key.group(1).split(".")), number)
    return lines


def _lines_yaml(node: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], int]]:
    for key, value in node.value if isinstance(node, yaml.MappingNode) else ():
        path = (*prefix, str(key.value))
        yield path, key.start_mark.line + 1
        yield from _lines_yaml(value, path)


def read_spec(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """The spec file's data and the line of each table and key; a ConfigError naming the line otherwise."""
    text = read_user_text(path, what="spec file", hint="give a TOML or YAML spec file")
    where, kind = shown_path(path), "YAML" if path.suffix.lower() in (".yaml", ".yml") else "TOML"
    try:
        if kind == "YAML":
            data, lines = yaml.safe_load(text), dict(_lines_yaml(yaml.compose(text)))
        else:
            data, lines = tomllib.loads(text), _lines_toml(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
        mark, said = getattr(exc, "problem_mark", None), re.match(r"(.*?)\s*\(at line (\d+), column \d+\)", str(exc))
        line = mark.line + 1 if mark is not None else said.group(2) if said else None
        problem = getattr(exc, "problem", None) or (said.group(1) if said else str(exc).split("\n")[0] or "nested too deep")
        raise ConfigError(f"spec file {where}{f' line {line}' if line else ''} is not {kind}: {' '.join(problem.split())[:200]}",
                          hint=f"fix the {kind} syntax there (a .yaml or .yml file is read as YAML, others as TOML)"
                          ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"spec file {where} holds {type(data).__name__}, not a table of keys",
                          hint="write `key = value` lines under a [perf.run]-style table")
    return data, lines


def _refuse(path: Path, lines: dict[tuple[str, ...], int], key: tuple[str, ...], problem: str, hint: str) -> None:
    line = next((lines[key[:n]] for n in range(len(key), 0, -1) if key[:n] in lines), None)
    at = f" line {line}" if line is not None else ""
    table = f"[{'.'.join(key[:-1])}] " if len(key) > 1 else ""
    raise ConfigError(f"spec file {shown_path(path)}{at}, {table}key '{key[-1]}': {problem}", hint=hint)


def _unknown(path: Path, lines: dict[tuple[str, ...], int], key: tuple[str, ...], valid: list[str], what: str) -> None:
    close = difflib.get_close_matches(key[-1], valid, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'?" if close else f"the {what} are: {', '.join(sorted(valid))}"
    _refuse(path, lines, key, f"unknown {what[:-1]}", hint)


def _table(path: Path, data: dict[str, Any], lines: dict[tuple[str, ...], int], ctx: click.Context) -> tuple[
        tuple[str, ...], dict[str, Any]]:
    """The table of ``ctx``'s command (every other command's table checked for unknown keys too)."""
    words = tuple(ctx.command_path.split()[1:])
    root = ctx.find_root().command
    if not any(isinstance(v, dict) and k in getattr(root, "commands", {}) for k, v in data.items()):
        return (), data  # one command's keys at the top
    found: dict[tuple[str, ...], dict[str, Any]] = {}

    def walk(table: dict[str, Any], group: Any, prefix: tuple[str, ...]) -> None:
        for key, value in table.items():
            sub = group.commands.get(str(key)) if isinstance(group, click.Group) else None
            name = (*prefix, str(key))
            if isinstance(sub, click.Group) and isinstance(value, dict):
                walk(value, sub, name)
            elif sub is not None and any(p.name == "config" for p in sub.params):
                if not isinstance(value, dict):
                    _refuse(path, lines, name, f"{type(value).__name__} where a table of keys goes",
                            f"write its keys under [{'.'.join(name)}]")
                found[name] = value
                _check_keys(path, lines, name, value, sub)
            else:
                names = [n for n, c in getattr(group, "commands", {}).items() if isinstance(c, click.Group)
                         or any(p.name == "config" for p in c.params)]
                _unknown(path, lines, name, names, "tables")

    walk(data, root, ())
    if words not in found:
        have = ", ".join(f"[{'.'.join(n)}]" for n in found) or "none"
        raise ConfigError(f"spec file {shown_path(path)} has no [{'.'.join(words)}] table (it has {have})",
                          hint=f"add a [{'.'.join(words)}] table, or keep one command's keys at the top of its own file")
    return words, found[words]


def _check_keys(path: Path, lines: dict[tuple[str, ...], int], table: tuple[str, ...], data: dict[str, Any],
                command: click.Command) -> dict[str, click.Parameter]:
    keys = _keys(command)
    for key in (str(k) for k in data if str(k) not in keys):
        _unknown(path, lines, (*table, key), list(keys), "keys")
    return keys


def _value(param: click.Parameter, value: Any) -> Any:
    """``value`` as click takes it for ``param`` from the command line; a ValueError saying the type it needs."""
    many = param.multiple or param.nargs != 1 if isinstance(param, click.Option) else param.nargs != 1
    flag = isinstance(param, click.Option) and param.is_flag
    text = type(param.type) in (Words, click.types.StringParamType)
    if isinstance(value, list) and not many:
        if not text or not value or any(isinstance(v, (bool, list, dict)) for v in value):
            raise ValueError("one value, not a list")
        value = ",".join(map(str, value))  # [1, 2, 4] is the option's own "1,2,4"
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if flag != isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ValueError("true or false" if flag else "a text or a number")
        text_type = not isinstance(param.type, (Number, click.types.IntParamType, click.types.FloatParamType))
        out.append(str(item) if text_type and not flag else item)
    return out if many else out[0]


class SpecOption(click.Option):
    """``--config FILE``: read first (eager), so its values become the defaults the other
    parameters fall back to; the raw command line is kept for :func:`spec_text`."""

    def handle_parse_result(self, ctx: click.Context, opts: Any, args: list[str]) -> tuple[Any, list[str]]:
        ctx.meta[_RAW] = {k: v for k, v in opts.items() if k not in _OWN}
        value, rest = super().handle_parse_result(ctx, opts, args)
        if isinstance(value, Path):
            ctx.default_map = {**(ctx.default_map or {}), **self._load(ctx, Path(value), opts)}
        return value, rest

    def _load(self, ctx: click.Context, path: Path, opts: Any) -> dict[str, Any]:
        data, lines = read_spec(path)
        table, values = _table(path, data, lines, ctx)
        keys = _check_keys(path, lines, table, values, ctx.command)
        filled: dict[str, Any] = {}
        for key, raw in sorted(values.items(), key=lambda item: list(keys).index(str(item[0]))):
            param, name = keys[str(key)], (*table, str(key))
            try:
                value = _value(param, raw)
            except ValueError as exc:
                _refuse(path, lines, name, f"{type(raw).__name__} where it takes {exc}",
                        f"give {exc} (see `{ctx.command_path} --help`)")
            assert param.name is not None
            if isinstance(param, click.Argument) and param.nargs == -1:  # [REPO] MODEL...: the words in order
                value = [*filled.get(param.name, ()), *value]
            try:
                param.process_value(ctx, value)
            except (click.UsageError, TritonKitError) as exc:
                message = exc.format_message() if isinstance(exc, click.UsageError) else exc.message
                _refuse(path, lines, name, " ".join(message.split()), getattr(exc, "hint", None)
                        or f"see `{ctx.command_path} --help`")
            filled[param.name] = value
        ctx.meta[_FILE] = (path, {keys[str(k)].name: lines.get((*table, str(k))) for k in values})
        for given in filled:
            if opts.get(given) == ():
                del opts[given]  # an empty variadic argument is "not given": the file's words fill it
        return filled


def _names(ctx: click.Context) -> Iterator[tuple[str, click.Parameter]]:
    """Each set parameter (not a default) of ``ctx``'s command, by its spec key (a variadic argument
    once, by the words of its metavar)."""
    seen: set[str] = set()
    for key, param in _keys(ctx.command).items():
        assert param.name is not None
        if param.name not in seen and ctx.get_parameter_source(param.name) not in (None, _S.DEFAULT):
            seen.add(param.name)
            yield key, param


def sources(ctx: click.Context) -> dict[str, str]:
    """Where each setting of the command being run came from: ``command line``, ``FILE line N``
    (the spec file) or ``environment``; settings left at their defaults are not named."""
    path, lines = ctx.meta.get(_FILE, (None, {}))
    found = {}
    for key, param in _names(ctx):
        source = ctx.get_parameter_source(param.name or "")
        found[key] = (f"{shown_path(path)} line {lines.get(param.name)}" if source is _S.DEFAULT_MAP and path
                      else "command line" if source is _S.COMMANDLINE else str(getattr(source, "name", "")).lower())
    return found


def _toml(value: Any, param: click.Parameter) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v, param) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and isinstance(param.type, Number):
        try:  # a number as typed, written as one ("6" → 6), unless it is not a plain number
            number = float(value) if any(c in value for c in ".eE") else int(value)
            if math.isfinite(number):
                return repr(number)
        except ValueError:
            pass
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def spec_text(ctx: click.Context, *, with_sources: bool = False) -> str:
    """The spec (TOML) equal to the command being run: every setting not left at its default, as
    typed (the command line's) or read (the spec file's); ``with_sources``: each with where it came from."""
    raw, given = ctx.meta.get(_RAW, {}), ctx.default_map or {}
    found = sources(ctx) if with_sources else {}
    lines = [f"[{'.'.join(ctx.command_path.split()[1:])}]"]
    for key, param in _names(ctx):
        name = param.name or ""
        source = ctx.get_parameter_source(name)
        value = raw.get(name) if source is _S.COMMANDLINE else given[name] if source is _S.DEFAULT_MAP \
            else ctx.params.get(name)
        note = f"  # {found[key]}" if with_sources else ""
        if isinstance(param, click.Argument) and param.nargs == -1 and param.metavar:
            words, value = list(dict.fromkeys(re.findall(r"[A-Z][A-Z_]*", param.metavar))), list(value or ())
            if len(words) == 2 and param.metavar.startswith("[") and len(value) > 1 and Path(value[0]).is_dir():
                lines.append(f"{words[0].lower()} = {_toml(value.pop(0), param)}{note}")
            key, value = words[-1].lower(), value[0] if len(value) == 1 else value
        lines.append(f"{key} = {_toml(value, param)}{note}")
    return "\n".join(lines) + "\n"
