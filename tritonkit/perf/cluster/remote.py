"""What runs on a node: a model's sweep (alone or for a joint sweep) and the joint phase, each a call
of the library (:func:`~tritonkit.perf.sweep.run_sweep`, :func:`~tritonkit.perf.sweep.joint_run.sweep_alone`,
:func:`~tritonkit.perf.sweep.run_joint_sweep`) on a node-local copy of the model folders, into a
node-local folder that comes back as bytes; plus the event sink that carries progress back.

Each task first tells the driver which node it runs on (so a lost node is named), then works in a
temporary folder of its own that it removes however it ends. A Ctrl-C of the driver reaches it as
``KeyboardInterrupt`` (``ray.cancel``): the library stops its server and perf_analyzer on the way
out; were the worker killed instead, both die with it (they are bound to their parent's life).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit._dial import PLAIN, Dial, registered
from tritonkit.perf.cluster.nodes import NodeInfo, make_probe
from tritonkit.perf.cluster.transfer import pack_contents, pack_folders, unpack
from tritonkit.perf.measure.spec import PerfSpec
from tritonkit.perf.sweep.result import SweepEvent, SweepResult
from tritonkit.perf.sweep.settings import SweepSettings

__all__ = ["KIND_ALONE", "KIND_JOINT", "KIND_SINGLE", "ClientJob", "ClientRun", "NodeSweep", "SweepJob",
           "make_event_sink", "node_here", "now_ns", "run_client_job", "run_sweep_job"]

#: A model swept on its own (``perf sweep REPO A B --cluster … --separately``): its own folder, its own winner.
KIND_SINGLE = "single"
#: A model's alone phase of a joint sweep (``OUT/alone-<model>``).
KIND_ALONE = "alone"
#: The joint phase of co-located models, on one node, after their alone phases.
KIND_JOINT = "joint"


@dataclass(frozen=True)
class SweepJob:
    """One piece of a cluster sweep. ``key``: the model (or ``joint``); ``attempt`` counts tries (a
    node lost mid-sweep means another). ``shared_repo``: a repository path every node sees (else the
    model folders come as bytes). ``input_data``: the bytes of a ``--input-data`` file given here,
    written beside the node's copy under ``input_name``. ``swept_alone``: for the joint phase, each
    model's alone sweep (measured on whichever node ran it)."""

    key: str
    kind: str
    models: tuple[str, ...]
    settings: SweepSettings
    attempt: int = 1
    shared_repo: str | None = None
    input_data: bytes | None = None
    input_name: str = "input_data.json"
    swept_alone: Mapping[str, SweepResult] | None = None


@dataclass
class NodeSweep:
    """What a job brings back: the node, the library's result, the sweep folder as bytes."""

    node: NodeInfo
    result: Any  # SweepResult, or JointResult for the joint phase
    folder: bytes
    wall_s: float


def node_here() -> NodeInfo:
    """This node, as the probe sees it, with Ray's address and resources for it."""
    import ray

    facts = make_probe()(False, [])
    node_id = str(facts["node_id"])
    known: dict[str, Any] = next((n for n in ray.nodes() if n.get("NodeID") == node_id), {})
    return NodeInfo.from_dict({**facts, "address": known.get("NodeManagerAddress", ray.util.get_node_ip_address()),
                               "resources": known.get("Resources") or {}})


def make_event_sink(ray: Any) -> Any:
    """The class of the actor that collects events from every task for the driver to print. Made
    here (and so sent by value) so that it runs on the driver's node whatever Python the node runs."""

    class EventSink:
        def __init__(self) -> None:
            self.items: list[tuple[Any, ...]] = []

        def put(self, item: tuple[Any, ...]) -> None:
            self.items.append(item)

        def drain(self) -> list[tuple[Any, ...]]:
            items, self.items = self.items, []
            return items

    return ray.remote(EventSink)


def _input_settings(job: SweepJob, work: Path) -> SweepSettings:
    """The job's settings on this node: a ``--input-data`` file given on the driver's machine is
    written here (data derived from the model file, the library derives on the node itself)."""
    settings = job.settings
    if settings.spec is None or job.input_data is None:
        return settings
    path = work / job.input_name
    path.write_bytes(job.input_data)
    return replace(settings, spec=replace(settings.spec, input_data=str(path)))


def run_sweep_job(job: SweepJob, repo_blob: bytes | None, sink: Any) -> NodeSweep:
    """Run ``job`` here (a Ray task's body); ``repo_blob``: the model folders, unless ``job.shared_repo``."""
    from tritonkit.perf.sweep import run_joint_sweep, run_sweep
    from tritonkit.perf.sweep.joint import joint_shares
    from tritonkit.perf.sweep.joint_run import grids_of, read_bases, sweep_alone

    started = time.monotonic()
    node = node_here()
    sink.put.remote(("node", job.key, job.attempt, node.to_dict()))

    def emit(event: SweepEvent) -> None:
        sink.put.remote(("event", job.key, job.attempt, event.kind, event.message, event.variant))

    work = Path(tempfile.mkdtemp(prefix=f"tritonkit-{job.kind}-"))
    try:
        repo = Path(job.shared_repo) if job.shared_repo else unpack(repo_blob or b"", work / "repo")
        out = work / "out"
        settings = replace(_input_settings(job, work), write_back=False)
        result: Any
        if job.kind == KIND_SINGLE:
            result = run_sweep(repo, job.models[0], replace(settings, out=out), on_event=emit)
            folder = pack_contents(out)
        elif job.kind == KIND_ALONE:
            model = job.key
            bases = read_bases(repo, [model])
            shares = joint_shares(list(job.models), settings.shares)
            result = sweep_alone(repo, model, bases[model], grids_of(bases, settings, job.models)[model], settings, job.models,
                                 shares, out, None, emit)
            folder = pack_contents(out / f"alone-{model}")
        else:
            result = run_joint_sweep(repo, list(job.models), replace(settings, out=out), on_event=emit,
                                     swept_alone=job.swept_alone)
            folder = pack_folders(out, [p.name for p in out.iterdir() if not p.name.startswith("alone-")])
        return NodeSweep(node=node, result=result, folder=folder, wall_s=time.monotonic() - started)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- load-test clients


