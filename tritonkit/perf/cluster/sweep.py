"""Sweep several models on a Ray cluster: ``perf sweep REPO A B … --cluster ADDR``.

Each model's sweep is a Ray task on a node that has what its variants need (``--node-resources``,
by default one CPU, and a GPU when its instance groups are ``KIND_GPU``), with its own bundled
server and perf_analyzer there: the library's own sweep (:func:`~tritonkit.perf.sweep.run_sweep`,
or :func:`~tritonkit.perf.sweep.joint_run.sweep_alone` for the alone phase of co-located models)
runs on the node; nothing here measures. Co-located models (the default with several models, as
on one machine) then have their joint phase on one node
(:func:`~tritonkit.perf.sweep.run_joint_sweep` given the alone sweeps); ``separately=True`` sweeps
each model on its own and judges each winner alone.

The model folders travel through Ray's object store (or are read where every node sees them,
``shared_repo``); each sweep folder comes back as bytes and is written under ``out`` as a local run
writes it (``OUT/<model>/`` each, or ``OUT/alone-<model>/`` and ``OUT/joint/`` …), as soon as it
arrives. The JSON and reports name each model's node; a winner is judged only against variants
measured on that node, and models measured on different hardware say so. A node lost mid-sweep
means the model is swept again from the start on another node, and the report says so. Winners are
written into the repository last, once, after every report (as :func:`run_sweep` does).

Example::

    from tritonkit.perf.cluster import ClusterSettings, run_cluster_sweep
    from tritonkit.perf.sweep import SweepSettings

    result = run_cluster_sweep("model_repository", ["a", "b", "c", "d"], SweepSettings(sla="p99<=50ms"),
                               ClusterSettings(address="10.0.0.5:6379", separately=True))
    print(result.headline(), result.exit_code)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write, path_error
from tritonkit.errors import ConfigError
from tritonkit.perf.cluster.dispatch import Dispatcher, JobOutcome
from tritonkit.perf.cluster.nodes import (
    NodeInfo,
    NodeResources,
    check_cluster_address,
    check_nodes,
    connected,
    driver_node_id,
)
from tritonkit.perf.cluster.remote import (
    KIND_ALONE,
    KIND_JOINT,
    KIND_SINGLE,
    NodeSweep,
    SweepJob,
    make_event_sink,
)
from tritonkit.perf.cluster.transfer import pack_folders, replace_folder, unpack
from tritonkit.perf.sweep.joint import joint_shares, write_joint_report
from tritonkit.perf.sweep.joint_run import JointResult, grids_of, plan_joint_write_backs, read_bases
from tritonkit.perf.sweep.report import write_sweep_report
from tritonkit.perf.sweep.result import Exit, SweepResult
from tritonkit.perf.sweep.runner import _os_errors as os_errors
from tritonkit.perf.sweep.settings import SweepSettings
from tritonkit.perf.sweep.store import SweepStore, sweep_locks
from tritonkit.perf.sweep.variants import apply_variant
from tritonkit.perf.sweep.writeback import PendingWriteBack, plan_write_back
from tritonkit.repository import CONFIG_FILENAME, model_folder, read_config

__all__ = ["ClusterEvent", "ClusterSettings", "ClusterSweepResult", "ModelSweep", "resources_for",
           "run_cluster_sweep"]

#: The cluster report and record written at the top of the sweep folder.
CLUSTER_REPORT = "cluster.md"
CLUSTER_RECORD = "cluster.json"


@dataclass(frozen=True)
class ClusterSettings:
    """Where and how work runs on a Ray cluster (the CLI's ``--cluster`` options, as one value).

    ``address``: the cluster (``HOST:PORT`` of its head, or ``auto``: the one this machine belongs to).
    ``node_resources``: what every sweep needs of its node (``None``: derived per model, see
    :func:`resources_for`). ``shared_repo``: the repository's path as every node sees it (a shared
    file system); the model folders are then read there instead of sent. ``separately``: sweep each
    model on its own, no joint phase. ``max_attempts``: tries per model when nodes are lost.
    ``cancel_grace_s``: after Ctrl-C, how long remote sweeps get to stop their servers before their
    workers are killed.
    """

    address: str = "auto"
    node_resources: NodeResources | None = None
    shared_repo: str | None = None
    separately: bool = False
    max_attempts: int = 3
    cancel_grace_s: float = 60.0

    def __post_init__(self) -> None:
        check_cluster_address(self.address)


@dataclass(frozen=True)
class ClusterEvent:
    """Something a remote sweep (``model``, or ``joint``) did, as the driver hears it: ``kind`` is
    ``node`` (it started there), ``lost`` (its node died), ``done``, or a :class:`SweepEvent` kind."""

    kind: str
    model: str
    message: str
    node: NodeInfo | None = None
    variant: str | None = None


def resources_for(base: mc.ModelConfig) -> NodeResources:
    """What sweeping a model with this config needs of a node: a CPU for its server and
    perf_analyzer, and as many GPUs as its ``KIND_GPU`` instance groups name (at least one when
    there is such a group). ``KIND_AUTO`` runs anywhere (on a GPU where there is one)."""
    gpu_groups = [g for g in base.instance_group if g.kind == mc.ModelInstanceGroup.KIND_GPU]
    amounts = {"CPU": 1.0}
    if gpu_groups:
        named = {int(gpu) for g in gpu_groups for gpu in g.gpus}
        amounts["GPU"] = float(max(1, len(named)))
    return NodeResources(amounts)


@dataclass
class ModelSweep:
    """One model's sweep on the cluster: its result (``None`` if it failed), where, and every try."""

    model: str
    outcome: JobOutcome
    result: SweepResult | None = None

    @property
    def node(self) -> NodeInfo | None:
        return self.outcome.node

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "node": self.node.to_dict() if self.node else None,
                "attempts": [a.to_dict() for a in self.outcome.attempts],
                "error": str(self.outcome.error) if self.outcome.error else None,
                "exit_code": self.result.exit_code if self.result else Exit.UNMEASURED,
                "headline": self.result.headline() if self.result else None,
                "folder": str(self.result.out_dir) if self.result else None}


