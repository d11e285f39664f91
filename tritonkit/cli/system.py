"""``tritonkit serve`` and ``tritonkit doctor``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from tritonkit._values import SECONDS
from tritonkit.cli._common import (
    CommandExit,
    UserPath,
    Words,
    check_model_name,
    echo_json,
    number,
    server_bin_option,
    sigterm_as_interrupt,
)
from tritonkit.errors import ServerError
from tritonkit.server import TritonServer

#: ``serve`` and ``doctor`` run the same server.
_server_bin = server_bin_option("tritonserver binary to run")


_PORT = click.IntRange(1, 65535)


@click.command("serve")
@click.argument("repo", type=UserPath(exists=True, file_okay=False, path_type=Path))
@click.option("--grpc-port", type=_PORT, default=None, help="gRPC port (default: a free one).")
@click.option("--http-port", type=_PORT, default=None, help="HTTP port (default: a free one).")
@click.option("--metrics-port", type=_PORT, default=None, help="Prometheus metrics port (default: a free one).")
@click.option("--host", type=Words(example="127.0.0.1"), default="127.0.0.1", show_default=True, help="Address to bind; loopback unless you mean it.")
@click.option("--explicit", is_flag=True, help="Explicit model control: load models with --load-model or the API.")
@click.option("--load-model", "models", type=Words(check_model_name, example="resnet"), multiple=True, help="With --explicit: a model to load at start (repeat).")
@click.option(
    "--strict",
    is_flag=True,
    help="Stop with exit status 1 when any model fails to load (default: serve the models that load).",
)
@click.option("--startup-timeout-s", type=number(SECONDS), default=120.0, show_default=True)
@_server_bin
def serve(repo: Path, explicit: bool, models: tuple[str, ...], strict: bool, **server_options: Any) -> None:
    """Serve REPO on a real tritonserver in the foreground until Ctrl-C.

    Models that fail to load are reported one by one (the server's reason and its log); the
    others are served. Exit status 1 when nothing loaded, or with --strict when anything failed.

    \b
    Example:
      tritonkit serve model_repository --grpc-port 8001
    """
    with sigterm_as_interrupt():
        try:
            # The other options are named as TritonServer's keywords (ports, host, server_bin,
            # startup_timeout_s), so they pass through as given.
            with TritonServer(repo, model_control="explicit" if explicit else "none", models=models,
                              exit_on_error=False, **server_options) as server:
                failures = server.load_failures()
                ready = [e.name for e in server.model_states() if e.ready]
                for failure in failures:
                    click.secho(f"error: model '{failure.model}' failed to load: {failure.reason}", fg="red", err=True)
                if failures:
                    click.echo(f"  server log: {server.log_path}", err=True)
                    click.echo(
                        "  fix: `tritonkit repo lint REPO` explains most causes; to load models one by one, "
                        "run `tritonkit serve REPO --explicit --load-model NAME` (repeat --load-model)",
                        err=True,
                    )
                    if strict or not ready:
                        why = "--strict was given" if strict else "no model loaded"
                        click.echo(f"stopping: {why}.", err=True)
                        raise CommandExit(1)
                click.echo(f"tritonserver {server.version()} serving {repo} (pid {server.pid})")
                click.echo(f"  models   {', '.join(sorted(set(ready))) or '(none loaded)'}")
                click.echo(f"  gRPC     {server.grpc_url}")
                click.echo(f"  HTTP     http://{server.http_url}")
                click.echo(f"  metrics  {server.metrics_url}")
                click.echo(f"  log      {server.log_path}")
                click.echo("Press Ctrl-C to stop.")
                sys.stdout.flush()
                while server.is_running():
                    time.sleep(0.5)
                raise ServerError(
                    f"tritonserver exited on its own (log: {server.log_path})",
                    log_path=server.log_path,
                    hint="read the log's last lines for the reason",
                )
        except KeyboardInterrupt:
            click.echo("stopped.")


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@_server_bin
def doctor(as_json: bool, server_bin: Path | None) -> None:
    """Check what this machine can do: server, backends, perf_analyzer, ONNX Runtime, GPU, TensorRT.

    Starts the server once to read its version and to ask a probe model which
    Python interpreter and site-packages python-backend models will see.
    Exit status 1 when a required piece is missing.

    \b
    Example:
      tritonkit doctor --json
    """
    from tritonkit.provision.doctor import run_checks

    checks = run_checks(server_bin=str(server_bin) if server_bin else None)
    if as_json:
        echo_json([c.to_dict() for c in checks])
    else:
        for check in checks:
            mark = "ok " if check.ok else ("-- " if not check.required else "!! ")
            click.echo(f"{mark} {check.name:<30} {check.detail}")
            if not check.ok and check.fix:
                click.echo(f"    {'':<30} fix: {check.fix}")
    if any(not c.ok and c.required for c in checks):
        raise CommandExit(1)


COMMANDS: list[click.Command] = [serve, doctor]
