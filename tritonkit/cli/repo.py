"""``tritonkit repo init|add|show|lint|diff``: model repositories from the command line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import click

from tritonkit._values import COUNT, DIM, PROTO_INT32, VERSION, check_http_url, excerpt
from tritonkit.cli._common import (
    HOST_PORT,
    CommandExit,
    UserPath,
    Words,
    backend_dir_option,
    check_model_name,
    dial_options,
    echo_json,
    number,
    server_bin_option,
)
from tritonkit.cli.ci import ci_report
from tritonkit.errors import ConfigError
from tritonkit.repository import (
    CONFIG_FILENAME,
    DynamicBatching,
    InstanceGroup,
    ModelRepository,
    ModelSpec,
    TensorSpec,
    diff_configs,
    diff_repositories,
    flatten_config,
    model_folder,
    read_config,
    render_config,
)
from tritonkit.repository.layout import PLATFORM_BACKENDS
from tritonkit.repository.lint import RULES, LintReport, Severity, Target, lint_repository, resolve_target
from tritonkit.repository.summary import summarize_repository
from tritonkit.triton_releases import NEWEST_LINE, known_lines_text

#: Exit statuses of ``repo lint`` (and ``repo diff``): clean, problems found, usage error, and for
#: ``repo lint`` a rule that failed (the linter's own error: the repository was not fully checked).
EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

def _check_target(text: str, where: str) -> None:
    Target.parse(text)  # cpu, gpu or gpu:N, refused with the forms otherwise


format_option = click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="Output for people (text) or machines (json).",
)


@click.group("repo")
def repo() -> None:
    """Create, inspect, lint and compare Triton model repositories.

    \b
    Example:
      tritonkit repo init model_repository
      tritonkit repo lint model_repository --target cpu
    """


@repo.command("init")
@click.argument("path", type=UserPath(path_type=Path))
def init(path: Path) -> None:
    """Create an empty model repository folder at PATH.

    \b
    Example:
      tritonkit repo init model_repository
    """
    repository = ModelRepository.init(path)
    click.echo(f"repository ready: {repository.root}")


def _parse_tensor(text: str, *, what: str) -> TensorSpec:
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise ConfigError(f"--{what} {excerpt(text)}: expected NAME:DTYPE:DIMS", hint=f"e.g. --{what} INPUT0:FP32:3,224,224")
    name, dtype, dims_text = parts
    dims = [int(DIM.parse(d, f"--{what} {name} dims")) for d in dims_text.split(",") if d.strip()]
    return TensorSpec(name=name, dtype=dtype, dims=dims)


@repo.command("add")
@click.argument("path", type=UserPath(file_okay=False, path_type=Path))
@click.option("--name", type=Words(check_model_name, example="add_one"), required=True, help="Model name (also its folder).")
@click.option("--backend", type=Words(example="python"), default="", help='Backend, e.g. "python", "onnxruntime".')
@click.option("--platform", type=click.Choice(["ensemble", *PLATFORM_BACKENDS]), default=None, help='Platform, e.g. "ensemble", "onnxruntime_onnx".')
@click.option("--max-batch-size", type=number(PROTO_INT32), default=0, show_default=True, help="0: the model does not batch.")
@click.option("--input", "inputs", type=Words(example="INPUT0:FP32:4"), multiple=True, help="NAME:DTYPE:DIMS, e.g. INPUT0:FP32:4 (repeat).")
@click.option("--output", "outputs", type=Words(example="OUTPUT0:FP32:4"), multiple=True, help="NAME:DTYPE:DIMS (repeat).")
@click.option("--window", type=Words(example="5ms"), default=None, help='Dynamic-batching window with units, e.g. "5ms" (default 5ms).')
@click.option("--no-dynamic-batching", is_flag=True, help="Leave the dynamic batcher off.")
@click.option("--instances", type=number(COUNT), default=None, help="Instance count (with --kind).")
@click.option("--kind", type=click.Choice(["cpu", "gpu", "auto", "model"]), default="cpu", show_default=True)
@click.option("--file", "files", multiple=True, type=UserPath(exists=True, path_type=Path),
              help="A model file or folder to copy into the version folder (repeat).")
@click.option("--version", type=number(VERSION), default=1, show_default=True)
@click.option("--force", is_flag=True, help="Replace an existing model's config and files.")
def add(path: Path, name: str, backend: str, platform: str | None, max_batch_size: int, inputs: tuple[str, ...],
        outputs: tuple[str, ...], window: str | None, no_dynamic_batching: bool, instances: int | None,
        kind: str, files: tuple[Path, ...], version: int, force: bool) -> None:
    """Add a model to the repository at PATH: config.pbtxt plus its version folder.

    \b
    Example:
      tritonkit repo add model_repository --name add_one --backend python \\
        --max-batch-size 8 --input INPUT0:FP32:4 --output OUTPUT0:FP32:4 \\
        --window 5ms --instances 2 --file model.py
    """
    dynamic: DynamicBatching | None | Literal["auto"]
    if no_dynamic_batching:
        dynamic = None
    elif window is not None:
        dynamic = DynamicBatching(window=window)
    else:
        dynamic = "auto"
    spec = ModelSpec(
        name=name, backend=backend, platform=platform or "", max_batch_size=max_batch_size,
        inputs=[_parse_tensor(t, what="input") for t in inputs],
        outputs=[_parse_tensor(t, what="output") for t in outputs],
        dynamic_batching=dynamic,
        instance_groups=[InstanceGroup(count=instances, kind=kind)] if instances is not None else (),  # type: ignore[arg-type]  # click.Choice guarantees the literal
    )
    model_folder(path, name)  # before anything is created: a name must not lead out of the repository
    repository = ModelRepository.init(path)
    entry = repository.add_model(spec, files={f.name: f for f in files}, version=version, overwrite=force)
    click.echo(f"wrote {entry.config_path} and {entry.version_path(version)}/")


def _is_model(path: Path) -> bool:
    """A config file or a model folder: one with a ``config.pbtxt`` of any kind, so that a broken
    one (a folder, a symlink loop) is read and named, not taken for a repository of no models."""
    return path.is_file() or os.path.lexists(path / CONFIG_FILENAME)


@repo.command("show")
@click.argument("path", type=UserPath(exists=True, path_type=Path))
@format_option
def show(path: Path, fmt: str) -> None:
    """Show a repository (one line per model) or one model's config (PATH is a model folder or config).

    \b
    Example:
      tritonkit repo show model_repository
      tritonkit repo show model_repository/resnet --format json
    """
    if _is_model(path):
        cfg = read_config(path)
        if fmt == "json":
            echo_json({"config_path": str(path if path.is_file() else path / CONFIG_FILENAME),
                       "fields": flatten_config(cfg)})
        else:
            click.echo(render_config(cfg), nl=False)
        return
    summaries = summarize_repository(path)
    if fmt == "json":
        echo_json({"repository": str(path), "models": [m.to_dict() for m in summaries]})
    elif not summaries:
        click.echo(f"{path}: no models")
    else:
        for summary in summaries:
            click.echo(summary.to_line())
    broken = [s.name for s in summaries if s.error is not None]
    if broken:  # listed with their errors above; the status says the repository is not usable as it is
        raise ConfigError(f"{path}: {len(broken)} model(s) whose config cannot be read: {', '.join(map(excerpt, broken))}",
                          hint=f"see each one's error above; tritonkit repo lint {path} says what to fix")


def _print_report(report: LintReport, fmt: str, min_severity: Severity) -> None:
    shown = [f for f in report.findings if f.severity.rank <= min_severity.rank]
    if fmt == "json":
        data = report.to_dict()
        data["findings"] = [f.to_dict() for f in shown]
        echo_json(data)
        return
    for finding in shown:
        color = {"error": "red", "warning": "yellow", "info": None}[finding.severity.value]
        head, _, rest = str(finding).partition("\n")
        click.secho(head, fg=color)
        if rest:
            click.echo(rest)
    hidden = len(report.findings) - len(shown)
    suffix = f"; {hidden} below --min-severity {min_severity.value} not shown" if hidden else ""
    click.echo(report.summary() + suffix)
    if report.target.notes:
        for note in report.target.notes:
            click.echo(f"target: {note}")


@repo.command("lint")
@click.argument("path", type=UserPath(path_type=Path), required=False)
@click.option("--target", type=Words(_check_target, example="cpu"), default=None,
              help="Hardware the repository is for: cpu, gpu or gpu:N (enables GPU rules).")
@click.option("--server", type=HOST_PORT, default=None, help="gRPC address of a running server (host:port) to read its backends.")
@click.option("--metrics-url", type=Words(check_http_url, example="http://127.0.0.1:8002/metrics"), default=None, help="With --server: its /metrics URL, to count its GPUs.")
@server_bin_option("A local tritonserver binary: lint against the backends installed next to it", falls_back=False)
@click.option("--bundled", is_flag=True, help="Lint against the bundled tritonserver's backends (python only).")
@click.option("--server-version", type=Words(example="2.60"), default=None,
              help="Triton release to check for: X.Y, X.Y.Z or an NGC tag YY.MM. Known: "
                   f"{known_lines_text()}. [default: the version --server reports, else that of the "
                   f"--bundled/--server-bin install, else {NEWEST_LINE}]")
@backend_dir_option("Lint against these backends (with the bundled server, or --server-bin's)")
@click.option("--rule", "rules", type=Words(example="TK101"), multiple=True, help="Run only this rule id (repeat).")
@click.option("--ignore", "ignored", type=Words(example="TK109"), multiple=True, help="Skip this rule id (repeat).")
@click.option("--min-severity", type=click.Choice(["error", "warning", "info"]), default="info", show_default=True,
              help="Hide findings below this severity.")
@click.option("--list-rules", is_flag=True, help="Print every rule id, severity and title, then exit.")
@format_option
@dial_options
def lint(path: Path | None, target: str | None, server: str | None, metrics_url: str | None,
         server_bin: Path | None, bundled: bool, server_version: str | None, backend_dir: Path | None, rules: tuple[str, ...],
         ignored: tuple[str, ...], min_severity: str, list_rules: bool, fmt: str) -> None:
    """Lint every model in the repository at PATH; exit 0 clean, 1 errors found, 2 usage error,
    3 a rule failed (a linter bug, reported as an internal-error finding; the other rules still ran).

    \b
    Example:
      tritonkit repo lint model_repository --target cpu
      tritonkit repo lint model_repository --server 127.0.0.1:8001 --format json
      tritonkit repo lint model_repository --bundled
      tritonkit repo lint model_repository --server-version 2.60
      tritonkit repo lint model_repository --backend-dir /opt/tritonserver/backends
    """
    if list_rules:
        if fmt == "json":
            echo_json([r.to_dict() for r in RULES.values()])
        else:
            for r in RULES.values():
                since = f" (Triton {r.releases})" if r.releases else ""
                click.echo(f"{r.id}  {r.severity.value:<7}  {r.family:<11}  {r.title}{since}")
        return
    if path is None:
        raise click.UsageError("missing argument PATH (the repository folder)")
    if not path.is_dir():
        raise click.UsageError(f"{path} is not a folder")
    chosen = resolve_target(target, server=server, metrics_url=metrics_url, server_bin=server_bin,
                            bundled=bundled, server_version=server_version, backend_dir=backend_dir)
    report = lint_repository(path, target=chosen, rules=rules or None, ignore=ignored)
    _print_report(report, fmt, Severity(min_severity))
    ci_report(report)
    raise CommandExit(EXIT_INTERNAL if report.internal_errors else EXIT_CLEAN if report.ok else EXIT_FINDINGS)


@repo.command("diff")
@click.argument("old", type=UserPath(exists=True, path_type=Path))
@click.argument("new", type=UserPath(exists=True, path_type=Path))
@format_option
def diff(old: Path, new: Path, fmt: str) -> None:
    """Compare two repositories, two model folders or two config files field by field.

    Exit 0 when they match, 1 when they differ.

    \b
    Example:
      tritonkit repo diff model_repository other_repository
      tritonkit repo diff old/resnet/config.pbtxt new/resnet/config.pbtxt
    """
    if _is_model(old) != _is_model(new):
        raise click.UsageError("compare like with like: two repositories, or two models/configs")
    if _is_model(old):
        changes = diff_configs(read_config(old), read_config(new))
        if fmt == "json":
            echo_json({"old": str(old), "new": str(new), "changes": [c.to_dict() for c in changes]})
        else:
            for change in changes:
                click.echo(str(change))
            click.echo(f"{len(changes)} field(s) differ")
        raise CommandExit(EXIT_FINDINGS if changes else EXIT_CLEAN)
    models = diff_repositories(old, new)
    differing = [m for m in models if m.status != "same"]
    if fmt == "json":
        echo_json({"old": str(old), "new": str(new), "models": [m.to_dict() for m in models]})
    else:
        for m in differing:
            click.echo(f"{m.model}: {m.status}")
            for change in m.changes:
                click.echo(f"  {change}")
        click.echo(f"{len(differing)} of {len(models)} model(s) differ")
    raise CommandExit(EXIT_FINDINGS if differing else EXIT_CLEAN)


COMMANDS: list[click.Command] = [repo]
