"""Pieces every command shares: error handling, JSON output, the options several commands take."""

from __future__ import annotations

import contextlib
import functools
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import click

from tritonkit._dial import Dial, parse_headers, registered
from tritonkit._fs import path_error
from tritonkit._values import (
    TOLERANCE_PERCENT,
    Bounds,
    check_host_port,
    check_text,
    excerpt,
    field_bounds,
    host_port_problem,  # noqa: F401 (re-exported: the help test checks its examples)
)
from tritonkit.errors import CommandExit, ConfigError, TritonKitError
from tritonkit.perf.judge.criteria import DEFAULT_RATE_TOLERANCE
from tritonkit.perf.judge.sla import EMPTY_SLA
from tritonkit.provision.server import BACKEND_DIR_ENV, SERVER_BIN_ENV

#: Exit status for a TritonKitError that a command did not map itself.
EXIT_ERROR = 2

_Command = TypeVar("_Command", bound=Callable[..., Any])


#: The two forms every ``--sla`` takes (:func:`tritonkit.perf.judge.sla.load_sla` reads both).
SLA_FORMS = "SLA as an expression, e.g. 'p99<=50ms,throughput>=200/s,errors==0', or a YAML file."


def sla_option(more: str = "", *, default: str | None = None) -> Callable[[_Command], _Command]:
    """``--sla`` (``sla_text``), one declaration for every command that takes an SLA: its forms,
    then ``more`` (what this command does with it)."""
    # An empty SLA is refused in the library's own words, saying how to run without one.
    return click.option("--sla", "sla_text", type=SLA_TEXT, default=default, show_default=default is not None,
                        help=f"{SLA_FORMS} {more}".rstrip())