def now_ns() -> int:
    """This node's wall clock (a Ray task's body: the driver measures each node's offset with it)."""
    return time.time_ns()


@dataclass(frozen=True)
class ClientJob:
    """One client's part of one step. Exactly one of ``spec`` (a ladder step, run with
    :meth:`~tritonkit.perf.measure.analyzer.PerfAnalyzer.run`) and ``argv`` (an LLM step's perf_analyzer
    options, run with :meth:`~tritonkit.perf.measure.analyzer.PerfAnalyzer.invoke` behind this node's
    own binary). ``start_at_ns``: when to start, on this node's clock. ``files``: files the options
    name (input data, by their names in ``argv`` / ``spec``), written here first. ``key_env``: an
    OpenAI endpoint's API key variable: the node starts its perf_analyzer through the keyed wrapper
    (:mod:`tritonkit.perf.llm._keyed`) with ``env`` (that variable and its key) in the wrapper's
    environment for the step. ``env`` never shows in the job's repr, a command line or a file.
    ``dial``: the server's TLS and headers (:class:`~tritonkit._dial.Dial`; its files at the same paths here)."""

    index: int
    name: str
    start_at_ns: int
    spec: PerfSpec | None = None
    argv: tuple[str, ...] = ()
    timeout_s: float | None = None
    files: Mapping[str, bytes] | None = None
    key_env: str | None = None
    env: Mapping[str, str] | None = field(default=None, repr=False)
    dial: Dial = PLAIN


@dataclass
class ClientRun:
    """What a client brings back: its node, when it started (its clock), how late, and every file it
    wrote for the step (``<name>.json`` the profile export, ``.csv``, ``.stdout``, ``.stderr``, …)."""

    index: int
    node: NodeInfo
    started_ns: int
    late_ms: float
    files: dict[str, bytes]
    steps: list[Any]  # StepResult, for a ladder step
    returncode: int | None
    duration_s: float
    argv: list[str]


def run_client_job(job: ClientJob) -> ClientRun:
    """Run one client's part of a step here (a Ray task's body), starting at ``job.start_at_ns``."""
    from tritonkit.perf.llm._keyed import keyed_command
    from tritonkit.perf.llm.loadtest import STALL_MARKER
    from tritonkit.perf.measure.analyzer import PerfAnalyzer

    node = node_here()
    work = Path(tempfile.mkdtemp(prefix=f"tritonkit-client{job.index}-"))
    try:
        local = {name: work / Path(name).name for name in (job.files or {})}
        for name, data in (job.files or {}).items():
            local[name].write_bytes(data)
        analyzer = PerfAnalyzer(work)
        wait_ns = job.start_at_ns - time.time_ns()
        if wait_ns > 0:
            time.sleep(wait_ns / 1e9)
        started = time.time_ns()
        late_ms = max(0.0, (started - job.start_at_ns) / 1e6)
        steps: list[Any] = []
        returncode: int | None
        if job.spec is not None:
            spec = job.spec
            if spec.input_data is not None and str(spec.input_data) in local:
                spec = replace(spec, input_data=str(local[str(spec.input_data)]))
            with registered(spec.url, job.dial):
                outcome = analyzer.run(spec, job.name, timeout_s=job.timeout_s)
            steps, returncode, duration_s, argv = outcome.steps, outcome.returncode, outcome.duration_s, outcome.argv
        else:
            options = [str(local[a]) if a in local else a for a in job.argv]
            export = work / f"{job.name}.json"
            options = _with_option(options, "--profile-export-file", str(export))
            consoles = (work / f"{job.name}.stdout", work / f"{job.name}.stderr")

            def stalled() -> bool:
                return any(p.exists() and STALL_MARKER in p.read_text(errors="replace") for p in consoles)

            command = [*analyzer.perf_analyzer.argv, *options]
            if job.key_env is not None:
                command = keyed_command(job.key_env, command)
            with _environment(job.env):
                invocation = analyzer.invoke(command, job.name, timeout_s=job.timeout_s, stop_when=stalled)
            returncode, duration_s, argv = invocation.returncode, invocation.duration_s, invocation.argv
        files = {p.name: p.read_bytes() for p in work.iterdir() if p.is_file() and p.name.startswith(job.name + ".")}
        return ClientRun(index=job.index, node=node, started_ns=started, late_ms=late_ms, files=files, steps=steps,
                         returncode=returncode, duration_s=duration_s, argv=list(argv))
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """``env`` in this process's environment for the block (what perf_analyzer, started in it,
    inherits), the environment as it was afterwards: a Ray worker lives on for other tasks."""
    before = {name: os.environ.get(name) for name in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _with_option(argv: list[str], option: str, value: str) -> list[str]:
    """``argv`` with ``option``'s value replaced (or the option added)."""
    if option in argv:
        at = argv.index(option)
        return [*argv[: at + 1], value, *argv[at + 2:]]
    return [*argv, option, value]
