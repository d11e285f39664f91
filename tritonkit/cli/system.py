"""``tritonkit serve``, ``tritonkit doctor`` and ``tritonkit install``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from tritonkit._values import PORT, SECONDS
from tritonkit.cli._common import (
    HOST_PORT,
    CommandExit,
    UserPath,
    Words,
    check_model_name,
    dial_options,
    echo_json,
    local_server_options,
    number,
    sigterm_as_interrupt,
)
from tritonkit.errors import ServerError
from tritonkit.repository.lint import lint_for_server, load_failure_fix
from tritonkit.server import TritonServer
from tritonkit.triton_releases import CLIENT_SHM_FLAG

#: ``serve`` and ``doctor`` run the same server.
_local_server = local_server_options("tritonserver binary to run", "Backends the server loads")
_PORT = number(PORT)  # ASCII digits, 1 to 65535: "١٢" is no port


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
@click.option("--server-arg", "extra_args", type=Words(example="--allow-client-shm=true"), multiple=True,
              help="A tritonserver flag to pass as is, e.g. --server-arg=--allow-client-shm=true (repeat); a flag "
                   "the server's release does not have is refused first, naming the release that has it.")
@_local_server
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
            # backend_dir, startup_timeout_s), so they pass through as given.
            with TritonServer(repo, model_control="explicit" if explicit else "none", models=models,
                              exit_on_error=False, **server_options) as server:
                failures = server.load_failures()
                ready = [e.name for e in server.model_states() if e.ready]
                for failure in failures:
                    click.secho(f"error: model '{failure.model}' failed to load: {failure.reason}", fg="red", err=True)
                if failures:
                    # Linted for the release this server is, so the fix line never sends the user
                    # to a lint that passes.
                    failed = [failure.model for failure in failures]
                    report = lint_for_server(repo, server.install, server.version(), models=failed)
                    click.echo(f"  server log: {server.log_path}", err=True)
                    click.echo(f"  fix: {load_failure_fix(report, failed, repo, lint_command=server.lint_command())}", err=True)
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
                shm = server.client_shm_note()
                if shm:
                    click.echo(f"  note: {shm}; to allow it: --server-arg={CLIENT_SHM_FLAG}")
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
@click.option("--url", type=HOST_PORT, default=None,
              help="Report what a running tritonserver at this gRPC host:port has instead (version, extensions, "
                   "models and their states, backends in use, explicit model control); it changes nothing there.")
@_local_server
@dial_options
def doctor(as_json: bool, url: str | None, server_bin: Path | None, backend_dir: Path | None) -> None:
    """Check what this machine can do: server, backends, perf_analyzer, ONNX Runtime, GPU, TensorRT.

    Starts the server once to read its version and to ask a probe model which
    Python interpreter and site-packages python-backend models will see. Lists each
    backend with the version its files give (the onnxruntime backend's ONNX Runtime).
    Exit status 1 when a required piece is missing.

    With --url, nothing is started: the running server is asked for its metadata, its repository
    index and each ready model's served config, and whether it takes the load API (explicit model
    control, which `perf sweep --url` needs) is asked by unloading a name its repository does not hold.

    \b
    Example:
      tritonkit doctor --json
      tritonkit doctor --url 10.0.0.9:8001
    """
    if url is not None:
        _doctor_url(url, as_json, local=server_bin is not None or backend_dir is not None)
        return
    from tritonkit.provision.doctor import run_checks

    checks = run_checks(server_bin=str(server_bin) if server_bin else None,
                        backend_dir=str(backend_dir) if backend_dir else None)
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


def _doctor_url(url: str, as_json: bool, *, local: bool) -> None:
    """``doctor --url``: the running server's own facts (:func:`~tritonkit.server.facts.read_facts`)."""
    from tritonkit.server.remote import RemoteServer

    if local:
        raise click.UsageError("--server-bin and --backend-dir describe a server doctor starts; not with --url")
    with RemoteServer(url) as server:
        facts = server.facts()
    if as_json:
        echo_json(facts.to_dict())
        return
    for line in facts.lines():
        click.echo(line)


@click.command("install")
@click.argument("parts", nargs=-1, metavar="[PARTS]...", type=click.Choice(["server", "perf_analyzer"]))
@click.option("--wheel", type=UserPath(exists=True, dir_okay=False, path_type=Path), default=None,
              help="With 'server' alone: unpack a local nvidia_pytriton-0.7.0 wheel instead of downloading it.")
@click.option("--force", is_flag=True, help="Reinstall even when the same version is installed.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def install(parts: tuple[str, ...], wheel: Path | None, force: bool, quiet: bool) -> None:
    """Install what the default jobs run: the bundled tritonserver and the real perf_analyzer (both by default).

    Each goes into this environment's share/tritonkit/ folder, never into its packages: the server's
    files come out of the nvidia-pytriton wheel without its Python dependencies, so this environment keeps
    the numpy it has (1.x or 2.x). Idempotent: what is installed is checked and kept.

    \b
    Example:
      tritonkit install            # the server and perf_analyzer
      tritonkit install server
    """
    from tritonkit.provision.bundled import install_server
    from tritonkit.provision.perf_analyzer import install_perf_analyzer

    chosen = parts or ("server", "perf_analyzer")
    if wheel is not None and chosen != ("server",):
        raise click.UsageError("--wheel is the server's wheel: name 'server' alone (tritonkit install server --wheel "
                               "FILE); perf_analyzer's own wheel goes to 'tritonkit perf install --wheel FILE'")
    progress = None if quiet else (lambda message: click.echo(f"[install] {message}", err=True))
    if "server" in chosen:
        install_server(wheel=wheel, force=force, progress=progress)
    if "perf_analyzer" in chosen:
        install_perf_analyzer(force=force, progress=progress)


COMMANDS: list[click.Command] = [serve, doctor, install]