def _percent_to_fraction(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    return value / 100.0


def rate_tolerance_option(default: float = DEFAULT_RATE_TOLERANCE) -> Callable[[_Command], _Command]:
    """``--rate-tolerance PERCENT`` (``rate_tolerance``), one declaration for every command that
    judges request-rate steps: given in percent, handed to the command as the fraction
    :class:`~tritonkit.perf.judge.JudgeSettings` takes (``default`` is that fraction)."""
    return click.option("--rate-tolerance", type=number(TOLERANCE_PERCENT), default=100 * default,
                        show_default=True, callback=_percent_to_fraction,
                        help="With --request-rate, a step meets the SLA only if the server carried the offered "
                             "rate less this many percent.")


def server_bin_option(purpose: str, *, falls_back: bool = True) -> Callable[[_Command], _Command]:
    """``--server-bin PATH`` (``server_bin``), one declaration for every command that runs or reads a
    local tritonserver: ``purpose`` says what this command does with it. With ``falls_back`` the
    command finds a server without it as :func:`tritonkit.server.locate_server` does, and the help says so."""
    fallback = f" (default: ${SERVER_BIN_ENV}, else the one bundled in nvidia-pytriton)" if falls_back else ""
    return click.option("--server-bin", type=UserPath(dir_okay=False, path_type=Path), default=None,
                        help=f"{purpose}{fallback}.")


def backend_dir_option(purpose: str) -> Callable[[_Command], _Command]:
    """``--backend-dir DIR`` (``backend_dir``), one declaration for every command that starts or inspects a
    local tritonserver: the folder of backends it loads. ``purpose`` says what this command does with it."""
    return click.option(
        "--backend-dir", type=UserPath(file_okay=False, path_type=Path), default=None,
        help=f"{purpose}: the server's backends folder, e.g. an NGC container's /opt/tritonserver/backends "
             f"(default: ${BACKEND_DIR_ENV}, else the server's own; the bundled server keeps its python "
             "backend beside them).")


def local_server_options(bin_purpose: str, dir_purpose: str) -> Callable[[_Command], _Command]:
    """``--server-bin`` then ``--backend-dir``, the group every command that runs or targets one local
    tritonserver takes: the server to run, and the backends it loads."""
    server_bin, backend_dir = server_bin_option(bin_purpose), backend_dir_option(dir_purpose)
    return lambda command: server_bin(backend_dir(command))


class HostPort(click.ParamType):
    """A ``host:port`` option (``127.0.0.1:8001``, ``[::1]:8001``), checked when it is parsed by
    :func:`tritonkit._values.check_host_port`, the one check every address goes through.

    A port outside 1–65535 (or not in ASCII digits), a missing host or an IPv6 host without
    brackets is refused at once, naming the option, rather than failing later as "cannot reach
    the server".
    """

    name = "host:port"

    def __init__(self, example: str = "127.0.0.1:8001") -> None:
        self.example = example

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """``value`` unchanged when it is a valid ``host:port``; a :class:`ConfigError` (exit 2) otherwise."""
        text = str(value).strip()
        return check_host_port(text, option_name(param), example=self.example)


#: The one ``--url``/``--server`` parameter type every command shares.
HOST_PORT = HostPort()


class HeaderItem(click.ParamType):
    """One ``--header``: ``NAME=VALUE`` or ``@FILE`` (:func:`tritonkit._dial.parse_headers`, checked as
    parsed; a value is never shown). From ``$TRITONKIT_HEADERS``: one item a line."""

    name = "NAME=VALUE|@FILE"
    envvar_list_splitter = "\n"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``value`` unchanged once it parses; a :class:`ConfigError` naming the option otherwise."""
        parse_headers([str(value)], option_name(param))
        return str(value)


def dial_options(command: _Command) -> _Command:
    """``--tls``, ``--tls-ca``, ``--tls-cert``, ``--tls-key``, ``--tls-server-name``, ``--header`` (each also
    from its ``TRITONKIT_…`` variable), one declaration for every command that dials a server: the
    :class:`~tritonkit._dial.Dial` they make is registered for every server the command dials
    (:func:`tritonkit._dial.registered`), so the client, the admin API and perf_analyzer all use it."""

    @functools.wraps(command)
    def run(*args: Any, tls: bool, tls_ca: Path | None, tls_cert: Path | None, tls_key: Path | None,
            tls_server_name: str | None, headers: tuple[str, ...], **kwargs: Any) -> Any:
        with registered("*", Dial(tls=tls, ca=tls_ca, cert=tls_cert, key=tls_key, server_name=tls_server_name,
                                  headers=parse_headers(headers))):
            return command(*args, **kwargs)

    path = UserPath(exists=True, dir_okay=False, path_type=Path)
    for name, kind, text in reversed([
        ("--tls", None, "Speak TLS to the server, trusting this machine's CAs (implied by the --tls-* options)."),
        ("--tls-ca", path, "TLS: the CA (PEM) that signed the server's certificate."),
        ("--tls-cert", path, "Mutual TLS: this client's certificate (PEM); with --tls-key."),
        ("--tls-key", path, "Mutual TLS: the private key (PEM) of --tls-cert; only its path is ever recorded."),
        ("--tls-server-name", Words(example="triton.example.com"),
         "TLS: the name the server's certificate carries, when it is not the host dialed."),
        ("--header", HeaderItem(), "A header sent with every call (repeat), e.g. triton-grpc-protocol-admin-key=VALUE; "
         "@FILE reads NAME: VALUE lines from FILE. Values never go to a result, report, argv record or log."),
    ]):
        env = "TRITONKIT_" + name[2:].upper().replace("-", "_").replace("HEADER", "HEADERS")
        run = click.option(name, *(["headers"] if name == "--header" else []), type=kind,
                           is_flag=kind is None, multiple=name == "--header", envvar=env, show_envvar=True,
                           help=text)(run)
    return run  # type: ignore[return-value]


def option_name(param: click.Parameter | None) -> str:
    """How a user wrote ``param``: its long option (``--duration-s``) or its argument's name (``PATH``)."""
    if param is None:
        return "value"
    if isinstance(param, click.Option) and param.opts:
        return max(param.opts, key=len)
    return param.human_readable_name


class Number(click.ParamType):
    """A number option held to its :class:`~tritonkit._values.Bounds` as it is parsed: the settings
    field it fills checks the same bounds (:func:`tritonkit._values.check_fields`), so the option and
    the library refuse the same values (``nan``, ``inf``, past int32, below zero…), the option naming
    itself and what to give instead."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self.name = "integer" if bounds.integer else "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``value`` as a checked number; a :class:`ConfigError` (exit 2, with a fix) otherwise."""
        where = option_name(param)
        return self.bounds.parse(value, where) if isinstance(value, str) else self.bounds.check(value, where)


class Percent(Number):
    """A percentage option, ``20%`` or ``20``, held to :data:`~tritonkit._values.TOLERANCE_PERCENT`
    (0 up to, not including, 100) and handed on as the fraction the library takes (``0.2``)."""

    def __init__(self) -> None:
        super().__init__(TOLERANCE_PERCENT)
        self.name = "percent"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``value`` (``"20%"``) as a fraction (``0.2``); a :class:`ConfigError` naming the option otherwise."""
        if isinstance(value, float):
            return value  # the default, a fraction already
        text = str(value).strip()
        return self.bounds.parse(text.removesuffix("%"), option_name(param), shown=text) / 100.0


def number(source: Bounds | type, field: str | None = None) -> Number:
    """The option type for ``source``: a :class:`~tritonkit._values.Bounds`, or a settings dataclass
    and its ``field`` (whose declared bounds are used, so the two cannot drift)."""
    if isinstance(source, Bounds):
        return Number(source)
    assert field is not None, "a settings class needs the field whose bounds to use"
    return Number(field_bounds(source, field))


def _from_default(param: click.Parameter | None, ctx: click.Context | None, value: str) -> bool:
    """Whether ``value`` is ``param``'s default rather than typed: ``--backend ''`` typed is the
    user's empty text (refused) even where the default is ``""`` (not given)."""
    if param is None or param.name is None:
        return False
    source = ctx.get_parameter_source(param.name) if ctx is not None else None
    if source is None:
        return value == param.default
    return source is click.core.ParameterSource.DEFAULT  # a spec file's value (DEFAULT_MAP) is the user's


class Words(click.ParamType):
    """A text option that must not be empty (``--target ''``, ``repo init ''``) and, when ``check``
    is given, passes it (the library's own parser, raising ``ConfigError``); the text is kept as typed."""

    name = "text"

    def __init__(self, check: Callable[[str, str], object] | None = None, *, example: str = "",
                 empty: tuple[str, str] | None = None) -> None:
        self.check = check
        self.example = example
        self.empty = empty

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """``value`` unchanged when it is a usable text; a :class:`ConfigError` otherwise."""
        if not isinstance(value, str) or _from_default(param, ctx, value):
            return value  # the option's own default ("" for "not set") is not the user's text
        where = option_name(param)
        if not value.strip():
            if self.empty is not None:  # the option's own words for an empty value (how to go without it)
                raise ConfigError(f"{where} is empty: {self.empty[0]}", hint=self.empty[1])
            example = f", e.g. {where} {self.example}" if where.startswith("-") and self.example else ""
            raise ConfigError(f"{where} is empty", hint=f"give a value{example}")
        if self.check is not None:
            self.check(value, where)  # first: its own words for what is wrong (a model name's rules)
        check_text(value, where)
        return value


#: ``--sla``'s type: a text that, left empty, is refused as the library refuses an empty SLA.
SLA_TEXT = Words(empty=EMPTY_SLA)


def harden_text_options(group: click.Group) -> None:
    """Give every plain text option and argument of ``group``'s commands the :class:`Words` checks
    (not empty, no control character, UTF-8), so a command added later gets them without asking:
    ``--platform ''`` is an error, not "not given"."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            harden_text_options(command)
            continue
        for param in command.params:
            if type(param.type) is click.types.StringParamType:
                param.type = Words()


class UserPath(click.Path):
    """``click.Path`` that also refuses what no file system path can be: an empty text (which
    would mean the current folder) and a NUL character; every command's path options use it."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, once it is not empty and holds no NUL; then click's own checks."""
        if isinstance(value, str):
            where = option_name(param)
            if not value.strip():
                example = f", e.g. {where} ./model_repository" if where.startswith("-") else ""
                raise ConfigError(f"{where} is an empty path", hint=f"give a path{example}")
            if "\0" in value:
                raise ConfigError(f"{where} {excerpt(value)} holds a NUL character", hint="give a real path")
            check_text(value, where)
        return super().convert(value, param, ctx)


def check_model_name(text: str, where: str) -> None:
    """Refuse a model name Triton's tools cannot carry (:func:`tritonkit.repository.names.check_name`)."""
    from tritonkit.repository.names import check_name  # only when the option is given

    check_name(text, "model", where)


def levels_type(mode: str) -> Words:
    """The type of a ladder option (``--concurrency``, ``--request-rate``): levels as the library
    reads them (:func:`tritonkit.perf.measure.plan.parse_levels`), each within its bounds; kept as text."""

    def check(text: str, where: str) -> None:
        from tritonkit.perf.measure.plan import parse_levels  # only when the option is given

        parse_levels(text, mode, where)

    return Words(check, example="1,2,4,8" if mode == "concurrency" else "50:400")


def report_error(exc: TritonKitError) -> None:
    """Print ``exc`` as one line (plus a fix line) on stderr, never a traceback."""
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"  fix: {exc.hint}", err=True)


