"""Start and stop a real tritonserver, in its own process group, never orphaned."""

from __future__ import annotations

import atexit
import contextlib
import http.client
import itertools
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._context import ContextManaged
from tritonkit._dial import PLAIN
from tritonkit.errors import (
    ConfigError,
    ConnectError,
    DeadlineExceededError,
    ModelLoadError,
    ServerError,
    TritonKitError,
)
from tritonkit.provision.server import ServerInstall, locate_server, model_python_env
from tritonkit.repository.layout import backend_of, model_folder
from tritonkit.repository.pbtxt import CONFIG_FILENAME, read_config
from tritonkit.server.admin import ModelState, ServerAdmin
from tritonkit.server.children import spawn, stop_group
from tritonkit.server.log import LoadFailure, find_load_failures, log_tail
from tritonkit.server.ports import free_ports, port_is_free
from tritonkit.triton_releases import check_server_flags, client_shm_note, install_release

__all__ = ["ModelControl", "TritonServer", "server_argv"]

ModelControl = Literal["none", "explicit", "poll"]

_LIVE: weakref.WeakSet[TritonServer] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()
_LAUNCHES = itertools.count()
#: Where POSIX shared memory lives; the python backend keeps one region per model stub there.
SHM_DIR = Path("/dev/shm")
_SHM_OPTION = "python,shm-region-prefix-name="
#: The python backend's own default region prefix; ours extends it, so regions stay recognisable.
_SHM_DEFAULT_PREFIX = "triton_python_backend_shm_region_"



def _stop_all_live() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        server.stop()


# Last line of defence: an interpreter that exits normally (or on an uncaught
# exception) stops every server it started, even without a context manager.
atexit.register(_stop_all_live)


