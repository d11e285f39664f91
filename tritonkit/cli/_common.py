"""Pieces every command shares: error handling, JSON output, the options several commands take."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import click

from tritonkit.errors import CommandExit, TritonKitError
from tritonkit.perf.judge.criteria import DEFAULT_RATE_TOLERANCE
from tritonkit.provision.server import BACKEND_DIR_ENV, SERVER_BIN_ENV

#: Exit status for a TritonKitError that a command did not map itself.
EXIT_ERROR = 2

_Command = TypeVar("_Command", bound=Callable[..., Any])


#: The two forms every ``--sla`` takes (:func:`tritonkit.perf.judge.sla.load_sla` reads both).
SLA_FORMS = "SLA as an expression, e.g. 'p99<=50ms,throughput>=200/s,errors==0', or a YAML file."


def sla_option(more: str = "", *, default: str | None = None) -> Callable[[_Command], _Command]:
    """``--sla`` (``sla_text``), one declaration for every command that takes an SLA: its forms,
    then ``more`` (what this command does with it)."""
    return click.option("--sla", "sla_text", default=default, show_default=default is not None,
                        help=f"{SLA_FORMS} {more}".rstrip())


def _percent_to_fraction(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    return value / 100.0


def rate_tolerance_option(default: float = DEFAULT_RATE_TOLERANCE) -> Callable[[_Command], _Command]:
    """``--rate-tolerance PERCENT`` (``rate_tolerance``), one declaration for every command that
    judges request-rate steps: given in percent, handed to the command as the fraction
    :class:`~tritonkit.perf.judge.JudgeSettings` takes (``default`` is that fraction)."""
    return click.option("--rate-tolerance", type=click.FloatRange(0.0, 100.0, max_open=True), default=100 * default,
                        show_default=True, callback=_percent_to_fraction,
                        help="With --request-rate, a step meets the SLA only if the server carried the offered "
                             "rate less this many percent.")


def server_bin_option(purpose: str, *, falls_back: bool = True) -> Callable[[_Command], _Command]:
    """``--server-bin PATH`` (``server_bin``), one declaration for every command that runs or reads a
    local tritonserver: ``purpose`` says what this command does with it. With ``falls_back`` the
    command finds a server without it as :func:`tritonkit.server.locate_server` does, and the help says so."""
    fallback = f" (default: ${SERVER_BIN_ENV}, else the one bundled in nvidia-pytriton)" if falls_back else ""
    return click.option("--server-bin", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help=f"{purpose}{fallback}.")


def backend_dir_option(purpose: str) -> Callable[[_Command], _Command]:
    """``--backend-dir DIR`` (``backend_dir``), one declaration for every command that starts or inspects a
    local tritonserver: the folder of backends it loads. ``purpose`` says what this command does with it."""
    return click.option(
        "--backend-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
        help=f"{purpose}: the server's backends folder, e.g. an NGC container's /opt/tritonserver/backends "
             f"(default: ${BACKEND_DIR_ENV}, else the server's own; the bundled server keeps its python "
             "backend beside them).")


class HostPort(click.ParamType):
    """A ``host:port`` option (``127.0.0.1:8001``, ``[::1]:8001``), checked when it is parsed.

    A port outside 1–65535 or a missing host is refused at once, naming the option, rather than
    failing later as "cannot reach the server".
    """

    name = "host:port"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """``value`` unchanged when it is a valid ``host:port``; a usage error (exit 2) otherwise."""
        text = str(value).strip()
        problem = host_port_problem(text)
        if problem:
            self.fail(f"{text!r} is not host:port ({problem}); e.g. 127.0.0.1:8001", param, ctx)
        return text


def host_port_problem(text: str) -> str | None:
    """What is wrong with ``text`` as ``host:port``, or ``None`` when nothing is."""
    if "://" in text:
        return "give host:port without a scheme"
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        return "a host and a port are both needed"
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        return "write an IPv6 host in brackets, e.g. [::1]:8001"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"port {port or '(none)'} is not a number from 1 to 65535"
    return None


#: The one ``--url``/``--server`` parameter type every command shares.
HOST_PORT = HostPort()


def report_error(exc: TritonKitError) -> None:
    """Print ``exc`` as one line (plus a fix line) on stderr, never a traceback."""
    click.secho(f"error: {exc.message}", fg="red", err=True)
    if exc.hint:
        click.echo(f"  fix: {exc.hint}", err=True)


class ErrorHandlingGroup(click.Group):
    """A click group that turns TritonKitError into a message and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TritonKitError as exc:
            report_error(exc)
            ctx.exit(getattr(exc, "exit_code", EXIT_ERROR))
        except CommandExit as exc:
            ctx.exit(exc.code)


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


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