def report_usage_error(exc: click.UsageError) -> None:
    """Print click's own refusal (an unknown option, a missing argument, a value outside a choice) as
    the toolkit prints every refusal: one ``error:`` line and a ``fix:`` line pointing at the help."""
    message = " ".join(exc.format_message().split())
    names: list[str] = []
    ctx = exc.ctx
    while ctx is not None and ctx.parent is not None:  # the root is `tritonkit` however it was started
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    command = " ".join(["tritonkit", *names])
    click.secho(f"error: {message}", fg="red", err=True)
    click.echo(f"  fix: see `{command} --help`", err=True)


def check_utf8_args(args: list[str]) -> None:
    """Refuse a command-line word that is not UTF-8 (Python holds its bytes as surrogate escapes,
    which no file, JSON document or terminal can write), naming the option it was given to."""
    for index, arg in enumerate(args):
        if not any("\udc80" <= c <= "\udcff" for c in arg):
            continue
        option, _, value = arg.partition("=") if arg.startswith("--") and "=" in arg else ("", "", arg)
        if not option:
            before = args[index - 1] if index else ""
            option = before if before.startswith("-") and "=" not in before else "argument"
        check_text(value, option)


class ErrorHandlingGroup(click.Group):
    """A click group that turns TritonKitError into a message and exit status 2, and prints click's
    usage errors the same way (``error:`` and ``fix:`` lines, exit 2)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            if ctx.parent is None:
                check_utf8_args(args)
            return super().parse_args(ctx, args)
        except TritonKitError as exc:
            report_error(exc)
            ctx.exit(EXIT_ERROR)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a bare group shows its help
        except click.UsageError as exc:
            report_usage_error(exc)
            ctx.exit(exc.exit_code)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TritonKitError as exc:
            report_error(exc)
            ctx.exit(getattr(exc, "exit_code", EXIT_ERROR))
        except CommandExit as exc:
            ctx.exit(exc.code)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            report_usage_error(exc)
            ctx.exit(exc.exit_code)
        except OSError as exc:
            if exc.filename is None:
                raise  # not about a path: a bug to see whole
            # A path the user gave that the system refused (--out /proc/x, a full disk): the one place
            # an OSError a command did not translate itself becomes a message with a fix.
            report_error(path_error(exc, "use the path"))
            ctx.exit(EXIT_ERROR)


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def echo_result(result: Any, as_json: bool, text: Callable[[], str] | None = None, *, nl: bool = True) -> None:
    """``result.to_dict()`` as JSON with ``--json``, else ``text()`` (default: ``result.summary()``)."""
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(text() if text is not None else result.summary(), nl=nl)


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (a build server stopping a job) acts like Ctrl-C.

    Commands then run the same clean-up for both: children stopped, results saved. The previous
    handler is restored on exit. Off the main thread (signals cannot be handled there) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

