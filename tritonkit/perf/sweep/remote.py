"""Sweep a model on a running tritonserver that tritonkit did not start, by its URL.

The server must run with explicit model control (``--model-control-mode=explicit``): that is
checked first, changing nothing (:func:`~tritonkit.server.facts.model_control_of`), and a server
without it is refused before anything is loaded. The model's served config is the default
config; each variant is loaded through the load API with its config (a reload in place: the model
is never unloaded, so its other clients are never refused), measured with the real
perf_analyzer as a local sweep does (:func:`~tritonkit.perf.sweep.runner.search_on_server`), and
after each the server is asked whether it still serves what was loaded (a server that restarted,
or another client that loaded the model, ends the sweep with a clear error rather than a result
measured on something else). The served config is journaled before the first load and loaded
back however the sweep ends (:mod:`~tritonkit.perf.sweep.journal`); ``apply=True`` leaves the
winner loaded instead, and says so. The winner's ``config.pbtxt`` is written under the sweep
folder (``winner/MODEL/config.pbtxt``), never into the server's repository. With a load target
(``--target ENSEMBLE``), its served config is journaled too, and so is each composing model a
``--pin`` names, loaded through the load API with its served config and the pinned knob. Several
models swept together by URL: :mod:`~tritonkit.perf.sweep.remote_joint`, through the same seam.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write
from tritonkit.errors import (
    ConfigError,
    ConnectError,
    DeadlineExceededError,
    ModelNotReadyError,
    ServerError,
    TritonKitError,
)
from tritonkit.perf import LadderResult
from tritonkit.perf.sweep.driver import LoadGenerator
from tritonkit.perf.sweep.journal import (
    STATUS_APPLIED,
    Journal,
    restore,
    restore_failed_hint,
    signals_held,
    try_restore,
)
from tritonkit.perf.sweep.live import LiveModel, ModelHost
from tritonkit.perf.sweep.report import write_sweep_report
from tritonkit.perf.sweep.result import SweepEvent, SweepResult
from tritonkit.perf.sweep.runner import (
    _composing_configs,
    _os_errors,
    check_target,
    config_key,
    search_on_server,
)
from tritonkit.perf.sweep.settings import SweepSettings
from tritonkit.perf.sweep.store import SweepStore, sweep_locks
from tritonkit.perf.sweep.traffic import IDLE_WATCH_S, failed_during, idle_requests, others_requests
from tritonkit.perf.sweep.variants import apply_variant
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.repository import CONFIG_FILENAME, render_config
from tritonkit.server.remote import RemoteServer

__all__ = ["RemoteLiveModel", "RemoteOptions", "restore_only", "run_remote_sweep"]

#: Where the winner's config is written, under the sweep folder (a repository's layout).
WINNER_DIR = "winner"


@dataclass(frozen=True)
class RemoteOptions:
    """What only a sweep by URL takes. ``repo``: a local copy of the model's repository, for
    input data derived from its model file (the server's own files are never read or written);
    ``apply``: leave the winner loaded on the server; ``restore_wait_s``: how long to wait for a
    server that stopped answering to answer again before giving up putting the model back;
    ``exclusive``: refuse to measure while other clients send the model requests; ``cluster``
    (a :class:`~tritonkit.perf.cluster.ClusterSettings`): every step's load comes from ``clients``
    perf_analyzer clients on that Ray cluster's nodes at once, where one client cannot saturate
    the server (:func:`~tritonkit.perf.cluster.load.cluster_load_generators`)."""

    repo: Path | None = None
    apply: bool = False
    restore_wait_s: float = 60.0
    exclusive: bool = False
    cluster: Any = None
    clients: int = 2


class RemoteLiveModel(LiveModel):
    """The swept model on a server tritonkit did not start: after each load the served config is
    read, and :meth:`check` refuses a measurement if the server serves something else by then.
    It is never unloaded: each load replaces it in place (no loss of availability). Other clients'
    requests and failed requests in each step are added to ``traffic``, their failed requests
    across each load to ``changes``; with ``exclusive`` other clients' requests end the sweep
    instead, and so do requests seen while the freshly loaded variant is idle."""

    served: mc.ModelConfig | None = None
    loaded: mc.ModelConfig | None = None

    def __init__(self, server: ModelHost, model: str, *, exclusive: bool = False,
                 traffic: list[dict[str, Any]] | None = None, changes: list[dict[str, Any]] | None = None) -> None:
        super().__init__(server, model)
        self.exclusive = exclusive
        self.traffic = traffic if traffic is not None else []
        self.changes = changes if changes is not None else []

    def load(self, config: mc.ModelConfig, *, timeout_s: float = 120.0) -> None:
        with failed_during(self.server.metrics_url, [self.model], f"loading a variant of {self.model}", self.changes):
            super().load(config, timeout_s=timeout_s)
        self.loaded = config
        self.served = self._served("reading the config it loaded")
        if self.exclusive:
            seen = idle_requests(self.server.admin, self.model)
            if seen:
                raise self._not_alone(f"{seen} requests in {IDLE_WATCH_S:g} s before measuring")

    def unload(self, *, wait: bool = False, timeout_s: float = 60.0) -> None:
        """Never an unload: the variant serves until the next load or the restore replaces it.
        ``wait`` (a fresh start after a queue overflow) reloads it with its own config."""
        if wait and self.loaded is not None:
            self.load(self.loaded, timeout_s=timeout_s)

    def observe(self, ladder: LadderResult, folder: Path) -> None:
        for step in ladder.result.steps:
            # Failed requests the server counted beyond perf_analyzer's own errors.
            failed = max(0, round(step.metrics.failure_count or 0) - step.error_count) if step.metrics else 0
            others = others_requests(step)
            if not others and not failed:
                continue
            where = folder.relative_to(folder.parents[2]) if len(folder.parents) > 2 else folder
            if self.exclusive and others:
                raise self._not_alone(f"{others} requests perf_analyzer did not send, at load {step.load_value:g} "
                                      f"({where})")
            self.traffic.append({"where": str(where), "load": step.load_value, "requests": others or 0,
                                 "failed": failed})

    def _not_alone(self, seen: str) -> ServerError:
        return ServerError(f"other clients are sending to '{self.model}' on {self.server.grpc_url} ({seen}, from the "
                           "server's own counters): --exclusive refuses to measure while they do",
                           hint="sweep when the model is idle, or drop --exclusive (each step that included others' "
                                "requests is then named in the report)")

    def _served(self, doing: str) -> mc.ModelConfig | None:
        try:
            return self.server.admin.model_config(self.model)
        except ModelNotReadyError:
            return None
        except (ConnectError, DeadlineExceededError) as exc:
            raise ServerError(f"tritonserver at {self.server.grpc_url} stopped answering while {doing} of "
                              f"'{self.model}': {exc.message}", hint="check that the server is running (it may "
                              "have died or restarted); the sweep's journal says what to put back") from exc

    def check(self) -> None:
        if self.served is None:
            return
        now = self._served("checking what it serves")
        if now == self.served:
            return
        what = "no longer serves it" if now is None else "serves another config of it"
        raise ServerError(f"tritonserver at {self.server.grpc_url} {what}: '{self.model}' is not the variant the "
                          "sweep loaded (the server restarted, or another client loaded the model); that "
                          "measurement is discarded", hint="keep other clients from loading the model and the "
                          "server from restarting while the sweep runs, then run it again with the same --out "
                          "(finished variants are reused)")


def _say(emit: Callable[[SweepEvent], None], kind: str = "note") -> Callable[[str], None]:
    return lambda text: emit(SweepEvent(kind, text))


def _put_back(server: RemoteServer, journal: Journal, wait_s: float, say: Callable[[str], None],
              changes: list[dict[str, Any]]) -> TritonKitError | None:
    """Wait (up to ``wait_s``) for a server that stopped answering, then :func:`try_restore` (other
    clients' failed requests meanwhile added to ``changes``), SIGINT and SIGTERM held throughout; one
    that comes while the server does not answer skips the restore, keeps the journal open, says so."""
    deadline = time.monotonic() + wait_s
    with signals_held() as came, failed_during(server.metrics_url, list(journal.configs), "the restore", changes):
        while not server.admin.is_live(timeout_s=2.0) and time.monotonic() < deadline:
            if came:
                say(f"interrupted while waiting for {server.grpc_url} to answer: {', '.join(journal.configs)} not put "
                    f"back; the journal is kept open ({journal.path}): {restore_failed_hint(journal)}")
                break
            time.sleep(0.5)
        else:
            return try_restore(server, journal, say)
    return None


def restore_pending(server: RemoteServer, folder: Path, say: Callable[[str], None]) -> Journal | None:
    """Put back what an earlier sweep into ``folder`` left changed (its journal still open), first."""
    journal = Journal.read(folder)
    if journal is None or not journal.open:
        return None
    if journal.url != server.grpc_url:
        raise ConfigError(f"{journal.path} is the open journal of a sweep of the server at {journal.url}, not "
                          f"{server.grpc_url}: what it changed there was never put back",
                          hint=f"run `tritonkit perf sweep --url {journal.url} --restore --out {folder}` first, "
                               "or use another --out")
    say(f"an earlier sweep into {folder} (pid {journal.pid}, {journal.started_utc}) did not put "
        f"{', '.join(journal.configs)} back; restoring first")
    restore(server, journal, say)
    return journal


def restore_only(server: RemoteServer, folder: Path, say: Callable[[str], None]) -> Journal:
    """``--restore``: load back the configs journaled in ``folder`` (open, or left applied), nothing else."""
    journal = Journal.read(folder)
    if journal is None:
        raise ConfigError(f"no sweep journal in {folder}", hint="pass the --out folder of the sweep by URL to undo")
    if journal.url != server.grpc_url:
        raise ConfigError(f"{journal.path} journals the server at {journal.url}, not {server.grpc_url}",
                          hint=f"pass --url {journal.url}")
    if journal.status not in ("open", STATUS_APPLIED):
        say(f"nothing to restore: {journal.path} is {journal.status} ({journal.note})")
        return journal
    with sweep_locks(folder, [], f"perf sweep --url {server.grpc_url} --restore", say=say):
        server.require_explicit()
        restore(server, journal, say)
    return journal


def traffic_warning(model: str, traffic: list[dict[str, Any]]) -> str | None:
    """The report's line for the steps other clients' requests were counted in (``None``: none)."""
    sent = [t for t in traffic if t["requests"]]
    if not sent:
        return None
    steps = ", ".join(f"{t['where']} at load {t['load']:g} ({t['requests']})" for t in sent)
    return (f"other clients sent {sum(t['requests'] for t in sent)} requests to {model} during {len(sent)} "
            f"steps, counted by the server: {steps}; those steps' figures include them (--exclusive refuses to "
            "measure while they do)")


def failures_record(traffic: list[dict[str, Any]], changes: list[dict[str, Any]]) -> dict[str, Any]:
    """Other clients' failed requests, from the server's failure counters: in the measured steps and
    across the variant changes and the restore; ``where``: each step or change one fell in;
    ``uncounted``: changes the metrics page did not answer around."""
    return {"in_steps": sum(t.get("failed", 0) for t in traffic), "in_changes": sum(c["failed"] or 0 for c in changes),
            "changes": len(changes), "uncounted": sum(1 for c in changes if c["failed"] is None),
            "where": [t for t in [*traffic, *changes] if t.get("failed")]}


@contextlib.contextmanager
def _load_generators(opts: RemoteOptions, server: RemoteServer, say: Callable[[str], None]
                     ) -> Iterator[LoadGenerator | None]:
    """Without a cluster, ``None`` (perf_analyzer here); with one, its clients' load generators."""
    if opts.cluster is None:
        yield None
        return
    from tritonkit.perf.cluster.load import cluster_load_generators

    with cluster_load_generators(opts.cluster, clients=opts.clients, endpoint=server.grpc_url,
                                 metrics_url=server.metrics_url) as (generator, _tool):
        say(f"every step's load from {opts.clients} perf_analyzer clients on the Ray cluster at {opts.cluster.address}")
        yield generator


def pins_record(settings: SweepSettings, model: str) -> list[str]:
    """The composing models' pins as ``sweep.json`` records them (``["pre.instances=2"]``)."""
    return [str(p) for pins in settings.grid.composing_pins([model]).values() for p in pins]


def _target_config(server: RemoteServer, model: str, target: str | None) -> mc.ModelConfig | None:
    """The load target's served config (``None`` without a target); an ensemble must call ``model``."""
    if target is None or target == model:
        return None
    return check_target(server.served_config(target), model, target, f"served on {server.grpc_url}")


def _write_winner(out_dir: Path, model: str, sweep: SweepResult, base: mc.ModelConfig) -> Path | None:
    winner = sweep.search.winner
    if winner is None:
        return None
    path = out_dir / WINNER_DIR / model / CONFIG_FILENAME
    atomic_write(path, render_config(apply_variant(base, winner.variant)))
    return path


def run_remote_sweep(server: RemoteServer, model: str, settings: SweepSettings, options: RemoteOptions | None = None,
                     *, on_event: Callable[[SweepEvent], None] | None = None) -> SweepResult:
    """Sweep ``model`` on ``server`` as ``settings`` say (see the module docstring) and return the result.

    Order: the settings and perf_analyzer are checked, the sweep folder locked, the server asked
    for explicit model control, an open journal in the folder restored, the served config read and
    journaled; then the search, the winner's config under the folder, the restore (or the winner
    applied), the report and ``sweep.json``. A failure after the journal still restores; a restore
    that fails keeps the journal open and says what to run."""
    opts = options or RemoteOptions()
    started = time.monotonic()
    emit = on_event or (lambda _event: None)
    say = _say(emit)
    settings.validate()
    settings.grid.validate([model])
    if settings.target is None:  # a composing model's pin without its ensemble, refused before the server is asked
        _composing_configs(Path(), model, settings, None, server.served_config)
    locate_perf_analyzer()
    out_dir = settings.out_dir(model)
    with sweep_locks(out_dir, [], f"perf sweep {model} --url {server.grpc_url}", say=say), \
            _os_errors("write the sweep's results", out_dir):
        server.require_explicit()  # before anything is loaded, and before an old journal is put back
        restore_pending(server, out_dir, _say(emit, "warning"))  # said even when piped
        base = server.served_config(model)
        target_config = _target_config(server, model, settings.target)
        composing = _composing_configs(opts.repo or out_dir, model, settings, target_config, server.served_config)
        served = {model: base, **({settings.target: target_config} if settings.target and target_config else {}),
                  **{name: server.served_config(name) for name in composing}}
        facts = server.facts(list(served))
        variants = settings.grid.variants(base, model)
        if opts.repo is not None:
            settings = settings.with_input_data(opts.repo, model, out_dir)
        store = SweepStore(out_dir)
        plan = settings.ladder_plan()
        store.begin({"model": model, "server": server.grpc_url, "config": config_key(base),
                     "sla": str(settings.parsed_sla()), **settings.record(plan),
                     **({"composing_pins": pins_record(settings, model)} if composing else {})})
        with _load_generators(opts, server, say) as generator:  # a cluster is checked before anything is loaded
            journal = Journal.begin(out_dir, server, served)
            say(f"journal: the served config of {', '.join(served)} kept in {journal.path}; loaded back however the "
                "sweep ends")
            sweep, remote = _sweep_and_restore(server, model, base, variants, settings, store, journal, opts, emit,
                                               started, generator, target_config, composing)
        sweep.repo = opts.repo
        sweep.server_facts = facts.to_dict()
        sweep.remote = remote
        sweep.wall_s = time.monotonic() - started
        sweep.report_path, sweep.plot_path = write_sweep_report(sweep)
        store.write_summary(sweep.to_dict())
    return sweep


def _sweep_and_restore(server: RemoteServer, model: str, base: mc.ModelConfig, variants: list[Any],
                       settings: SweepSettings, store: SweepStore, journal: Journal, opts: RemoteOptions,
                       emit: Callable[[SweepEvent], None], started: float,
                       load_generator: LoadGenerator | None,
                       target_config: mc.ModelConfig | None = None,
                       composing: dict[str, mc.ModelConfig] | None = None) -> tuple[SweepResult, dict[str, Any]]:
    """The search, then the winner applied (``opts.apply``) or the journal restored, whatever happened."""
    say = _say(emit)
    host: ModelHost = server
    traffic: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    with restored_after(server, journal, opts.restore_wait_s, emit, changes):
        sweep = search_on_server(opts.repo or store.root, model, base, variants, settings, store, host, emit, started,
                                 target_config, composing=composing, live_model=lambda server, name: RemoteLiveModel(
                                     server, name, exclusive=opts.exclusive, traffic=traffic, changes=changes),
                                 load_generator=load_generator)
        sweep.warnings += [w for w in [traffic_warning(model, traffic)] if w]
        winner_path = _write_winner(store.root, model, sweep, base)
        winner = sweep.search.winner
        if opts.apply and winner is not None and sweep.commits:
            apply_configs(server, journal, {model: apply_variant(base, winner.variant)},
                          f"winner {winner.variant.id} loaded on purpose (--apply)")
            emit(SweepEvent("written", f"applied: {model} on {server.grpc_url} now serves the winner "
                            f"{winner.variant.id} ({winner.variant.describe()}); its previous config is in "
                            f"{journal.path} (put it back: {restore_command(server, store.root)})",
                            variant=winner.variant.id))
        elif opts.apply:
            say("--apply: no winner to apply (none decided, or a variant failed): the served config is put back")
    return sweep, remote_record(server, journal, store.root, traffic, changes, winner_config=str(winner_path)
                                if winner_path else None, other_traffic=[t for t in traffic if t["requests"]])


def restore_command(server: RemoteServer, folder: Path) -> str:
    return f"tritonkit perf sweep --url {server.grpc_url} --restore --out {folder}{server.dial.options()}"


def remote_record(server: RemoteServer, journal: Journal, folder: Path, steps: list[dict[str, Any]],
                  changes: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    """The result's ``remote`` entry: where, the journal, whether the winner stayed loaded, and
    other clients' failed requests (:func:`failures_record` of ``steps`` and ``changes``)."""
    return {"url": server.grpc_url, "metrics_url": server.metrics_url, "journal": str(journal.path),
            "journal_status": journal.status, "applied": journal.status == STATUS_APPLIED, **more,
            "others_failed": failures_record(steps, changes), "restore_command": restore_command(server, folder)}


def apply_configs(server: RemoteServer, journal: Journal, configs: dict[str, mc.ModelConfig], note: str) -> None:
    """``--apply``: load each winner's config and close the journal as applied (signals held meanwhile)."""
    with signals_held():
        for model, config in configs.items():
            server.load_model(model, config=config)
        journal.close(STATUS_APPLIED, note)


@contextlib.contextmanager
def restored_after(server: RemoteServer, journal: Journal, wait_s: float, emit: Callable[[SweepEvent], None],
                   changes: list[dict[str, Any]]) -> Iterator[None]:
    """However the block ends, put back what ``journal`` holds unless it was closed inside (the
    winners applied); a failed restore after a block that succeeded is a ``ServerError`` saying
    what to run, and after one that failed it is said, the block's own error coming first. Other
    clients' failed requests across the restore are added to ``changes``."""
    try:
        yield
    except BaseException:
        if journal.open:
            _put_back(server, journal, wait_s, _say(emit, "warning"), changes)
        raise
    if journal.open:
        error = _put_back(server, journal, wait_s, _say(emit), changes)
        if error is not None:
            raise ServerError(error.message, hint=restore_failed_hint(journal)) from error
