"""More load than one machine makes: ``perf run MODEL --url URL --cluster ADDR --clients N``.

Every step of the ladder (and every LLM step) runs as N perf_analyzer clients on N nodes at once
against the one endpoint, each with its share of the concurrency or request rate
(:func:`~tritonkit.perf.cluster.merge.split_load`), started together at one instant on the driver's
clock (each node's offset measured first, :mod:`~tritonkit.perf.cluster.clock`, and removed). Their
profile exports come back and are merged (:func:`~tritonkit.perf.cluster.merge.merge_exports`): the
step's percentiles are over every request of every client, its throughput over the window all were
measuring at once. Each client measures exactly three windows (started together, theirs coincide)
and the step's steadiness is judged on every client's requests together, by perf_analyzer's rule
(:meth:`~tritonkit.perf.cluster.merge.MergedStep.unstable_reason`). Everything else is the one pipeline a local run goes through — the ladder and its
stop rules, the judge, ``result.json`` and the report, resuming — because :class:`ClusterAnalyzer`
is the run's load generator (:class:`~tritonkit.perf.pipeline.RunSetup` ``load_generator``).
``result.json`` names each client (``"clients": [{"node_id", "host", "requests", …}]``, with its
clock offset and its share of each step); each client's own files are kept under
``clients/<n>-<node>/`` beside the merged export.

Example::

    from tritonkit.perf.cluster import ClusterSettings, run_cluster_perf
    from tritonkit.perf.command import LoadTestSettings

    test = run_cluster_perf("resnet", LoadTestSettings(url="10.0.0.9:8001", sla="p99<=50ms", concurrency="8:64"),
                            ClusterSettings(address="10.0.0.5:6379"), clients=4)
    print(test.exit_code, test.run.result.clients if test.run else None)
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tritonkit._dial import dial_for
from tritonkit._fs import atomic_write
from tritonkit._values import CLIENT_NODES
from tritonkit.errors import ConfigError, PerfError, TritonKitError
from tritonkit.perf.cluster.clock import ClockOffset, measure_offsets
from tritonkit.perf.cluster.merge import MEASURED_WINDOWS, MergedStep, merge_exports, split_load
from tritonkit.perf.cluster.nodes import (
    NodeInfo,
    NodeResources,
    check_cluster_address,
    check_nodes,
    connected,
)
from tritonkit.perf.cluster.remote import ClientJob, ClientRun, run_client_job
from tritonkit.perf.measure.analyzer import AnalyzerOutcome, Invocation, PerfAnalyzer, utc_now
from tritonkit.perf.measure.ladder import first_name, is_warmup
from tritonkit.perf.measure.metrics import MetricsWatcher, step_metrics
from tritonkit.perf.measure.parse import ConsoleSummary, parse_profile_export, with_windows
from tritonkit.perf.measure.percentiles import latency_stats
from tritonkit.perf.measure.result import ClientBreakdown, ServerBreakdown, StepResult
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, RequestIntervals, RequestRateRange
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall

__all__ = ["MIN_OVERLAP", "ClusterAnalyzer", "run_cluster_perf"]

#: A step counts only when the window every client measured at once is at least this share of a
#: client's own measured windows: less, and the merged numbers describe mostly fewer clients.
MIN_OVERLAP = 0.5
#: How far ahead the start instant is set (every client's worker must be ready by then).
LEAD_S = 3.0
#: A stability tolerance no window misses: each client measures exactly its three windows.
ANY_WINDOW_PCT = 10_000.0
#: perf_analyzer's own tolerance when a step names none (``--stability-percentage`` default).
PERF_ANALYZER_STABILITY_PCT = 10.0

Progress = Callable[[str], None]


def _option(argv: Sequence[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def _replace_option(argv: list[str], name: str, value: str) -> list[str]:
    at = argv.index(name)
    return [*argv[: at + 1], value, *argv[at + 2:]]


def _weighted(values: Sequence[tuple[float | None, int]]) -> float | None:
    """The mean of per-client values weighted by their request counts (``None`` when none has one)."""
    known = [(v, n) for v, n in values if v is not None and n > 0]
    total = sum(n for _, n in known)
    return None if total == 0 else sum(v * n for v, n in known) / total


class ClusterAnalyzer(PerfAnalyzer):
    """A load generator made of ``nodes``, one perf_analyzer client on each (see the module docstring).

    ``offsets``: each node's clock offset (same order). ``perf_analyzer``: recorded in the result as
    the tool (each node runs its own). ``metrics_url`` is scraped from here during each step.
    """

    def __init__(self, results_dir: str | Path, *, ray: Any, nodes: Sequence[NodeInfo], offsets: Sequence[ClockOffset],
                 perf_analyzer: PerfAnalyzerInstall, metrics_url: str | None = None, progress: Progress | None = None,
                 cancel_grace_s: float = 20.0) -> None:
        super().__init__(results_dir, perf_analyzer=perf_analyzer, metrics_url=metrics_url, progress=progress)
        self.ray = ray
        self.nodes = list(nodes)
        self.offsets = list(offsets)
        self.cancel_grace_s = cancel_grace_s
        self._task = ray.remote(run_client_job)
        self._clients: list[dict[str, Any]] = [
            {"index": i, "node_id": n.node_id, "host": n.host, "address": n.address, "requests": 0,
             "perf_analyzer": n.perf_analyzer, **o.to_dict(), "steps": []}
            for i, (n, o) in enumerate(zip(self.nodes, self.offsets, strict=True))]

    def clients_record(self) -> list[dict[str, object]]:
        return [dict(c, steps=list(c["steps"])) for c in self._clients]

    # ------------------------------------------------------------------ dispatch

    def _dispatch(self, jobs: Sequence[ClientJob], timeout_s: float | None) -> tuple[list[ClientRun], list[Any]]:
        """Run ``jobs`` (one per client, pinned to its node) and wait for all; the server's scrapes
        taken meanwhile. A client's tritonkit error is raised as itself; a lost node as ``PerfError``."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        refs = {self._task.options(num_cpus=1, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            self.nodes[job.index].node_id, soft=False)).remote(job): job for job in jobs}
        watcher = MetricsWatcher(self.metrics_url, interval_s=self.metrics_interval_s).start() if self.metrics_url else None
        deadline = None if timeout_s is None else time.monotonic() + timeout_s + LEAD_S + 60.0
        runs: list[ClientRun] = []
        try:
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=0.5)
                for ref in ready:
                    runs.append(self._get(ref, refs[ref]))
                if deadline is not None and time.monotonic() > deadline:
                    raise PerfError(f"{len(pending)} client(s) did not finish in time", hint="see the nodes' Ray logs")
        except BaseException:
            self._cancel(list(refs))
            raise
        finally:
            if watcher is not None:
                watcher.stop()
        return sorted(runs, key=lambda r: r.index), list(watcher.snapshots) if watcher else []

    def _get(self, ref: Any, job: ClientJob) -> ClientRun:
        ray = self.ray
        node = self.nodes[job.index]
        try:
            run: ClientRun = ray.get(ref)
            return run
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, KeyboardInterrupt):
                raise KeyboardInterrupt from None
            if isinstance(cause, TritonKitError):
                cause.message = f"client {job.index} on node {node.name()}: {cause.message}"
                raise cause from None
            raise PerfError(f"client {job.index} on node {node.name()} failed: {type(cause).__name__}: {cause}") from None
        except ray.exceptions.RayError as exc:
            raise PerfError(f"client {job.index}'s node {node.name()} was lost mid-step: "
                            f"{str(exc).splitlines()[0][:200]}",
                            hint="bring the node back or run with fewer --clients") from None

    def _cancel(self, refs: list[Any]) -> None:
        for ref in refs:
            try:
                self.ray.cancel(ref, force=False)
            except Exception:  # noqa: BLE001 - best effort: a finished task cannot be cancelled
                continue
        _, left = self.ray.wait(refs, num_returns=len(refs), timeout=self.cancel_grace_s)
        for ref in left:
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001 - best effort, as above
                continue

    def _keep_files(self, runs: Sequence[ClientRun]) -> list[str]:
        """Each client's files under ``clients/<n>-<node>/``; their paths relative to the folder."""
        kept = []
        for run in runs:
            folder = self.results_dir / "clients" / f"{run.index}-{self.nodes[run.index].short_id}"
            folder.mkdir(parents=True, exist_ok=True)
            for name, data in run.files.items():
                (folder / name).write_bytes(data)
                kept.append(str((folder / name).relative_to(self.results_dir)))
        return kept

    @staticmethod
    def _jobs(loads: Sequence[float], make: Callable[[int, float], ClientJob]) -> list[ClientJob]:
        """A job for each client with a share of the load (a concurrency below the client count leaves some idle)."""
        return [make(i, share) for i, share in enumerate(loads) if share > 0]

    def _start_ns(self) -> int:
        return time.time_ns() + int(LEAD_S * 1e9)

    # ------------------------------------------------------------------ a ladder step

    def run(self, spec: PerfSpec, name: str, *, timeout_s: float | None = None,
            model_for_metrics: str | None = None) -> AnalyzerOutcome:
        """One ladder step (or the warm-up) as N clients at once, merged into one step."""
        load = spec.load
        if isinstance(load, RequestIntervals):
            raise ConfigError(f"{name}: a request-intervals schedule is an LLM step, not a ladder step")
        total = float(load.values()[0])
        whole = isinstance(load, ConcurrencyRange)
        shares = split_load(total, len(self.nodes), whole=whole)
        files = self._files(spec.input_data)
        start_ns = self._start_ns()
        started_utc = utc_now()

        def job(i: int, share: float) -> ClientJob:
            part: ConcurrencyRange | RequestRateRange = (
                ConcurrencyRange(int(share)) if whole else replace(load, start=share, end=None))  # type: ignore[arg-type]
            # Exactly three windows each, accepted as they come: started together, the clients' windows
            # then coincide, and the step's steadiness is judged on all of them together (_merge_step).
            fixed = replace(spec, load=part, stability_percentage=ANY_WINDOW_PCT, max_trials=MEASURED_WINDOWS)
            return ClientJob(index=i, name=name, start_at_ns=start_ns + self.offsets[i].offset_ns,
                             spec=fixed, timeout_s=timeout_s, files=files, dial=dial_for(spec.url))

        jobs = self._jobs(shares, job)
        self._say(f"[{name}] {len(jobs)} clients at {', '.join(f'{s:g}' for s in shares if s > 0)} "
                  f"({'concurrency' if whole else 'req/s'} each), starting together")
        runs, snapshots = self._dispatch(jobs, timeout_s)
        raw = self._keep_files(runs)
        step = self._merge_step(spec, name, total, whole, runs)
        if self.metrics_url:
            step.metrics = step_metrics(snapshots, model_for_metrics or spec.model)
        raw += [p.name for p in (self.results_dir / f"{name}.json",) if p.exists()]
        step.raw_files = raw
        step.started_utc = started_utc
        step.duration_s = max((r.duration_s for r in runs), default=0.0)
        self._say(f"[{name}] {len(runs)} clients: " + (
            f"{step.throughput_per_s:,.1f} infer/s, p99 {step.latency.p99_ms:.2f} ms"
            if step.throughput_per_s is not None and step.latency is not None else "nothing measured"))
        return AnalyzerOutcome(name=name, argv=runs[0].argv if runs else [], returncode=0, duration_s=step.duration_s,
                               started_utc=started_utc, steps=[step], console=ConsoleSummary(),
                               unstable_loads=[] if step.stable else [total], raw_files=raw)

    def _files(self, input_data: str | Path | None) -> dict[str, bytes] | None:
        """A data file the options name, to send along (by its name in the options)."""
        if input_data is None or str(input_data) in ("zero", "random"):
            return None
        path = Path(input_data)
        if not path.is_file():
            raise ConfigError(f"the input data file {path} does not exist", hint="pass an existing --input-data file")
        return {str(input_data): path.read_bytes()}

    def _merge_step(self, spec: PerfSpec, name: str, total: float, whole: bool, runs: Sequence[ClientRun]) -> StepResult:
        """The clients' step as one: merged percentiles and throughput, or why there are none."""
        mode = "concurrency" if whole else "request_rate"
        client_steps = [next((s for s in run.steps), None) for run in runs]
        failed = [(run, s) for run, s in zip(runs, client_steps, strict=True) if s is not None and s.error_count]
        if failed:
            return StepResult(load_mode=mode, load_value=total, throughput_per_s=None, latency=None,
                              error_count=sum(s.error_count for _, s in failed),
                              error_note="; ".join(f"client {run.index} on {self.nodes[run.index].address}: "
                                                   f"{s.error_note}" for run, s in failed),
                              failure=failed[0][1].failure, failure_note=failed[0][1].failure_note)
        exports = [run.files.get(f"{name}.json") for run in runs]
        unstable = [f"client {run.index} on {self.nodes[run.index].address}: "
                    + ((s.unstable_note if s is not None else None) or "unstable")
                    for run, s in zip(runs, client_steps, strict=True) if s is None or not s.stable]
        if any(e is None for e in exports):
            return StepResult(load_mode=mode, load_value=total, throughput_per_s=None, latency=None, stable=False,
                              unstable_note="; ".join(unstable) or "a client wrote no profile export")
        merged = merge_exports([json.loads(e or b"{}") for e in exports], [self.offsets[r.index].offset_ns for r in runs])
        atomic_write(self.results_dir / f"{name}.json", json.dumps(merged.export) + "\n")
        experiment = parse_profile_export(self.results_dir / f"{name}.json")[0]
        counted = experiment.request_count > 0 and experiment.measured_duration_s > 0
        step = StepResult(
            load_mode=mode, load_value=total,
            throughput_per_s=experiment.request_count * spec.batch_size / experiment.measured_duration_s if counted else None,
            latency=latency_stats(experiment.latencies_ms) if counted else None,
            request_count=experiment.request_count,
            server=ServerBreakdown(**{k: _weighted([(getattr(s.server, k), n) for s, n in self._counted(client_steps, merged)])
                                      for k in ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us")}),
            client=ClientBreakdown(**{k: _weighted([(getattr(s.client, k), n) for s, n in self._counted(client_steps, merged)])
                                      for k in ("send_us", "network_server_us", "recv_us")}),
        )
        if counted:  # the merged requests' windows give each figure its interval, as a local step's do
            with_windows(step, experiment.windows(spec.batch_size), experiment.latencies_ms)
        if merged.window_ns is None or merged.overlap < MIN_OVERLAP:
            unstable.append(f"the clients measured at once for {merged.window_s:.2f} s, "
                            f"{100 * merged.overlap:.0f} % of a client's measured windows (less than "
                            f"{100 * MIN_OVERLAP:.0f} %)")
        elif not is_warmup(name):
            wobble = merged.unstable_reason(spec.stability_percentage or PERF_ANALYZER_STABILITY_PCT)
            if wobble:
                unstable.append(wobble)
        if unstable:
            step.stable, step.unstable_note = False, "; ".join(unstable)
        step.warnings.append(self._shares_line(runs, merged, mode))
        late = [f"client {r.index} {r.late_ms:.0f} ms" for r in runs if r.late_ms > 100]
        if late:
            step.warnings.append("started late: " + ", ".join(late) + " (its worker was not ready at the instant)")
        if not is_warmup(name):
            self._record(name, runs, merged, spec.batch_size, step.stable)
        return step

    @staticmethod
    def _counted(steps: Sequence[StepResult | None], merged: MergedStep) -> list[tuple[StepResult, int]]:
        return [(s, n) for s, n in zip(steps, merged.requests, strict=True) if s is not None]

    def _shares_line(self, runs: Sequence[ClientRun], merged: MergedStep, mode: str) -> str:
        parts = [f"{self.nodes[r.index].address} {mode.replace('_', ' ')} {self._share(r):g}: {n} requests"
                 for r, n in zip(runs, merged.requests, strict=True)]
        return (f"{len(runs)} clients measured together for {merged.window_s:.2f} s "
                f"({', '.join(parts)}); clock offsets removed, each known to "
                f"±{max(self.offsets[r.index].uncertainty_ns for r in runs) / 1e6:.1f} ms")

    @staticmethod
    def _share(run: ClientRun) -> float:
        step = next(iter(run.steps), None)
        return float(step.load_value) if step is not None else 0.0

    def _record(self, name: str, runs: Sequence[ClientRun], merged: MergedStep, batch_size: int, stable: bool) -> None:
        """Each client's share of step ``name``; an attempt the ladder makes again (an unstable step,
        ``<name>-retry<n>``) replaces the one before, as it does in the result."""
        step = first_name(name)
        for run, counted in zip(runs, merged.requests, strict=True):
            client = self._clients[run.index]
            earlier = [s for s in client["steps"] if s["step"] == step]
            client["steps"] = [s for s in client["steps"] if s["step"] != step]
            client["requests"] += counted - sum(s["requests"] for s in earlier)
            client["steps"].append({
                "step": step, "name": name, "stable": stable, "load": self._share(run), "requests": counted,
                "throughput_per_s": round(counted * batch_size / merged.window_s, 3) if merged.window_s > 0 else None,
                "window_s": round(merged.window_s, 3), "late_ms": round(run.late_ms, 1),
                "started_utc": datetime.fromtimestamp((run.started_ns - self.offsets[run.index].offset_ns) / 1e9,
                                                      timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")})

    # ------------------------------------------------------------------ an LLM step

    def invoke(self, argv: list[str], name: str, *, timeout_s: float | None = None,
               stop_when: Callable[[], bool] | None = None, settle_s: float = 0.0,
               server_url: str | None = None) -> Invocation:
        """One LLM step (a full perf_analyzer command) as N clients, their exports merged into the one
        the command names; ``stop_when`` is the clients' own (each watches its console for a stall).
        ``server_url`` is not used: the clients run on other machines, so this machine's load says
        nothing of theirs. A command through the keyed wrapper (an OpenAI endpoint's API key) runs
        through it on each node too, the key in the client job's environment (:class:`ClientJob`)."""
        from tritonkit.perf.llm._keyed import key_environment, split_keyed

        key_env, command = split_keyed(argv)
        try:
            env = key_environment(key_env) if key_env is not None else None
        except ValueError as exc:
            raise ConfigError(f"--api-key-env: {exc}", hint=f"export {key_env}=<the server's key>") from None
        prefix = list(self.perf_analyzer.argv)
        options = command[len(prefix):] if command[: len(prefix)] == prefix else command
        if "--request-intervals" in options:
            raise ConfigError("a traffic shape cannot be split over a cluster's clients yet",
                              hint="drop --traffic (concurrency levels are split), or run it without --cluster")
        level = int(str(_option(options, "--concurrency-range") or "1").split(":")[0])
        shares = split_load(level, len(self.nodes), whole=True)
        counts = split_load(float(_option(options, "--request-count") or level), len(self.nodes), whole=True)
        warm = _option(options, "--warmup-request-count")
        warms = split_load(float(warm), len(self.nodes), whole=True) if warm else None
        export = Path(_option(options, "--profile-export-file") or self.results_dir / f"{name}.json")
        files = self._files(_option(options, "--input-data"))
        start_ns = self._start_ns()
        wall0_ns, mono0_s = start_ns, time.monotonic() + LEAD_S

        def job(i: int, share: float) -> ClientJob:
            mine = _replace_option(options, "--concurrency-range", f"{int(share)}:{int(share)}:1") \
                if "--concurrency-range" in options else list(options)
            if "--request-count" in mine:
                mine = _replace_option(mine, "--request-count", str(max(int(counts[i]), int(share))))
            if warms is not None:
                mine = _replace_option(mine, "--warmup-request-count", str(int(warms[i])))
            return ClientJob(index=i, name=name, start_at_ns=start_ns + self.offsets[i].offset_ns, argv=tuple(mine),
                             timeout_s=timeout_s, files=_share_of(files, i, len(self.nodes)), key_env=key_env, env=env)

        jobs = self._jobs(shares, job)
        runs, snapshots = self._dispatch(jobs, timeout_s)
        if settle_s > 0 and self.metrics_url:
            watcher = MetricsWatcher(self.metrics_url, interval_s=self.metrics_interval_s).start()
            time.sleep(settle_s)
            watcher.stop()
            snapshots += list(watcher.snapshots)
        self._keep_files(runs)
        stdout, stderr = self.results_dir / f"{name}.stdout", self.results_dir / f"{name}.stderr"
        for path, kind in ((stdout, "stdout"), (stderr, "stderr")):
            atomic_write(path, "".join(f"== client {r.index} on {self.nodes[r.index].name()} ==\n"
                                       + r.files.get(f"{name}.{kind}", b"").decode(errors="replace") for r in runs))
        atomic_write(self.results_dir / f"{name}.argv.json", json.dumps(argv, indent=1) + "\n")
        codes = [r.returncode for r in runs]
        exports = [r.files.get(f"{name}.json") for r in runs]
        if all(e is not None for e in exports) and all(c == 0 for c in codes):
            merged = merge_exports([json.loads(e or b"{}") for e in exports],
                                   [self.offsets[r.index].offset_ns for r in runs])
            atomic_write(export, json.dumps(merged.export) + "\n")
            for run in runs:
                data = json.loads(run.files[f"{name}.json"])
                total = sum(len(e.get("requests") or []) for e in data.get("experiments") or [])
                self._clients[run.index]["requests"] += total
                self._clients[run.index]["steps"].append({"name": name, "load": self._llm_share(run), "requests": total,
                                                          "late_ms": round(run.late_ms, 1)})
        returncode = next((c for c in codes if c not in (0, None)), None if None in codes else 0)
        return Invocation(name=name, argv=list(argv), returncode=returncode, stopped=None in codes,
                          started_utc=utc_now(), wall0_ns=wall0_ns, mono0_s=mono0_s,
                          duration_s=max((r.duration_s for r in runs), default=0.0), cpu_pct=None,
                          snapshots=snapshots, stdout_path=stdout, stderr_path=stderr)

    @staticmethod
    def _llm_share(run: ClientRun) -> float:
        value = _option(run.argv, "--concurrency-range")
        return float(value.split(":")[0]) if value else 0.0


def _remote_tool(nodes: Sequence[NodeInfo]) -> PerfAnalyzerInstall:
    """The perf_analyzer the result names: the nodes' (each runs its own)."""
    versions = sorted({n.perf_analyzer for n in nodes})
    return PerfAnalyzerInstall(argv=("perf_analyzer",), source="cluster", mode="remote",
                               binary=Path(nodes[0].perf_analyzer_binary or "perf_analyzer"),
                               version=", ".join(versions) or None,
                               notes=(f"one perf_analyzer on each of {len(nodes)} nodes",))


@contextlib.contextmanager
def cluster_load_generators(cluster: Any, *, clients: int, endpoint: str, metrics_url: str | None,
                            progress: Progress | None = None
                            ) -> Iterator[tuple[Callable[[Path], PerfAnalyzer], PerfAnalyzerInstall]]:
    """Connected to ``cluster`` for the block: a maker of :class:`ClusterAnalyzer` load generators
    (``clients`` nodes with a CPU, or ``cluster.node_resources``, each with a route to ``endpoint``;
    their clock offsets measured once) and the perf_analyzer install recorded as the tool."""
    need = cluster.node_resources or NodeResources({"CPU": 1.0})
    with connected(cluster.address) as ray:
        nodes = check_nodes(ray, need, address=cluster.address, need_server=False, count=clients,
                            why=f"--clients {clients}", endpoints=[endpoint])[:clients]
        offsets = measure_offsets(ray, [n.node_id for n in nodes])
        tool = _remote_tool(nodes)

        def generator(folder: Path) -> PerfAnalyzer:
            return ClusterAnalyzer(folder, ray=ray, nodes=nodes, offsets=offsets, perf_analyzer=tool,
                                   metrics_url=metrics_url, progress=progress, cancel_grace_s=cluster.cancel_grace_s)

        yield generator, tool


def run_cluster_perf(model: str, settings: Any, cluster: Any, *, clients: int, llm: Any = None,
                     dry_run: bool = False, progress: Progress | None = None,
                     on_step: Callable[[Any], None] | None = None) -> Any:
    """Load-test ``model`` as ``perf run`` does (``settings``: a :class:`~tritonkit.perf.command.LoadTestSettings`;
    ``llm``: an :class:`~tritonkit.perf.llm.settings.LLMSettings` for ``--llm``), every step from
    ``clients`` nodes of the cluster ``cluster.address`` at once (module docstring). Returns what
    :func:`~tritonkit.perf.command.load_test` (or ``llm_load_test``) returns.

    Before anything is sent: the cluster must be reachable and have ``clients`` nodes with a CPU
    (``cluster.node_resources``), each with tritonkit and perf_analyzer and a route to the endpoint
    (``ClusterError`` naming the node otherwise)."""
    from tritonkit.perf.command import llm_load_test, load_test

    CLIENT_NODES.check(clients, "--clients")
    check_cluster_address(cluster.address)  # a dry run checks what a real run would
    if llm is not None and llm.traffic is not None:
        raise ConfigError("a traffic shape cannot be split over a cluster's clients yet",
                          hint="drop --traffic (concurrency levels are split), or run it without --cluster")
    # Outputs in system shared memory only work when perf_analyzer and the server share a machine.
    settings = replace(settings, keep_outputs=True)
    if dry_run:
        return (llm_load_test(model, llm, settings, dry_run=True) if llm is not None
                else load_test(model, settings, dry_run=True))
    with cluster_load_generators(cluster, clients=clients, endpoint=settings.target_url(),
                                 metrics_url=settings.metrics_url, progress=progress) as (generator, tool):
        settings = replace(settings, perf_analyzer=tool)
        if llm is not None:
            return llm_load_test(model, llm, settings, progress=progress, load_generator=generator)
        return load_test(model, settings, progress=progress, on_step=on_step, load_generator=generator)


def _share_of(files: dict[str, bytes] | None, index: int, clients: int) -> dict[str, bytes] | None:
    """An LLM step's input data for client ``index`` of ``clients``: its entries from its own share on,
    so that the clients, each starting at its file's first entry, do not send the same (salted) prompts."""
    if not files or clients < 2:
        return files
    out = dict(files)
    for name, raw in files.items():
        data = json.loads(raw).get("data")
        cut = index * len(data) // clients if isinstance(data, list) else 0
        if cut:
            out[name] = json.dumps({"data": data[cut:] + data[:cut]}).encode()
    return out
