"""``perf sweep MODEL [MODEL...] --url HOST:PORT``: the options and the command path of a sweep by URL
(several models: the joint sweep, :func:`~tritonkit.perf.sweep.remote_joint.run_remote_joint_sweep`).

``tritonkit.cli.sweep`` declares the command; this module adds the options only a sweep of a
running server takes (``--url``, ``--metrics-url``, ``--repo``, ``--apply``, ``--restore``,
``--exclusive``, ``--restore-wait-s``), splits the positional names into REPO and models, and runs
:func:`~tritonkit.perf.sweep.remote.run_remote_sweep` (or only the restore).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tritonkit.cli._common import HOST_PORT, CommandExit, UserPath, Words, check_model_name, echo_json
from tritonkit.perf.sweep import Exit, JointResult, SweepEvent, SweepResult, SweepSettings

__all__ = ["remote_sweep_options", "run_remote_command", "split_names"]

_Command = TypeVar("_Command", bound=Callable[..., Any])

#: The options that only make sense with ``--url``.
_URL_ONLY = ("metrics_url", "local_repo", "apply", "restore", "exclusive", "clients")


def remote_sweep_options(command: _Command) -> _Command:
    """``--url``, ``--metrics-url``, ``--repo``, ``--apply``, ``--restore``, ``--exclusive``, ``--restore-wait-s``."""
    for option in reversed([
        click.option("--url", type=HOST_PORT, default=None,
                     help="Sweep MODEL (several: together) on a running tritonserver at this gRPC host:port instead "
                          "of a REPO served by a server the sweep starts; it must run with "
                          "--model-control-mode=explicit. Each served config is the default, put back when the sweep "
                          "ends."),
        click.option("--metrics-url", type=Words(example="http://10.0.0.9:8002/metrics"), default=None,
                     help="With --url: the server's metrics page (default: the same host, port 8002)."),
        click.option("--repo", "local_repo", type=UserPath(exists=True, file_okay=False, path_type=Path), default=None,
                     help="With --url: a local copy of the model's repository, for input data derived from its "
                          "model file (the server's own repository is never read or written)."),
        click.option("--apply", is_flag=True,
                     help="With --url: leave the winner loaded on the server (said; --restore puts the old config back)."),
        click.option("--restore", is_flag=True,
                     help="With --url and --out: only load back the served config a sweep journaled in that folder."),
        click.option("--exclusive", is_flag=True,
                     help="With --url: refuse to measure while other clients send the model requests (the server's "
                          "own counters tell); without it, steps that included them are named in the report."),
        click.option("--clients", type=click.IntRange(1, 64), default=None, metavar="N",
                     help="With --url and --cluster: every step's load from N perf_analyzer clients on N nodes of the "
                          "cluster at once, where one client cannot saturate the server (default 2)."),
        click.option("--restore-wait-s", type=click.FloatRange(0, 3600), default=60.0, show_default=True,
                     help="With --url: how long to wait for a server that stopped answering (restarting) before "
                          "giving up putting the model back (the journal then stays)."),
    ]):
        command = option(command)
    return command


def split_names(names: tuple[str, ...], remote: dict[str, Any], *, sla_text: str | None,
                out_dir: Path | None) -> tuple[Path | None, tuple[str, ...]]:
    """``[REPO] MODEL [MODEL...]`` as (REPO, models): no REPO with ``--url``; each name checked;
    ``--sla`` is required except by ``--restore``, which needs ``--out``."""
    if sla_text is None and not remote.get("restore"):
        raise click.UsageError("Missing option '--sla'")
    if remote.get("restore") and out_dir is None:
        raise click.UsageError("--restore needs --out DIR: the folder of the sweep whose journal to put back")
    url = remote.get("url")
    if url is None:
        used = [f"--{name.replace('_', '-').replace('local-repo', 'repo')}" for name in _URL_ONLY if remote.get(name)]
        if used:
            raise click.UsageError(f"{', '.join(used)} only go with --url HOST:PORT")
        if len(names) < 2:
            raise click.UsageError("Missing argument 'REPO MODEL [MODEL...]' (or give MODEL with --url HOST:PORT)")
        repo = UserPath(exists=True, file_okay=False, path_type=Path).convert(names[0], None, None)
        models = names[1:]
    else:
        repo, models = None, names
        if not models and not remote.get("restore"):
            raise click.UsageError("Missing argument 'MODEL' (with --url, give the models to sweep, no REPO)")
    for name in models:
        check_model_name(name, "MODEL")
    return repo, models


def _cluster(remote: dict[str, Any]) -> Any:
    """``--cluster`` with ``--url``: where the load generators run (``None`` without it)."""
    from tritonkit.cli.perf_cluster import cluster_settings

    if remote.get("shared_repo") or remote.get("separately"):
        raise click.UsageError("--shared-repo and --separately are for sweeps of a REPO on a cluster, not with --url")
    if remote.get("cluster") is None:
        if remote.get("clients") or remote.get("node_resources"):
            raise click.UsageError("--clients and --node-resources with --url need --cluster ADDR")
        return None
    return cluster_settings(remote["cluster"], remote.get("node_resources"), None, False)


def _print_remote(result: SweepResult, printer: Any) -> None:
    printer.result(result)
    remote = result.remote or {}
    if printer.as_json:
        return
    if printer.lines:
        fields = {k: remote.get(k) for k in ("url", "applied", "journal", "journal_status", "winner_config",
                                            "restore_command")}
        click.echo(" ".join(["sweep_remote"] + [f"{k}={shlex.quote(str(v))}" for k, v in fields.items()
                                                 if v is not None]))
        return
    if remote.get("winner_config"):
        click.echo(f"winner's config: {remote['winner_config']} (nothing was written on the server)")
    if remote.get("applied"):
        click.echo(f"applied: the winner stays loaded on {remote['url']}; put the old config back with: "
                   f"{remote['restore_command']}")
    else:
        click.echo(f"restored: the served config is loaded again on {remote['url']} (journal {remote['journal']})")


def _print_remote_joint(result: JointResult, as_json: bool) -> None:
    """A joint sweep by URL's result (``--json``: joint.json's document), then its exit."""
    if as_json:
        echo_json(result.to_dict())
        raise CommandExit(result.exit_code)
    from tritonkit.perf.sweep.report import remote_lines

    click.echo(result.headline())
    for line in remote_lines(None, result.remote):  # what was left on the server, as joint.md says it
        click.echo(line.removeprefix("- ").replace("`", ""))
    click.echo(f"report: {result.report_path}; {len(result.tried)} joint configurations, {result.wall_s:.1f} s")
    raise CommandExit(result.exit_code)


def run_remote_command(models: tuple[str, ...], settings: SweepSettings, remote: dict[str, Any], *,
                       printer: Any, joint: bool) -> None:
    """Run the sweep by URL (or only ``--restore``) and exit as the sweep says."""
    from tritonkit.perf.sweep.remote import RemoteOptions, restore_only, run_remote_sweep
    from tritonkit.perf.sweep.remote_joint import run_remote_joint_sweep
    from tritonkit.server.remote import RemoteServer

    if joint and remote.get("cluster") is not None:
        raise click.UsageError("--cluster with --url spreads the load of one MODEL: sweep one model at a time with "
                               "--cluster, or drop --cluster to sweep several together")
    if remote.get("server_bin") or remote.get("backend_dir"):
        raise click.UsageError("--server-bin and --backend-dir describe a server the sweep starts; with --url the "
                               "running server's own are measured")
    say = lambda text: printer.event(SweepEvent("note", text))  # noqa: E731
    with RemoteServer(remote["url"], metrics_url=remote.get("metrics_url")) as server:
        if remote.get("restore"):
            assert settings.out is not None  # the command refuses --restore without --out
            journal = restore_only(server, Path(settings.out), say)
            if printer.as_json:
                echo_json(journal.to_dict())
            else:
                click.echo(f"{journal.path}: {journal.status} ({journal.note})")
            raise CommandExit(0)
        folder = Path(settings.out) if settings.out is not None else None
        options = RemoteOptions(repo=remote.get("local_repo"), apply=bool(remote.get("apply")),
                                restore_wait_s=float(remote.get("restore_wait_s", 60.0)),
                                exclusive=bool(remote.get("exclusive")), cluster=_cluster(remote),
                                clients=int(remote.get("clients") or 2))
        try:
            if joint:
                _print_remote_joint(run_remote_joint_sweep(server, models, settings, options, on_event=printer.event),
                                    printer.as_json)
            result = run_remote_sweep(server, models[0], settings, options, on_event=printer.event)
        except KeyboardInterrupt:
            where = shlex.quote(str(folder)) if folder is not None else "DIR"
            click.echo(f"interrupted: the served config was put back unless said otherwise above; finished "
                       f"variants are kept in {where}; run the same command with --out {where} to resume", err=True)
            raise CommandExit(Exit.UNMEASURED) from None
    _print_remote(result, printer)
    raise CommandExit(result.exit_code)