@dataclass
class ClusterSweepResult:
    """What :func:`run_cluster_sweep` measured, where, and wrote."""

    address: str
    models: list[str]
    out_dir: Path
    separately: bool
    sweeps: dict[str, ModelSweep]
    joint: JointResult | None = None
    joint_outcome: JobOutcome | None = None
    wall_s: float = 0.0
    report_path: Path | None = None
    written: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        """The models (and ``joint``) whose work could not be done: lost for good, or an error."""
        bad = [m for m, s in self.sweeps.items() if s.result is None]
        if self.joint_outcome is not None and self.joint is None:
            bad.append("joint")
        return bad

    @property
    def exit_code(self) -> int:
        """As a local sweep's: 0 every model (or the joint configuration) has a winner, 1 some model
        none meets the SLA, 2 something could not be measured."""
        if self.failed:
            return Exit.UNMEASURED
        if not self.separately and self.joint is not None:
            return self.joint.exit_code
        codes = [s.result.exit_code for s in self.sweeps.values() if s.result is not None]
        return max(codes, default=Exit.UNMEASURED)

    def losses(self) -> list[str]:
        """Every node lost mid-sweep, in words, with what was done about it."""
        lines = []
        outcomes = [s.outcome for s in self.sweeps.values()] + ([self.joint_outcome] if self.joint_outcome else [])
        for outcome in outcomes:
            for attempt in outcome.attempts:
                if attempt.lost:
                    where = attempt.node.name() if attempt.node else "an unknown node"
                    then = ("swept again from the start on another node" if attempt is not outcome.attempts[-1]
                            else "no attempt left")
                    lines.append(f"{outcome.key}: node {where} was lost during attempt {attempt.attempt} "
                                 f"({attempt.lost}); {then}")
        return lines

    def hardware_note(self) -> str | None:
        """A sentence when the models were measured on different hardware (their throughputs are then
        not comparable with each other), else ``None``."""
        kinds: dict[tuple[Any, ...], list[str]] = {}
        nodes = {m: s.node for m, s in self.sweeps.items() if s.node is not None and s.result is not None}
        for model, node in nodes.items():
            kinds.setdefault(node.hardware_key(), []).append(model)
        if len(kinds) < 2:
            return None
        parts = [f"{', '.join(ms)} on {nodes[ms[0]].hardware()}" for ms in kinds.values()]
        return ("The models were measured on different hardware (" + "; ".join(parts) + "): each winner is "
                "judged against its own node's variants only, and one model's throughput is not comparable "
                "with another's.")

    def headline(self) -> str:
        where = ", ".join(f"{m} on {s.node.name()}" for m, s in self.sweeps.items() if s.node) or "no node"
        lost = f" {len(self.losses())} node loss(es), the models swept again elsewhere." if self.losses() else ""
        failed = f" Not measured: {', '.join(self.failed)}." if self.failed else ""
        if not self.separately and self.joint is not None:
            node = self.joint_outcome.node.name() if self.joint_outcome and self.joint_outcome.node else "?"
            return f"{self.joint.headline()} (alone phases: {where}; joint phase on {node}).{lost}{failed}"
        done = [f"{m}: {s.result.headline()}" for m, s in self.sweeps.items() if s.result is not None]
        return f"{len(done)} of {len(self.models)} models swept ({where}).{lost}{failed}"

    def to_dict(self) -> dict[str, Any]:
        joint_node = self.joint_outcome.node if self.joint_outcome else None
        return {
            "exit_code": self.exit_code, "address": self.address, "models": self.models,
            "out_dir": str(self.out_dir), "separately": self.separately, "wall_s": round(self.wall_s, 2),
            "sweeps": {m: s.to_dict() for m, s in self.sweeps.items()},
            "joint": None if self.joint is None else {
                **self.joint.to_dict(), "node": joint_node.to_dict() if joint_node else None,
                "attempts": [a.to_dict() for a in self.joint_outcome.attempts] if self.joint_outcome else []},
            "losses": self.losses(), "hardware_note": self.hardware_note(),
            "failed": {key: str(o.error) for key, o in self._outcomes().items() if o.error is not None},
            "written": dict(self.written), "report": str(self.report_path) if self.report_path else None,
        }

    def _outcomes(self) -> dict[str, JobOutcome]:
        found = {m: s.outcome for m, s in self.sweeps.items()}
        if self.joint_outcome is not None:
            found["joint"] = self.joint_outcome
        return found

    def render_markdown(self) -> str:
        lines = [f"# Sweep on a Ray cluster: {', '.join(self.models)}", "",
                 f"- cluster: `{self.address}`; {'each model on its own' if self.separately else 'co-located: alone phases, then the joint phase on one node'}",
                 f"- wall time {self.wall_s:.1f} s", "", "## Result", "", self.headline(), ""]
        note = self.hardware_note()
        if note:
            lines += [note, ""]
        lines += ["| model | node | hardware | tries | result | folder |", "| --- | --- | --- | ---: | --- | --- |"]
        for model, sweep in self.sweeps.items():
            node = sweep.node
            result = sweep.result.headline() if sweep.result else f"failed: {sweep.outcome.error}"
            folder = (f"`{sweep.result.out_dir.name}/`" if sweep.result and sweep.result.out_dir != self.out_dir
                      else "this folder" if sweep.result else "–")
            lines.append(f"| {model} | {node.name() if node else '–'} | {node.hardware() if node else '–'} | "
                         f"{len(sweep.outcome.attempts)} | {result.replace('|', '/')} | {folder} |")
        if self.joint_outcome is not None:
            node = self.joint_outcome.node
            lines += ["", f"Joint phase on node {node.name() if node else '–'} ({node.hardware() if node else '–'}): "
                      + (self.joint.headline() if self.joint else f"failed: {self.joint_outcome.error}")
                      + (" See `joint.md`." if self.joint else "")]
        losses = self.losses()
        if losses:
            lines += ["", "## Nodes lost", "", *[f"- {line}" for line in losses],
                      "", "What a lost node measured never came back: nothing of it is in the results, and "
                      "nothing was written back for a model until its sweep finished on one node."]
        if self.written:
            lines += ["", "## Written back", "", "Last, once every report was written (each previous config "
                      "kept beside it as `config.pbtxt.orig-<UTC>`):", "",
                      *[f"- {m}: `{path}`" for m, path in self.written.items()]]
        lines.append("")
        return "\n".join(lines)


