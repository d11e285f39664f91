"""Run every rule over a repository, and work out the target from a server."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tritonkit._fs import user_path_errors
from tritonkit.errors import ConfigError, ConnectError, ServerError
from tritonkit.repository.lint.core import RULES, LintContext, LintReport, ModelInfo, Severity, Target
from tritonkit.triton_releases import resolve_release

__all__ = ["lint_for_server", "lint_repository", "load_failure_fix", "resolve_target", "target_from_install",
           "target_from_server"]


def lint_repository(
    root: Path | str,
    *,
    target: Target | str | None = None,
    rules: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    models: Iterable[str] | None = None,
    server_version: str | None = None,
) -> LintReport:
    """Lint every model folder under ``root``; rules see the whole repository and the target.

    ``target`` is a :class:`Target`, ``"cpu"``/``"gpu"``/``"gpu:N"``, or ``None`` (hardware
    and backends unknown: no target rule fires). ``rules``/``ignore`` select rule ids;
    ``models`` limits which models are reported on (all are still read, because
    ensemble rules look across models). ``server_version`` (``"2.51"``, ``"24.10"``…) is the
    Triton release to check for, replacing the target's (default: the newest line tritonkit
    knows); one it does not know is a :class:`ConfigError` listing the known lines.
    """
    # Importing the rule families registers them (kept here to avoid an import cycle).
    from tritonkit.repository.lint import rules as _rules  # noqa: F401

    started = time.perf_counter()
    repo = Path(root)
    if not repo.is_dir():
        raise ConfigError(f"{repo}: not a folder", hint="give the path of a model repository folder")
    tgt = Target.parse(target) if isinstance(target, str) else (target or Target())
    if server_version is not None:
        tgt = tgt.with_release(resolve_release(server_version))
    with user_path_errors("list the repository", repo):
        folders = sorted(p for p in repo.iterdir() if p.is_dir() and not p.name.startswith("."))
    infos = {p.name: ModelInfo(repo, p) for p in folders}
    ctx = LintContext(root=repo, models=infos, target=tgt)

    selected = [RULES[r] for r in RULES if (rules is None or r in set(rules)) and r not in set(ignore)]
    unknown = {*(rules or ()), *ignore} - set(RULES)
    if unknown:
        raise ConfigError(f"unknown lint rule id(s): {', '.join(sorted(unknown))}",
                          hint="see `tritonkit repo lint --list-rules`")
    wanted = set(models) if models is not None else None
    for info in infos.values():
        if wanted is not None and info.name not in wanted:
            continue
        for r in selected:
            if r.needs_config and info.config is None:
                continue
            if r.needs_field is not None and info.config is not None and not info.config.HasField(r.needs_field):
                continue
            ctx._current_rule = r
            try:
                r.check(ctx, info)
            except ConfigError as exc:
                # The config holds what the rule cannot read (a value no writer would write): that is
                # a finding about the config, under the rule that met it.
                ctx.report(info, exc.message, hint=exc.hint or "", severity=Severity.ERROR)
            except Exception as exc:  # noqa: BLE001 - one broken rule must not hide every other finding
                ctx.rule_failed(info, r, exc)
    ctx._current_rule = None
    findings = sorted(ctx.findings, key=lambda f: (f.model, f.line or 0, f.severity.rank, f.rule_id, f.field))
    return LintReport(root=repo, target=tgt, findings=tuple(findings),
                      models_checked=len(infos) if wanted is None else len(wanted & set(infos)),
                      rules_run=len(selected), elapsed_s=time.perf_counter() - started)


def target_from_install(install: Any, *, kind: str = "cpu", gpu_count: int | None = None) -> Target:
    """The target for a local server install (``tritonkit.server.ServerInstall``).

    Its backend folder lists every backend that server can load, so the set is complete; its
    release is the install's version when that is known before starting it (the bundled 2.51,
    an install's ``TRITON_VERSION`` file), else the newest line. The
    onnxruntime backend's ONNX Runtime version is read from the backend's library.
    """
    base = Target.parse(kind) if gpu_count is None else Target(kind="gpu" if gpu_count else "cpu",
                                                               gpu_count=gpu_count)
    backends = set(install.backends())
    target = base.with_backends(backends, complete=True, source=f"local install {install.binary}")
    # Where the server will look for each backend (the runtime rules read files there, never run them):
    # the bundled server's folder is assembled only when it starts, from the user's backends and its python.
    assembly = getattr(install, "assembly", None)
    if assembly is not None:
        target = target.with_backend_folders({"python": assembly.python_backend}, assembly.user_backends)
    else:
        target = target.with_backend_folders({}, install.backend_dir)
    if install.version is not None:
        target = target.with_release(resolve_release(reported=install.version, reported_by=f"the install ({install.source})"))
    onnxruntime = install.backend("onnxruntime") if "onnxruntime" in backends else None
    if onnxruntime is not None and onnxruntime.runtime_version:
        target = target.with_onnxruntime(onnxruntime.runtime_version, f"{onnxruntime.path}: {onnxruntime.how}")
    elif onnxruntime is not None:  # its models' IR and opsets go unchecked (TK702): say why
        target = replace(target, notes=(*target.notes, f"onnxruntime backend's ONNX Runtime unknown: {onnxruntime.how}"))
    return target


def target_from_server(url: str, *, metrics_url: str | None = None, timeout_s: float = 5.0) -> Target:
    """Read what a running server exposes about itself.

    tritonserver has no API that lists its backends or GPUs, so this reads what it can:

    - backends: the ``backend`` of every READY model's config (a lower bound: a
      backend nobody uses yet is invisible), so only "missing" findings for backends
      that are *known* absent could be exact — they are reported as warnings;
    - GPUs: the ``gpu_uuid`` labels on the per-GPU metrics when ``metrics_url`` is given
      (exact); otherwise a READY model with a KIND_GPU instance proves at least one GPU.
    """
    from tritonkit.errors import ModelNotReadyError
    from tritonkit.server.admin import ServerAdmin

    notes: list[str] = []
    backends: set[str] = set()
    any_gpu_instance = False
    with contextlib.closing(ServerAdmin(url, protocol="grpc", timeout_s=timeout_s)) as admin:
        if not admin.is_live():
            raise ConnectError(f"cannot read server at {url}: nothing answered, or the server there is not live",
                               hint="check the gRPC address (host:port) and that the server is running")
        reported = str(admin.server_metadata().get("version") or "") or None
        for state in admin.index():
            if not state.ready:
                continue
            try:
                cfg = admin.model_config(state.name)
            except ModelNotReadyError:
                continue  # unloaded since the index was read
            if cfg.backend:
                backends.add(cfg.backend)
            if cfg.platform == "ensemble":
                backends.add("ensemble")
            any_gpu_instance |= any(g.kind == g.KIND_GPU for g in cfg.instance_group)
    notes.append("backends: only those used by READY models (tritonserver has no API listing backends)")
    gpu_count: int | None = None
    if metrics_url:
        gpu_count = _gpus_from_metrics(metrics_url, timeout_s)
        notes.append(f"GPUs: counted from {metrics_url}")
    elif any_gpu_instance:
        notes.append("GPUs: at least one (a READY model runs KIND_GPU instances); pass --metrics-url for a count")
    else:
        notes.append("GPUs: unknown (pass --metrics-url or --target)")
    kind: Any = "gpu" if (gpu_count or any_gpu_instance) else ("cpu" if gpu_count == 0 else "unknown")
    target = Target(kind=kind, gpu_count=gpu_count, backends=frozenset(backends), backends_complete=False,
                    source=f"server {url}", notes=tuple(notes))
    if reported is not None:
        target = target.with_release(resolve_release(reported=reported, reported_by=f"the server at {url}"))
    return target


def resolve_target(
    target: str | None = None,
    *,
    server: str | None = None,
    metrics_url: str | None = None,
    server_bin: Path | str | None = None,
    bundled: bool = False,
    server_version: str | None = None,
    backend_dir: Path | str | None = None,
) -> Target:
    """The target ``tritonkit repo lint`` options describe.

    ``bundled`` (the tritonserver shipped with nvidia-pytriton), ``server_bin`` (a local
    tritonserver binary) or ``backend_dir`` (a backends folder, for that server or the bundled
    one) give the complete backend list of that install, for the hardware
    ``target`` states (``cpu`` when none). Otherwise ``server`` (a running server's gRPC address)
    is read for its backends and GPUs, and a stated ``target`` overrides the hardware it saw,
    because a stated fact beats what a server lets us see. Otherwise ``target`` alone, or
    nothing (hardware and backends unknown).

    The release: ``server_version`` when given, else the version the server (or the install)
    reports, else the newest line tritonkit knows.
    """
    # An unknown --server-version is refused before anything is started or asked.
    stated_release = resolve_release(server_version) if server_version is not None else None
    if bundled or server_bin is not None or backend_dir is not None:
        from tritonkit.server import locate_server

        install = locate_server(Path(server_bin) if server_bin is not None else None, backend_dir=backend_dir)
        resolved = target_from_install(install, kind=target or "cpu")
    elif server:
        resolved = target_from_server(server, metrics_url=metrics_url)
        if target:
            stated = Target.parse(target)
            resolved = replace(resolved, kind=stated.kind, gpu_count=stated.gpu_count, backends_complete=False)
    else:
        resolved = Target.parse(target) if target else Target()
    return resolved.with_release(stated_release) if stated_release is not None else resolved


def lint_for_server(root: Path | str, install: Any, version: str | None, *, kind: str = "cpu",
                    models: Iterable[str] | None = None) -> LintReport:
    """Lint ``root`` for the server ``install`` that reports ``version`` (what ``serve`` started)."""
    target = target_from_install(install, kind=kind)
    # A version older than the lines tritonkit knows keeps the install's release (or the newest).
    if version:
        with contextlib.suppress(ConfigError):
            target = target.with_release(resolve_release(reported=version, reported_by="the running server"))
    return lint_repository(root, target=target, models=models)


def load_failure_fix(report: LintReport, failed: Iterable[str], repo: Path | str, *,
                     lint_command: str | None = None) -> str:
    """The fix line for models a server failed to load, given the lint ``report`` for that server.

    It sends the user to ``repo lint`` only when lint names an error in one of those models
    (with the release that server is, and ``lint_command`` — the server's own install and
    backends, see :meth:`TritonServer.lint_command` — so the command finds what was found here);
    otherwise the server's own reason is all there is, and the line says so.
    """
    names = set(failed)
    found = [f for f in report.errors if f.model in names]
    if found:
        version = report.target.release
        command = lint_command or f"tritonkit repo lint {repo}"
        return (f"`{command} --server-version {version}` explains {len(found)} error(s) in "
                f"{', '.join(sorted({f.model for f in found}))}; to load models one by one, run "
                f"`tritonkit serve {repo} --explicit --load-model NAME`")
    return ("lint finds nothing in these configs for this server's release: the server's reason above (and its "
            f"log) is the cause; to load models one by one, run `tritonkit serve {repo} --explicit --load-model NAME`")


def _gpus_from_metrics(metrics_url: str, timeout_s: float) -> int:
    from tritonkit.perf.measure.metrics import scrape_metrics, server_gpus

    try:
        return len(server_gpus(scrape_metrics(metrics_url, timeout_s=timeout_s)))
    except (OSError, ServerError) as exc:  # unreachable, or what answers is no Prometheus text
        raise ConnectError(f"cannot read metrics at {metrics_url}: {exc}",
                           hint="give the metrics URL, e.g. http://127.0.0.1:8002/metrics") from exc

