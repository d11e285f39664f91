"""Several models tuned together on a running tritonserver that tritonkit did not start, by its URL.

The joint search is the local one (:func:`~tritonkit.perf.sweep.joint_run.search_jointly`: every
model's default together, each model alone, the alone winners together, each model's best alone
variants with the others held), run on the server at the URL through the seam a sweep of one model
by URL uses: each model is loaded with a config override by a
:class:`~tritonkit.perf.sweep.remote.RemoteLiveModel`, which checks after each configuration that
the server still serves what was loaded and counts other clients' requests (``--exclusive`` refuses
them). What differs from the local joint sweep:

* every model's served config is its default, and all of them are written to ONE journal before the
  first load; however the sweep ends, every model is loaded back as it was (or, with ``apply``,
  every winner stays loaded, said), and an open journal left by a killed sweep is put back first;
* a model swept alone runs with the other models still loaded (with their served config) and idle,
  not unloaded: the server is someone else's, and its other models stay served;
* each model's winning config is written to ``OUT/winner/MODEL/config.pbtxt``, never into the
  server's repository;
* the server's own facts and what was left on it are in ``joint.json`` and ``joint.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.joint import JointMeter, joint_shares, write_joint_report
from tritonkit.perf.sweep.joint_run import JointResult, grids_of, joint_record, search_jointly
from tritonkit.perf.sweep.journal import Journal
from tritonkit.perf.sweep.live import LiveModel, ModelHost
from tritonkit.perf.sweep.remote import (
    WINNER_DIR,
    RemoteLiveModel,
    RemoteOptions,
    _say,
    apply_configs,
    remote_record,
    restore_command,
    restore_pending,
    restored_after,
    traffic_warning,
)
from tritonkit.perf.sweep.result import SweepEvent
from tritonkit.perf.sweep.runner import _os_errors
from tritonkit.perf.sweep.settings import SweepSettings
from tritonkit.perf.sweep.store import SweepStore, sweep_locks
from tritonkit.perf.sweep.variants import apply_variant
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.repository import CONFIG_FILENAME, render_config
from tritonkit.server.remote import RemoteServer

__all__ = ["ALONE_BY_URL", "run_remote_joint_sweep"]

#: How a model is swept alone on a server the sweep did not start (said, and in the report).
ALONE_BY_URL = "the other models still loaded with their served config, and idle"


def _check(models: Sequence[str], settings: SweepSettings, opts: RemoteOptions) -> None:
    """What a joint sweep by URL cannot take, refused before the server is asked anything."""
    if opts.cluster is not None:
        raise ConfigError("--cluster spreads the load of one model swept by URL, not of several swept together",
                          hint="sweep one MODEL at a time with --url and --cluster, or drop --cluster")
    if settings.target is not None:
        raise ConfigError("--target sweeps one composing model; give one MODEL with it")
    joint_shares(models, settings.shares)


def run_remote_joint_sweep(server: RemoteServer, models: Sequence[str], settings: SweepSettings,
                           options: RemoteOptions | None = None, *,
                           on_event: Callable[[SweepEvent], None] | None = None) -> JointResult:
    """Tune ``models`` together on ``server`` (see the module docstring) and return the result.

    Order: the settings and perf_analyzer are checked, the sweep folder locked, the server asked
    for explicit model control, an open journal in the folder put back, every model's served
    config read and journaled; then the joint search, each winner's config under the folder, the
    restore (or the winners applied), ``joint.md`` and ``joint.json``."""
    opts = options or RemoteOptions()
    started = time.monotonic()
    emit = on_event or (lambda _event: None)
    say = _say(emit)
    models = list(models)
    settings.validate()
    _check(models, settings, opts)
    shares = joint_shares(models, settings.shares)
    slas = {m: settings.parsed_sla(m) for m in models}
    locate_perf_analyzer()
    out_dir = settings.out_dir("-".join(models))
    with sweep_locks(out_dir, [], f"perf sweep {' '.join(models)} --url {server.grpc_url}", say=say), \
            _os_errors("write the joint sweep's results", out_dir):
        server.require_explicit()  # before anything is loaded, and before an old journal is put back
        restore_pending(server, out_dir, _say(emit, "warning"))
        bases = {m: server.served_config(m) for m in models}
        grids = grids_of(bases, settings)
        facts = server.facts(models)
        plan = settings.ladder_plan()
        SweepStore(out_dir).begin(joint_record(bases, shares, slas, settings, server=server.grpc_url))
        emit(SweepEvent("server", f"tritonserver {server.version()} on {server.grpc_url} (explicit model control, "
                        f"not started by tritonkit); {', '.join(models)} swept together, sweep folder {out_dir}"))
        journal = Journal.begin(out_dir, server, bases)
        say(f"journal: the served config of {', '.join(models)} kept in {journal.path}; loaded back however the "
            "sweep ends")
        traffic: dict[str, list[dict[str, Any]]] = {m: [] for m in models}
        changes: list[dict[str, Any]] = []

        def live(host: ModelHost, name: str) -> LiveModel:
            return RemoteLiveModel(host, name, exclusive=opts.exclusive, traffic=traffic[name], changes=changes)

        meter = JointMeter(server=server, repo=None, models=models, shares=shares, slas=slas, plan=plan,
                           settings=settings, folder=out_dir, say=say, bases=bases, live_model=live, keep_loaded=True)

        def others_served(model: str) -> str:
            meter.forget(model)  # the alone sweep loads it, variant by variant
            for other in models:
                if other != model:
                    meter.hold(other, bases[other])
            return ALONE_BY_URL

        with restored_after(server, journal, opts.restore_wait_s, emit, changes):
            found = search_jointly(meter, opts.repo or out_dir, bases, grids, emit, before_alone=others_served)
            result = found.result(meter, started)
            winners = ({m: apply_variant(bases[m], v) for m, v in result.winner.variants.items()}
                       if result.winner is not None else {})
            paths = {m: str(atomic_write(out_dir / WINNER_DIR / m / CONFIG_FILENAME, render_config(config)))
                     for m, config in winners.items()}
            _apply(server, journal, winners, result, opts, emit, out_dir)
        steps = [t for seen in traffic.values() for t in seen]
        result.warnings += [w for w in (traffic_warning(m, seen) for m, seen in traffic.items()) if w]
        result.server_facts = facts.to_dict()
        result.remote = remote_record(server, journal, out_dir, steps, changes, winner_configs=paths, alone=ALONE_BY_URL,
                                      other_traffic={m: [t for t in seen if t["requests"]] for m, seen in traffic.items()})
        result.wall_s = time.monotonic() - started
        result.report_path = write_joint_report(out_dir, result.render_markdown(),
                                                json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    return result


def _apply(server: RemoteServer, journal: Journal, winners: dict[str, mc.ModelConfig], result: JointResult,
           opts: RemoteOptions, emit: Callable[[SweepEvent], None], out_dir: Any) -> None:
    """``apply``: leave every model's winner loaded (said), when the joint sweep decided one."""
    if not opts.apply:
        return
    if not result.commits or not winners:
        _say(emit)("--apply: no joint winner to apply (none met every SLA, a configuration failed, or the served "
                   "configs are in its tie): the served configs are put back")
        return
    apply_configs(server, journal, winners, "joint winner loaded on purpose (--apply)")
    emit(SweepEvent("written", f"applied: {', '.join(winners)} on {server.grpc_url} now serve the joint winner; "
                    f"their previous configs are in {journal.path} (put them back: "
                    f"{restore_command(server, out_dir)})"))