def _folders_for(repo: Path, models: Sequence[str], target: str | None) -> list[str]:
    """The model folders a node needs: the models, and for ``--target`` the target and, for an
    ensemble, every model its steps call."""
    names = list(models)
    if target is not None:
        names.append(target)
        path = model_folder(repo, target) / CONFIG_FILENAME
        if path.is_file():
            names += [step.model_name for step in read_config(path).ensemble_scheduling.step]
    return list(dict.fromkeys(names))


def _input_blob(settings: SweepSettings) -> tuple[bytes | None, str]:
    """A ``--input-data`` file given on this machine, to send with each job (and its name)."""
    data = settings.spec.input_data if settings.spec is not None else None
    if data is None or str(data) in ("zero", "random"):
        return None, "input_data.json"
    path = Path(data)
    try:
        return path.read_bytes(), path.name
    except OSError as exc:
        raise path_error(exc, "read the --input-data file", path) from exc


def _land(folder_bytes: bytes, target: Path, *, whole: bool) -> None:
    """Write a sweep folder that came back into ``target``: replacing the folder ``whole``, or item by
    item into a folder that holds more (the top sweep folder, with its lock and the other results)."""
    parent = target.parent if whole else target
    parent.mkdir(parents=True, exist_ok=True)
    incoming = Path(tempfile.mkdtemp(prefix=f".{target.name}.incoming-", dir=parent))
    try:
        unpack(folder_bytes, incoming)
        if whole:
            replace_folder(incoming, target)
            return
        for item in incoming.iterdir():
            if item.is_dir():
                replace_folder(item, target / item.name)
            else:
                item.replace(target / item.name)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)