def server_argv(
    install: ServerInstall,
    repositories: Sequence[Path],
    *,
    host: str,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    model_control: ModelControl,
    models: Sequence[str] = (),
    exit_on_error: bool = True,
    log_verbose: int = 0,
    exit_timeout_s: int = 5,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The tritonserver command line, as a list (pure; no shell)."""
    argv = [str(install.binary)]
    argv += [f"--model-repository={repo}" for repo in repositories]
    argv += [
        f"--backend-directory={install.backend_dir}",
        f"--http-address={host}",
        f"--http-port={http_port}",
        f"--grpc-address={host}",
        f"--grpc-port={grpc_port}",
        "--allow-metrics=true",
        f"--metrics-address={host}",
        f"--metrics-port={metrics_port}",
        f"--model-control-mode={model_control}",
        f"--exit-on-error={'true' if exit_on_error else 'false'}",
        f"--exit-timeout-secs={exit_timeout_s}",
        f"--log-verbose={log_verbose}",
    ]
    if model_control == "explicit":
        argv += [f"--load-model={name}" for name in models]
    argv += list(extra_args)
    return argv


class TritonServer(ContextManaged):
    """A real tritonserver serving ``repository``, bound to loopback by default.

    Use as a context manager; ``stop()`` is idempotent. The server runs in its
    own session (process group): stopping sends SIGTERM to the group, waits
    ``stop_grace_s``, then SIGKILLs it, so python-backend stubs go too.

    Python-backend models run in the environment of the interpreter that
    starts the server (see ``install.model_python_env``). The bundled server's backends folder is
    assembled when it starts, under ``backends_cache`` (default ``~/.cache/tritonkit/backends``).
    """

    def __init__(
        self,
        repository: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        model_control: ModelControl = "none",
        models: Sequence[str] | None = None,
        grpc_port: int | None = None,
        http_port: int | None = None,
        metrics_port: int | None = None,
        host: str = "127.0.0.1",
        server_bin: str | os.PathLike[str] | None = None,
        backend_dir: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = 60.0,
        stop_grace_s: float = 10.0,
        log_path: str | os.PathLike[str] | None = None,
        log_verbose: int = 0,
        exit_on_error: bool | None = None,
        extra_args: Sequence[str] = (),
        backends_cache: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(repository, (str, os.PathLike)):
            repos = [Path(repository)]
        else:
            repos = [Path(r) for r in repository]
        for repo in repos:
            if not repo.is_dir():
                raise ConfigError(
                    f"model repository {repo} is not a folder",
                    hint="pass the folder that holds one sub-folder per model",
                )
        for label, port in (("grpc_port", grpc_port), ("http_port", http_port), ("metrics_port", metrics_port)):
            if port is not None and not 1 <= port <= 65535:
                raise ConfigError(
                    f"{label} {port} is not a TCP port",
                    hint="give a port from 1 to 65535, or leave it unset to pick a free one",
                )
        given = [(label, port) for label, port in (("grpc_port", grpc_port), ("http_port", http_port),
                                                   ("metrics_port", metrics_port)) if port is not None]
        for index, (label, port) in enumerate(given):
            clash = next((other for other, taken in given[:index] if taken == port), None)
            if clash is not None:  # the server would start, then die on the second bind
                raise ConfigError(f"{clash} and {label} are both {port}: each endpoint needs its own port",
                                  hint="give them different ports, or leave one unset to pick a free one")
        if not (isinstance(startup_timeout_s, (int, float)) and math.isfinite(startup_timeout_s)
                and startup_timeout_s > 0):
            raise ConfigError(f"startup_timeout_s {startup_timeout_s!r} is not a positive number of seconds",
                              hint="give the seconds the server may take to be ready, e.g. 120")
        if model_control not in ("none", "explicit", "poll"):
            raise ConfigError(f"model_control must be none, explicit or poll, not {model_control!r}")
        self.repositories = [r.resolve() for r in repos]
        for name in models or []:
            self._check_name(name)
        self.model_control: ModelControl = model_control
        self.models = list(models or [])
        self.host = host
        self._fixed_ports = (http_port, grpc_port, metrics_port)
        self.http_port, self.grpc_port, self.metrics_port = 0, 0, 0
        self.install = locate_server(server_bin, backend_dir=Path(backend_dir) if backend_dir else None)
        self._named_backend_dir = Path(backend_dir) if backend_dir else None
        self._backends_cache = Path(backends_cache) if backends_cache is not None else None
        known = install_release(self.install.version)
        if known is not None:
            # A flag the release predates makes tritonserver exit at once: say which release has it.
            check_server_flags(extra_args, known, where=f"tritonserver {self.install.version} ({self.install.binary})")
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self._own_log_dir: Path | None = None
        self.log_path: Path = Path(log_path) if log_path else Path()
        self._log_path_given = log_path is not None
        self.log_verbose = log_verbose
        # In explicit mode a bad model must not kill the server: load_model reports it.
        self.exit_on_error = exit_on_error if exit_on_error is not None else model_control != "explicit"
        self.extra_args = list(extra_args)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: Any = None
        self._shm_prefix: str | None = None

    # ---- addresses -------------------------------------------------------
    @property
    def grpc_url(self) -> str:
        """``host:port`` of the gRPC endpoint, as tritonclient.grpc expects it."""
        return f"{self.host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        """``host:port`` of the HTTP endpoint, as tritonclient.http expects it."""
        return f"{self.host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        """Full URL of the Prometheus metrics page."""
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        """The tritonserver process id (also its process-group id), while running."""
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    # ---- lifecycle -------------------------------------------------------
    def _enter(self) -> None:
        self.start()

    def _exit(self) -> None:
        self.stop()

    def start(self) -> TritonServer:
        """Start the server and wait until it is ready; raise ``ServerError``/``ModelLoadError`` if not."""
        if self._proc is not None:
            raise ServerError("this TritonServer was already started", hint="create a new TritonServer")
        auto_ports = None in self._fixed_ports
        attempts = 3 if auto_ports else 1
        for attempt in range(attempts):
            self._choose_ports()
            try:
                self._launch()
                self._wait_ready()
                return self
            except ServerError as exc:
                port_clash = "address already in use" in log_tail(self.log_path, 50).lower()
                self.stop(_failed=True)
                if port_clash and attempt + 1 < attempts:
                    continue
                if port_clash:
                    raise ServerError(
                        f"tritonserver could not bind its ports {self._ports_text()}: address already in use",
                        log_path=self.log_path,
                        hint="stop what uses those ports, or leave the ports unset to pick free ones",
                    ) from exc
                raise
            except BaseException:
                # Ctrl-C or anything else while starting: never leave the child behind.
                self.stop(_failed=True)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _ports_text(self) -> str:
        return f"http {self.http_port}, grpc {self.grpc_port}, metrics {self.metrics_port}"

    def _choose_ports(self) -> None:
        for label, port in zip(("http", "grpc", "metrics"), self._fixed_ports, strict=True):
            if port is not None and not port_is_free(port, self.host):
                raise ServerError(
                    f"{label} port {port} on {self.host} is already in use by another process",
                    hint=f"stop what listens there (`ss -ltnp 'sport = :{port}'` shows it), pick another port, "
                    "or leave the port unset to pick a free one",
                )
        needed = sum(1 for p in self._fixed_ports if p is None)
        fresh = iter(free_ports(needed, self.host)) if needed else iter(())
        http_port, grpc_port, metrics_port = (p if p is not None else next(fresh) for p in self._fixed_ports)
        self.http_port, self.grpc_port, self.metrics_port = http_port, grpc_port, metrics_port

    def _launch(self) -> None:
        if not self._log_path_given:
            self._own_log_dir = Path(tempfile.mkdtemp(prefix="tritonkit-server-"))
            self.log_path = self._own_log_dir / "tritonserver.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        extra = list(self.extra_args)
        # A server that dies without unloading (SIGKILL, a crash) leaves its python stubs' shared
        # memory in /dev/shm for good; a prefix of this launch's own lets stop() remove exactly that.
        if not any(arg.startswith(f"--backend-config={_SHM_OPTION}") for arg in extra):
            self._shm_prefix = f"{_SHM_DEFAULT_PREFIX}tk{os.getpid()}_{next(_LAUNCHES)}_"
            extra.append(f"--backend-config={_SHM_OPTION}{self._shm_prefix}")
        self.install = self.install.assembled(self._backends_cache)
        argv = server_argv(
            self.install, self.repositories, host=self.host, http_port=self.http_port, grpc_port=self.grpc_port,
            metrics_port=self.metrics_port, model_control=self.model_control, models=self.models,
            exit_on_error=self.exit_on_error, log_verbose=self.log_verbose, extra_args=extra,
        )
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        # SIGTERM on our death: tritonserver then unloads its models, stops its stubs and
        # releases their shared memory within --exit-timeout-secs.
        self._proc = spawn(
            argv,
            death_signal=signal.SIGTERM,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=self._environment(),
        )
        with _LIVE_LOCK:
            _LIVE.add(self)

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        models_env = model_python_env()
        env["PATH"] = os.pathsep.join(p for p in (models_env["PATH"], env.get("PATH", "")) if p)
        lib_dirs = [str(d) for d in self.install.lib_dirs] + [models_env["LD_LIBRARY_PATH"]]
        lib_dirs.append(env.get("LD_LIBRARY_PATH", ""))
        env["LD_LIBRARY_PATH"] = os.pathsep.join(d for d in lib_dirs if d)
        # The stub must not pick up a PYTHONHOME meant for another interpreter.
        env.pop("PYTHONHOME", None)
        return env

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                code = self._proc.returncode
                if _stopped_from_outside(code):
                    # Killed, not failed: a model's load error in the log is not why it is gone.
                    raise ServerError(f"tritonserver died during start-up: {_death(code)}{self._last_lines()}",
                                      log_path=self.log_path, hint=_death_hint(code))
                self._raise_from_log(f"tritonserver {_death(code)} during start-up")
            if self.admin.is_ready(timeout_s=1.0):
                self._wait_metrics(deadline)
                return
            if not self.exit_on_error and self.admin.is_live(timeout_s=1.0):
                # The server loads every model before it opens its endpoints: once it is live,
                # the models that are not ready have failed, and load_failures() says why.
                self._wait_metrics(deadline)
                return
            if self.exit_on_error and find_load_failures(log_tail(self.log_path, 400)):
                # Named in the log already: no need to wait for the server's slow exit.
                self._raise_from_log("a model failed to load")
            if time.monotonic() >= deadline:
                self._raise_from_log(
                    f"tritonserver was not ready within {self.startup_timeout_s:.0f} s",
                    hint="raise startup_timeout_s for large models, or read the server log",
                )
            time.sleep(0.1)

    def _wait_metrics(self, deadline: float) -> None:
        """Wait (within the start-up deadline) until the metrics endpoint answers too.

        tritonserver opens its metrics service after HTTP and gRPC report ready; a scrape in
        that gap is refused, and a load test started at once would miss its first requests.
        """
        if any(arg.replace(" ", "") in ("--allow-metrics=false", "--allow-metrics=0") for arg in self.extra_args):
            return  # metrics turned off by the caller: nothing will ever answer there
        while time.monotonic() < deadline and self._proc is not None and self._proc.poll() is None:
            try:
                with urllib.request.urlopen(self.metrics_url, timeout=1.0) as response:  # noqa: S310 - loopback URL we built
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)

    def _raise_from_log(self, what: str, *, hint: str | None = None) -> None:
        text = log_tail(self.log_path, 400)
        failures = find_load_failures(text)
        if failures:
            first = failures[0]
            others = f" (and {len(failures) - 1} more models)" if len(failures) > 1 else ""
            raise ModelLoadError(
                first.model,
                first.reason + others,
                log_path=self.log_path,
                hint=self._load_failure_hint(first.model),
            )
        tail = log_tail(self.log_path, 8).strip()
        detail = f"; last log lines:\n{tail}" if tail else ""
        raise ServerError(f"{what} (log: {self.log_path}){detail}", log_path=self.log_path, hint=hint)

    def _load_failure_hint(self, model: str) -> str:
        """What to do about a model that failed to load: the server's own reason says what. Linting
        for this server's release is the caller's (``tritonkit serve`` does it): the server layer
        imports no linter, and a fix line must never send the user to a lint that would pass."""
        return f"fix {model}/config.pbtxt or its model files (the server's reason above)"

    def stop(self, *, _failed: bool = False) -> None:
        """Stop the server and its process group: SIGTERM, grace period, SIGKILL. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc, self.stop_grace_s)
            with _LIVE_LOCK:
                _LIVE.discard(self)
            self._remove_shared_memory()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if proc is not None and not _failed and self._own_log_dir is not None:
            # A clean run's log is not worth keeping; a failed one's path is in the error.
            shutil.rmtree(self._own_log_dir, ignore_errors=True)
            self._own_log_dir = None

    def _remove_shared_memory(self) -> None:
        """Remove what this launch's stubs left in /dev/shm (nothing after a clean stop)."""
        prefix, self._shm_prefix = self._shm_prefix, None
        if prefix is None:
            return
        with contextlib.suppress(OSError):
            for region in SHM_DIR.glob(f"{prefix}*"):
                with contextlib.suppress(OSError):
                    region.unlink()

    # ---- administration (through the one admin layer) ----------------------
    @property
    def admin(self) -> ServerAdmin:
        """The administration API of this server, over its HTTP endpoint."""
        # A server tritonkit started serves plain HTTP on loopback, whatever a command dials elsewhere.
        return ServerAdmin(self.http_url, protocol="http", timeout_s=2.0, log_path=self.log_path, dial=PLAIN)

    def metadata(self) -> dict[str, Any]:
        """The server's own metadata (``name``, ``version``, ``extensions``)."""
        try:
            return self.admin.server_metadata()
        except (ConnectError, DeadlineExceededError) as exc:
            raise self.no_answer("reading its metadata") from exc

    def version(self) -> str:
        """The server's version string, e.g. ``2.51.0``."""
        return str(self.metadata().get("version", "unknown"))

    def client_shm_note(self) -> str | None:
        """One line when this running server refuses client shared-memory registration (2.68+
        without ``--allow-client-shm=true``), naming the flag; ``None`` when it allows it."""
        known = install_release(self.version())
        return client_shm_note(known, self.extra_args) if known is not None else None

    def load_model(self, name: str, *, config: mc.ModelConfig | None = None, timeout_s: float = 120.0) -> None:
        """Load (or reload) ``name``, optionally with ``config`` replacing its ``config.pbtxt`` for this load.

        Explicit model control only. Raises ``ModelLoadError`` with the server's reason (its log's
        words when it wrote any), or ``ServerError`` saying the server died, and how.
        """
        if self.model_control != "explicit":
            raise ServerError(
                f"cannot load model '{name}': the server runs with model control '{self.model_control}'",
                hint="start it with model_control='explicit' (tritonkit serve --explicit)",
            )
        self._check_name(name)
        offset = _size(self.log_path)
        try:
            self.admin.load(name, config=config, timeout_s=timeout_s)
        except ModelLoadError as exc:
            # The log often holds the more precise reason (e.g. the python model's own exception).
            logged = {f.model: f.reason for f in find_load_failures(_text_since(self.log_path, offset))}
            raise ModelLoadError(name, logged.get(name) or exc.reason, log_path=self.log_path) from exc
        except (ConnectError, DeadlineExceededError) as exc:
            raise self.no_answer(f"loading model '{name}'", timeout_s=timeout_s) from exc

    def _check_name(self, name: str) -> None:
        """Refuse a model name that is not one folder inside each repository (``../x`` would serve another)."""
        for repo in self.repositories:
            model_folder(repo, name)

    def no_answer(self, doing: str, *, timeout_s: float | None = None) -> ServerError:
        """Why the server gave no answer while ``doing``: it died (how, last log lines) or is still busy."""
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)
        code = proc.returncode if proc is not None else None
        if proc is None or code is not None:
            return ServerError(f"tritonserver died while {doing}: {_death(code)}{self._last_lines()}",
                               log_path=self.log_path, hint=_death_hint(code))
        waited = f"within {timeout_s:g} s " if timeout_s is not None else ""
        return ServerError(
            f"no answer {waited}while {doing}; the server is still running (log: {self.log_path})",
            log_path=self.log_path,
            hint="a python model whose model.py is missing never finishes loading; otherwise raise timeout_s",
        )

    def _last_lines(self) -> str:
        tail = log_tail(self.log_path, 8).strip()
        return f" (log: {self.log_path}); last log lines:\n{tail}" if tail else f" (log: {self.log_path})"

    def model_states(self) -> list[ModelState]:
        """The repository index: one entry per model version, with its state and the server's reason."""
        try:
            return self.admin.index()
        except (ConnectError, DeadlineExceededError) as exc:
            raise self.no_answer("reading the repository index") from exc

    def load_failures(self) -> list[LoadFailure]:
        """Every model that is in the repository but not ready, with the server's reason.

        In explicit mode, a model asked for at start (``models``) that did not load counts too,
        even when the server lists nothing for it (a name with no folder in the repository).
        """
        logged = {f.model: f.reason for f in find_load_failures(log_tail(self.log_path, 400))}
        failures: dict[str, str] = {}
        states = self.model_states()
        for entry in states:
            unloaded = entry.reason == "unloaded"  # explicit control: unloaded on request
            if entry.name and not unloaded and entry.state not in ("READY", "LOADING") and (
                entry.state or entry.name in logged
            ):
                failures.setdefault(entry.name, entry.reason or logged.get(entry.name) or entry.state or "not loaded")
        if self.model_control == "explicit":
            ready = {entry.name for entry in states if entry.ready}
            known = sorted({entry.name for entry in states})
            for name in self.models:
                if name not in ready and name not in failures:
                    failures[name] = logged.get(name) or (
                        f"no model folder '{name}' in {', '.join(map(str, self.repositories))} "
                        f"(models there: {', '.join(known) or 'none'})")
        return [LoadFailure(model, self._with_missing_backend(model, reason)) for model, reason in failures.items()]

    def lint_command(self) -> str:
        """The ``tritonkit repo lint`` command that checks this server's repositories against its own backends."""
        import shlex

        where = ("--bundled" if self.install.source == "nvidia-pytriton" else
                 f"--server-bin {shlex.quote(str(self.install.binary))}")
        named = self.install.backends_from.startswith(("--backend-dir", "$"))
        backends = f" --backend-dir {shlex.quote(str(self._named_backend_dir))}" if named and self._named_backend_dir else ""
        return f"tritonkit repo lint {' '.join(shlex.quote(str(r)) for r in self.repositories)} {where}{backends}"

    def missing_backend(self, model: str) -> str | None:
        """The backend ``model``'s config names that this server's backends folder lacks, or ``None``."""
        for repo in self.repositories:
            path = repo / model / CONFIG_FILENAME
            if not path.is_file():
                continue
            try:
                backend = backend_of(read_config(path))
            except (TritonKitError, OSError):
                return None
            return backend if backend and backend not in self.install.backends() else None
        return None

    def _with_missing_backend(self, model: str, reason: str) -> str:
        backend = self.missing_backend(model)
        if backend is None:
            return reason
        have = ", ".join(self.install.backends()) or "none"
        return (f"{reason} — this server has no {backend} backend (its backends: {have}; "
                f"{self.install.backends_from or self.install.backend_dir}): pass --backend-dir DIR (or set "
                f"TRITONKIT_BACKEND_DIR) to a folder holding Triton's {backend} backend, e.g. an NGC container's "
                "/opt/tritonserver/backends")

    def unload_model(self, name: str, *, wait: bool = False, timeout_s: float = 60.0) -> None:
        """Unload ``name`` (explicit model control); with ``wait``, until the server has let it go."""
        try:
            self.admin.unload(name, wait=wait, timeout_s=timeout_s)
        except (ConnectError, DeadlineExceededError) as exc:
            raise self.no_answer(f"unloading model '{name}'", timeout_s=timeout_s) from exc

    def model_ready(self, name: str, version: str = "") -> bool:
        """True when ``name`` (optionally a given version) is loaded and ready."""
        return self.admin.model_ready(name, version)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _text_since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def _death(code: int | None) -> str:
    """How a process ended, from its return code (negative: the signal that killed it)."""
    if code is None:
        return "it is gone"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


def _stopped_from_outside(code: int | None) -> bool:
    """True when the process was ended by a signal someone sends (kill, Ctrl-C, a supervisor), not a crash."""
    return code is not None and -code in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _death_hint(code: int | None) -> str:
    """What to do: a signal sent from outside is not the model's fault; a crash signal may be."""
    if _stopped_from_outside(code):
        return ("something outside stopped the server (the OOM killer, a user, a supervisor); "
                "`dmesg` or the job's own log says who; start it again")
    if code is not None and -code in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE):
        return "the server crashed: read the log's last lines; `tritonkit repo lint` catches configs known to crash it"
    return "read the log's last lines"
