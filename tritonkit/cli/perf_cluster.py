"""The cluster options of ``perf sweep`` and ``perf run`` (``--cluster ADDR`` …), declared once, and
their printing; each command parses them and makes one call into :mod:`tritonkit.perf.cluster`.

On a terminal a line per event on stderr (``[model @ node] …``) and a summary on stdout; piped,
``key=value`` lines; ``--json`` one document.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tritonkit._values import CLIENT_NODES
from tritonkit.cli._common import CommandExit, Words, echo_json, number, sigterm_as_interrupt
from tritonkit.perf.judge.verdict import Exit

__all__ = ["ClusterPrinter", "cluster_load_tests", "cluster_run_options", "cluster_settings", "cluster_sweep_options",
           "reject_cluster_options", "run_cluster_sweep_command"]

_Command = TypeVar("_Command", bound=Callable[..., Any])

_CLUSTER_HELP = ("Run on this Ray cluster: HOST:PORT of its head, or 'auto' for the one this machine "
                 "belongs to (needs pip install 'tritonkit[cluster]').")


def cluster_address_option(more: str = "") -> Callable[[_Command], _Command]:
    """``--cluster ADDR`` (``cluster``), one declaration for every command that can use a cluster."""
    return click.option("--cluster", "cluster", type=Words(_check_cluster, example="10.0.0.5:6379"), default=None,
                        metavar="ADDR", help=f"{_CLUSTER_HELP} {more}".strip())


def _check_cluster(text: str, where: str) -> None:
    from tritonkit.perf.cluster.nodes import check_cluster_address  # only when the option is given

    check_cluster_address(text, where)


def cluster_sweep_options(command: _Command) -> _Command:
    """The options ``perf sweep`` takes for a cluster: ``--cluster``, ``--node-resources``,
    ``--shared-repo``, ``--separately``."""
    for option in reversed([
        cluster_address_option("Each model is swept on a node of it, with its own server and perf_analyzer there."),
        click.option("--node-resources", default=None, metavar="NAME=N,…",
                     help="What each model's sweep needs of its node, in Ray's resource names, e.g. GPU=1 "
                          "(default: CPU=1, plus GPU=1 for a model with KIND_GPU instances)."),
        click.option("--shared-repo", default=None, metavar="PATH",
                     help="REPO as every node sees it (a shared file system): model folders are read there "
                          "instead of sent through Ray's object store."),
        click.option("--separately", is_flag=True,
                     help="With --cluster and several models: sweep each on its own (its own winner, no joint phase)."),
    ]):
        command = option(command)
    return command


def cluster_run_options(command: _Command) -> _Command:
    """The options ``perf run`` takes for a cluster: ``--cluster`` and ``--clients``."""
    command = click.option("--clients", type=number(CLIENT_NODES), default=None, metavar="N",
                           help="With --cluster: N perf_analyzer clients on N nodes at once, each with its share "
                                "of the concurrency or rate; requests merged (default 2).")(command)
    return cluster_address_option("Each step runs from --clients nodes of it at once.")(command)


def cluster_load_tests(cluster: str | None, clients: int | None) -> tuple[Any, Any]:
    """What runs ``perf run`` (and ``perf run --llm``) with these options: ``(None, None)`` without
    ``--cluster`` (the local load tests); else :func:`~tritonkit.perf.cluster.run_cluster_perf` in the
    shapes of :func:`~tritonkit.perf.command.load_test` and ``llm_load_test``."""
    if cluster is None:
        reject_cluster_options(clients=clients)
        return None, None
    from tritonkit.perf.cluster import ClusterSettings, run_cluster_perf

    settings = ClusterSettings(address=cluster)
    count = 2 if clients is None else clients

    def classic(model: str, where: Any, **kwargs: Any) -> Any:
        return run_cluster_perf(model, where, settings, clients=count, **kwargs)

    def llm(model: str, load: Any, where: Any, **kwargs: Any) -> Any:
        return run_cluster_perf(model, where, settings, clients=count, llm=load, **kwargs)

    return classic, llm


def reject_cluster_options(**given: Any) -> None:
    """A cluster option given without ``--cluster`` is a usage error naming it."""
    for name, value in given.items():
        if value:
            raise click.UsageError(f"--{name.replace('_', '-')} is for --cluster runs; add --cluster ADDR")


def cluster_settings(cluster: str, node_resources: str | None, shared_repo: str | None, separately: bool) -> Any:
    """The :class:`~tritonkit.perf.cluster.ClusterSettings` the options say."""
    from tritonkit.perf.cluster import ClusterSettings, parse_node_resources

    return ClusterSettings(address=cluster, separately=separately, shared_repo=shared_repo,
                           node_resources=parse_node_resources(node_resources) if node_resources else None)


def _kv(kind: str, **fields: object) -> None:
    click.echo(" ".join([kind] + [f"{k}={shlex.quote(str(v))}" for k, v in fields.items() if v is not None]))


class ClusterPrinter:
    """Progress of a cluster run: a line per event on a terminal (stderr), ``key=value`` when piped."""

    #: Remote sweep events worth a line on a terminal (the rest are notes of the library's own).
    SHOWN = ("node", "lost", "done", "written", "server", "measured", "failed", "load_failed", "resumed", "warning")

    def __init__(self, *, as_json: bool, quiet: bool) -> None:
        self.as_json = as_json
        self.tty = sys.stderr.isatty() and not as_json and not quiet
        self.lines = not as_json and not sys.stdout.isatty()

    def event(self, event: Any) -> None:
        where = f" @ {event.node.address}" if event.node is not None else ""
        if self.tty and event.kind in self.SHOWN:
            message = event.message.split(": ", 1)[-1] if event.message.startswith(f"{event.model}: ") else event.message
            click.echo(f"[{event.model}{where}] {message}", err=True)
        elif self.lines and event.kind in ("node", "lost", "done", "written", "measured", "failed"):
            _kv("cluster_" + event.kind, model=event.model, node=event.node.node_id if event.node else None,
                variant=event.variant, message=event.message)


def run_cluster_sweep_command(repo: Path, models: tuple[str, ...], settings: Any, cluster: Any, *,
                              as_json: bool, quiet: bool) -> None:
    """``perf sweep … --cluster``: one call, then the summary; exits with the sweep's status."""
    from tritonkit.perf.cluster import run_cluster_sweep

    printer = ClusterPrinter(as_json=as_json, quiet=quiet)
    folder = settings.out_dir("-".join(models))
    try:
        with sigterm_as_interrupt():
            result = run_cluster_sweep(repo, list(models), settings, cluster, on_event=printer.event)
    except KeyboardInterrupt:
        click.echo(f"interrupted: every remote server and perf_analyzer was stopped; what came back is kept in "
                   f"{folder}", err=True)
        raise CommandExit(Exit.UNMEASURED) from None
    if as_json:
        echo_json(result.to_dict())
    elif printer.lines:
        _kv("cluster_result", exit_code=result.exit_code, models=",".join(result.models),
            failed=",".join(result.failed) or None, losses=len(result.losses()), wall_s=round(result.wall_s, 1),
            report=result.report_path)
    else:
        click.echo(result.headline())
        for line in result.losses():
            click.echo(f"node lost: {line}")
        note = result.hardware_note()
        if note:
            click.echo(f"note: {note}")
        for model, path in result.written.items():
            click.echo(f"written: {path} ({model})")
        click.echo(f"report: {result.report_path} ({result.wall_s:.1f} s)")
    for text in result.to_dict()["failed"].values():
        click.echo(f"error: {text}", err=True)
    raise CommandExit(result.exit_code)