def _settle_single(result: SweepResult, node: NodeInfo, repo: Path, folder: Path) -> SweepResult:
    """A model's result as if swept here: local paths, its node named."""
    result.repo, result.out_dir = repo, folder
    result.node = {**node.to_dict(), "where": f"{node.name()}, {node.hardware()}"}
    result.report_path = folder / "report.md" if result.report_path else None
    result.plot_path = folder / "sweep.png" if result.plot_path else None
    return result


def run_cluster_sweep(
    repo: str | os.PathLike[str],
    models: Sequence[str],
    settings: SweepSettings,
    cluster: ClusterSettings,
    *,
    on_event: Callable[[ClusterEvent], None] | None = None,
) -> ClusterSweepResult:
    """Sweep ``models`` of ``repo`` on the Ray cluster ``cluster.address`` (module docstring).

    Everything that can be checked before a server starts is: the configs and grids, the SLA,
    the cluster's address, a node with each model's resources, tritonkit / perf_analyzer /
    tritonserver on each such node (``ClusterError`` naming the node). ``KeyboardInterrupt`` after
    every remote server and perf_analyzer was stopped; what came back before is kept under ``out``.
    """
    started = time.monotonic()
    emit = on_event or (lambda _event: None)
    settings.validate()
    repo_path = Path(repo)
    models = list(models)
    if not models:
        raise ConfigError("no model to sweep", hint="name one or more models of the repository")
    if settings.target is not None and len(models) > 1:
        raise ConfigError("--target sweeps one composing model; give one MODEL with it")
    bases = read_bases(repo_path, models)
    grids_of(bases, settings)  # a grid the library refuses is refused here, before anything starts
    for model in models:
        settings.parsed_sla(model)
    co_located = len(models) > 1 and not cluster.separately
    shares = joint_shares(models, settings.shares) if co_located else {}
    if not co_located and (settings.shares or settings.model_slas):
        raise ConfigError("--share and --model-sla are for models swept together (without --separately)")
    needs = {m: cluster.node_resources or resources_for(bases[m]) for m in models}
    joint_need = needs[models[0]]
    for need in needs.values():
        joint_need = joint_need.union(need)
    if cluster.shared_repo is not None and not cluster.shared_repo.strip():
        raise ConfigError("--shared-repo is empty", hint="give the repository's path as every node sees it")
    input_data, input_name = _input_blob(settings)
    out_dir = settings.out_dir("-".join(models))
    with connected(cluster.address) as ray:
        for need in dict.fromkeys([*needs.values(), *([joint_need] if co_located else [])]):
            users = [m for m, n in needs.items() if n == need] or ["the joint phase"]
            check_nodes(ray, need, address=cluster.address, need_server=True, why=f"sweeping {', '.join(users)}")
        out_dir.mkdir(parents=True, exist_ok=True)
        with sweep_locks(out_dir, [model_folder(repo_path, m) for m in models] if settings.write_back else [],
                         f"perf sweep --cluster {' '.join(models)}"):
            result = _sweep_on(ray, repo_path, models, bases, settings, cluster, needs, joint_need, shares, out_dir,
                               input_data, input_name, emit, started, co_located)
    return result


def _sweep_on(ray: Any, repo: Path, models: list[str], bases: Mapping[str, mc.ModelConfig],
              settings: SweepSettings, cluster: ClusterSettings, needs: Mapping[str, NodeResources],
              joint_need: NodeResources, shares: Mapping[str, float], out_dir: Path, input_data: bytes | None,
              input_name: str, emit: Callable[[ClusterEvent], None], started: float,
              co_located: bool) -> ClusterSweepResult:
    """The sweep once connected, checked and locked: the phases, landing, reports, write-backs."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from tritonkit.perf.cluster.remote import run_sweep_job

    nodes: dict[tuple[str, int], NodeInfo] = {}

    def heard(item: tuple[Any, ...]) -> None:
        kind, key, attempt = item[0], item[1], item[2]
        if kind == "node":
            nodes[(key, attempt)] = node = NodeInfo.from_dict(item[3])
            emit(ClusterEvent("node", key, f"{key}: sweeping on node {node.name()} ({node.hardware()})"
                              + (f", attempt {attempt}" if attempt > 1 else ""), node=node))
        elif kind == "lost":
            emit(ClusterEvent("lost", key, f"{key}: node {item[3]} was lost ({item[4]})",
                              node=nodes.get((key, attempt))))
        else:
            emit(ClusterEvent(str(item[3]), key, f"{key}: {item[4]}", node=nodes.get((key, attempt)),
                              variant=item[5]))

    # On the driver's own node: the events must not die with a node lost mid-sweep.
    sink = make_event_sink(ray).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(driver_node_id(ray), soft=False)).remote()
    dispatcher = Dispatcher(ray, sink, on_event=heard, max_attempts=cluster.max_attempts,
                            cancel_grace_s=cluster.cancel_grace_s)
    task = ray.remote(run_sweep_job)
    blobs: dict[str, Any] = {}

    def repo_ref(key: str, names: Sequence[str]) -> Any:
        if cluster.shared_repo is not None:
            return None
        if key not in blobs:
            blobs[key] = ray.put(pack_folders(repo, _folders_for(repo, names, settings.target)))
        return blobs[key]

    def submitter(job: SweepJob, need: NodeResources, blob: Any) -> Callable[[int], Any]:
        def submit(attempt: int) -> Any:
            return task.options(max_retries=0, **need.ray_options()).remote(replace(job, attempt=attempt), blob, sink)
        return submit

    kind = KIND_ALONE if co_located else KIND_SINGLE
    for model in models:
        job = SweepJob(key=model, kind=kind, models=tuple(models) if co_located else (model,), settings=settings,
                       shared_repo=cluster.shared_repo, input_data=input_data, input_name=input_name)
        dispatcher.submit(model, needs[model], submitter(job, needs[model], repo_ref(model, [model])))
    outcomes = dispatcher.wait_all()
    result = ClusterSweepResult(address=cluster.address, models=models, out_dir=out_dir,
                                separately=not co_located, sweeps={})
    with os_errors("write the cluster sweep's results", out_dir):
        for model in models:
            outcome = outcomes[model]
            sweep = ModelSweep(model, outcome)
            result.sweeps[model] = sweep
            value: NodeSweep | None = outcome.value
            if value is None:
                continue
            # One model lands as a local sweep of it would: in the sweep folder itself.
            folder = out_dir / f"alone-{model}" if co_located else out_dir / model if len(models) > 1 else out_dir
            _land(value.folder, folder, whole=folder != out_dir)
            sweep.result = _settle_single(value.result, value.node, repo, folder)
            emit(ClusterEvent("done", model, f"{model}: {sweep.result.headline()}", node=value.node))
        if co_located and not result.failed:
            alone = {m: s.result for m, s in result.sweeps.items() if s.result is not None}
            job = SweepJob(key="joint", kind=KIND_JOINT, models=tuple(models), settings=settings,
                           shared_repo=cluster.shared_repo, input_data=input_data, input_name=input_name,
                           swept_alone=alone)
            dispatcher.submit("joint", joint_need, submitter(job, joint_need, repo_ref("joint", models)))
            result.joint_outcome = dispatcher.wait_all()["joint"]
            value = result.joint_outcome.value
            if value is not None:
                _land(value.folder, out_dir, whole=False)
                result.joint = value.result
        result.wall_s = time.monotonic() - started
        pending = _plan_write_backs(repo, bases, result, settings)
        result.written = {m: str(write.planned.config_path) for m, write in pending.items()}
        _write_reports(result, out_dir)
    for model, write in pending.items():  # last: a failure above leaves the repository untouched
        with os_errors("write the winner into the repository", repo):
            written = write.commit()
        emit(ClusterEvent("written", model, f"{model}: winner written to {written.config_path}"
                          + (f" (previous kept as {written.backup_path})" if written.backup_path else "")))
    return result


def _plan_write_backs(repo: Path, bases: Mapping[str, mc.ModelConfig], result: ClusterSweepResult,
                      settings: SweepSettings) -> dict[str, PendingWriteBack]:
    """What to write back, planned (nothing if anything failed, as on one machine)."""
    if not settings.write_back or result.failed:
        return {}
    if not result.separately:
        if result.joint is None:
            return {}
        return plan_joint_write_backs(repo, bases, result.joint)
    planned: dict[str, PendingWriteBack] = {}
    for model, sweep in result.sweeps.items():
        one = sweep.result
        if one is not None and one.search.winner is not None and one.commits:
            planned[model] = plan_write_back(repo, model, apply_variant(bases[model], one.search.winner.variant))
            one.write_back = planned[model].planned
    return planned


def _write_reports(result: ClusterSweepResult, out_dir: Path) -> None:
    """Each model's report and record as a local sweep writes them (with its node), the joint report,
    then the cluster's own (``cluster.md``, ``cluster.json``)."""
    for sweep in result.sweeps.values():
        one = sweep.result
        if one is None:
            continue
        one.report_path, one.plot_path = write_sweep_report(one)
        SweepStore(one.out_dir).write_summary(one.to_dict())
    if result.joint is not None:
        joint = result.joint
        joint.out_dir = out_dir
        joint.report_path = write_joint_report(out_dir, joint.render_markdown(),
                                               json.dumps(joint.to_dict(), indent=2, default=str) + "\n")
    result.report_path = atomic_write(out_dir / CLUSTER_REPORT, result.render_markdown())
    atomic_write(out_dir / CLUSTER_RECORD, json.dumps(result.to_dict(), indent=2, default=str) + "\n")
