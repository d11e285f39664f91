"""The Ray cluster as the toolkit sees it: one connection, its nodes, what each can run.

Ray is imported here and nowhere else at module level of the cluster layer's driver side
(:func:`import_ray`): tritonkit works without it, and a cluster option used without it is one
``MissingComponentError`` naming ``pip install 'tritonkit[cluster]'``.

Every piece of work goes to a node that was *checked first*: :func:`check_nodes` runs a probe on
each node that has the resources asked (a task pinned to it, needing no CPU) and refuses, naming
the node (its Ray node id, address and host), one without tritonkit (the probe is sent by value,
so it runs there even when tritonkit does not), without perf_analyzer, or without tritonserver
when a server is to run there — before any server starts anywhere.
"""

from __future__ import annotations

import contextlib
import math
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonkit._optional import require_module
from tritonkit._values import excerpt, host_port_problem
from tritonkit.errors import ClusterError, ConfigError

__all__ = [
    "CLUSTER_EXTRA_HINT",
    "NodeInfo",
    "NodeResources",
    "check_cluster_address",
    "check_nodes",
    "connected",
    "import_ray",
    "parse_node_resources",
]

#: How to install what the cluster options need.
CLUSTER_EXTRA_HINT = "pip install 'tritonkit[cluster]' (Ray 2.60 or later) on this machine and on every node"
#: How long a node may take to answer its probe (a busy node starts a worker process first).
PROBE_TIMEOUT_S = 120.0
#: How long the cluster's address may take to accept a TCP connection.
CONNECT_TIMEOUT_S = 10.0


def import_ray() -> Any:
    """The ``ray`` module, or ``MissingComponentError`` saying how to install it."""
    return require_module("ray", "the cluster options need Ray, which is not installed here", CLUSTER_EXTRA_HINT)


# ---------------------------------------------------------------------------- resources


@dataclass(frozen=True)
class NodeResources:
    """What one piece of work needs of the node it runs on, in Ray's resource names.

    ``CPU`` and ``GPU`` are Ray's logical CPUs and GPUs (a task holds them while it runs); any
    other key is a custom resource a node was started with (``ray start --resources``).
    """

    amounts: Mapping[str, float] = field(default_factory=lambda: {"CPU": 1.0})

    def __hash__(self) -> int:  # a mapping field: hashed by its items (equal needs share one check)
        return hash(tuple(sorted(self.amounts.items())))

    @property
    def cpus(self) -> float:
        return float(self.amounts.get("CPU", 0.0))

    @property
    def gpus(self) -> float:
        return float(self.amounts.get("GPU", 0.0))

    def custom(self) -> dict[str, float]:
        """The resources other than CPU and GPU."""
        return {k: float(v) for k, v in self.amounts.items() if k not in ("CPU", "GPU")}

    def fits(self, totals: Mapping[str, float]) -> bool:
        """Whether a node with ``totals`` (Ray's ``Resources`` of the node) can ever run this."""
        return all(float(totals.get(name, 0.0)) >= amount for name, amount in self.amounts.items() if amount > 0)

    def union(self, other: NodeResources) -> NodeResources:
        """The larger of each resource (one node that can run either, and both phases of a joint sweep)."""
        names = set(self.amounts) | set(other.amounts)
        return NodeResources({n: max(float(self.amounts.get(n, 0.0)), float(other.amounts.get(n, 0.0)))
                              for n in sorted(names)})

    def ray_options(self) -> dict[str, Any]:
        """The ``.options(...)`` of a Ray task that needs this."""
        options: dict[str, Any] = {"num_cpus": self.cpus, "num_gpus": self.gpus}
        if self.custom():
            options["resources"] = self.custom()
        return options

    def describe(self) -> str:
        """``GPU=1,CPU=1`` (the form ``--node-resources`` takes)."""
        return ",".join(f"{name}={amount:g}" for name, amount in self.amounts.items()) or "nothing"


def parse_node_resources(text: str, *, option: str = "--node-resources") -> NodeResources:
    """``GPU=1,CPU=2,accelerator_type:H100=1`` as :class:`NodeResources`; CPU defaults to 1 (a
    sweep holds one for its server and perf_analyzer). A malformed item is a ``ConfigError`` naming it."""
    amounts: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        try:
            amount = float(value)
        except ValueError:
            amount = float("nan")
        if not sep or not name.strip() or not math.isfinite(amount) or amount < 0:
            raise ConfigError(f"{option}: {item!r} is not NAME=AMOUNT (a number >= 0)",
                              hint=f"e.g. {option} GPU=1 or {option} CPU=2,GPU=1")
        amounts[name.strip()] = amount
    amounts.setdefault("CPU", 1.0)
    return NodeResources(amounts)


# ---------------------------------------------------------------------------- connection


def check_cluster_address(address: str, where: str = "--cluster") -> str:
    """``address`` when it names a Ray cluster as :func:`connected` takes it: ``auto``, ``HOST:PORT``
    of its head (an IPv6 host in brackets, the port in ASCII digits) or ``ray://HOST:PORT`` (Ray
    Client); else a ``ConfigError`` naming ``where``. A dry run checks it as a real run does."""
    if address == "auto":
        return address
    scheme, sep, rest = address.partition("://")
    problem = host_port_problem(rest if sep else address)
    if sep and scheme != "ray":
        problem = f"the only scheme Ray takes is ray:// (Ray Client), not {excerpt(scheme + '://')}"
    if problem is not None:
        raise ConfigError(f"{where} {excerpt(address)} is not a Ray address (HOST:PORT, ray://HOST:PORT or 'auto'): "
                          f"{problem}",
                          hint="pass the head node's address as 'ray start --head' printed it, e.g. 10.0.0.5:6379 "
                               "([fd00::5]:6379 for IPv6)")
    return address


def _check_reachable(address: str) -> None:
    """Refuse at once an address nothing answers on (Ray itself would retry for a minute)."""
    check_cluster_address(address)
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {reason}",
                           hint="start its head with 'ray start --head --port PORT' and pass that HOST:PORT, "
                                "or check the firewall lets this machine reach the head's GCS port") from exc


@contextlib.contextmanager
def connected(address: str) -> Iterator[Any]:
    """Connected to the Ray cluster at ``address`` (``auto``: the one this machine belongs to, as
    ``RAY_ADDRESS`` or a local ``ray start`` says) for the block; yields the ``ray`` module.

    A driver already connected (a library caller's own ``ray.init``) is used as it is and left
    connected; otherwise the connection made here is closed at the end. Never starts a cluster.
    """
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    _check_reachable(address)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=True,
                 include_dashboard=False)
    except (ConnectionError, RuntimeError, TimeoutError, ValueError) as exc:
        where = "this machine's cluster (RAY_ADDRESS or a local 'ray start')" if address == "auto" else address
        raise ClusterError(f"cannot connect to the Ray cluster at {where}: {str(exc).splitlines()[0][:300]}",
                           hint="check the address ('ray status' on the head prints it) and that Ray here is "
                                "the cluster's version") from exc
    try:
        yield ray
    finally:
        ray.shutdown()


# ---------------------------------------------------------------------------- nodes


@dataclass(frozen=True)
class NodeInfo:
    """One node as its probe saw it. ``node_id``: Ray's; ``address``: the node's IP as Ray knows it;
    ``host``: its host name; ``cpu_cores``/``cpu_model``/``gpus``: the machine (GPU names from
    ``nvidia-smi -L``); ``resources``: Ray's totals for the node; ``perf_analyzer`` its version there
    (``perf_analyzer_binary`` where), ``server`` the tritonserver binary. ``problems``: what it lacks."""

    node_id: str
    address: str
    host: str = ""
    cpu_cores: int = 0
    cpu_model: str = ""
    gpus: tuple[str, ...] = ()
    resources: Mapping[str, float] = field(default_factory=dict)
    tritonkit_version: str = ""
    perf_analyzer: str = ""
    perf_analyzer_binary: str = ""
    server: str = ""
    problems: tuple[str, ...] = ()

    @property
    def short_id(self) -> str:
        return self.node_id[:8]

    def name(self) -> str:
        """``3f2a1b4c (10.0.0.7, gpu-7)``: how messages and reports name the node."""
        host = f", {self.host}" if self.host and self.host != self.address else ""
        return f"{self.short_id} ({self.address}{host})"

    def hardware(self) -> str:
        """``2 CPU cores (Xeon …), 1 GPU (NVIDIA H100 80GB HBM3)``."""
        cpu = f"{self.cpu_cores} CPU cores" + (f" ({self.cpu_model})" if self.cpu_model else "")
        if not self.gpus:
            return cpu + ", no GPU"
        names = sorted(set(self.gpus))
        return cpu + f", {len(self.gpus)} GPU ({', '.join(names)})"

    def hardware_key(self) -> tuple[Any, ...]:
        """What makes two nodes the same hardware for a measurement (not their ids)."""
        return (self.cpu_cores, self.cpu_model, tuple(sorted(self.gpus)))

    def to_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "address": self.address, "host": self.host, "cpu_cores": self.cpu_cores,
                "cpu_model": self.cpu_model, "gpus": list(self.gpus), "resources": dict(self.resources),
                "tritonkit_version": self.tritonkit_version, "perf_analyzer": self.perf_analyzer,
                "perf_analyzer_binary": self.perf_analyzer_binary, "server": self.server}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeInfo:
        return cls(node_id=str(data["node_id"]), address=str(data.get("address", "")), host=str(data.get("host", "")),
                   cpu_cores=int(data.get("cpu_cores", 0)), cpu_model=str(data.get("cpu_model", "")),
                   gpus=tuple(str(g) for g in data.get("gpus", ())),
                   resources={str(k): float(v) for k, v in dict(data.get("resources") or {}).items()},
                   tritonkit_version=str(data.get("tritonkit_version", "")),
                   perf_analyzer=str(data.get("perf_analyzer", "")),
                   perf_analyzer_binary=str(data.get("perf_analyzer_binary", "")), server=str(data.get("server", "")),
                   problems=tuple(str(p) for p in data.get("problems", ())))


def make_probe() -> Callable[[bool, Sequence[str]], dict[str, Any]]:
    """The probe each node runs. Defined in a function so that Ray (cloudpickle) sends it by value:
    it must run, and say so, on a node where tritonkit cannot be imported."""

    def probe(need_server: bool, endpoints: Sequence[str]) -> dict[str, Any]:
        import importlib
        import os as _os
        import socket as _socket
        import subprocess as _subprocess
        import sys as _sys

        import ray as _ray

        facts: dict[str, Any] = {"node_id": _ray.get_runtime_context().get_node_id(), "host": _socket.gethostname(),
                                 "problems": []}
        problems: list[str] = facts["problems"]
        try:
            facts["cpu_cores"] = len(_os.sched_getaffinity(0))
        except AttributeError:
            facts["cpu_cores"] = _os.cpu_count() or 0
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as info:
                facts["cpu_model"] = next((line.split(":", 1)[1].strip() for line in info
                                           if line.startswith("model name")), "")
        except OSError:
            facts["cpu_model"] = ""
        try:
            listed = _subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
            facts["gpus"] = [line.split(":", 1)[1].split("(")[0].strip() for line in listed.splitlines()
                             if line.startswith("GPU ")]
        except (OSError, _subprocess.TimeoutExpired):
            facts["gpus"] = []
        for endpoint in endpoints:
            host, _, port = endpoint.rpartition(":")
            try:
                with _socket.create_connection((host.strip("[]"), int(port)), timeout=5):
                    pass
            except (OSError, ValueError) as exc:
                problems.append(f"cannot reach {endpoint}: {getattr(exc, 'strerror', None) or exc}")
        try:
            tritonkit = importlib.import_module("tritonkit")
        except Exception as exc:  # noqa: BLE001 - whatever stops the import is the answer
            problems.append(f"cannot import tritonkit ({type(exc).__name__}: {exc}) in {_sys.executable}")
            return facts
        facts["tritonkit_version"] = str(getattr(tritonkit, "__version__", "?"))
        errors = importlib.import_module("tritonkit.errors")
        try:
            located = importlib.import_module("tritonkit.provision.perf_analyzer").locate_perf_analyzer()
            facts["perf_analyzer"], facts["perf_analyzer_binary"] = str(located.version or "?"), str(located.binary)
        except errors.TritonKitError as exc:
            problems.append(f"has no perf_analyzer: {exc.message}")
        if need_server:
            try:
                server = importlib.import_module("tritonkit.provision.server").locate_server()
                facts["server"] = str(server.binary)
            except errors.TritonKitError as exc:
                problems.append(f"has no tritonserver: {exc.message}")
        return facts

    return probe


#: What to do about what a probe found missing (a phrase of its problem → the fix).
_FIXES = (
    ("cannot import tritonkit", CLUSTER_EXTRA_HINT),
    ("no perf_analyzer", "run 'tritonkit perf install' on that node (or set TRITONKIT_PERF_ANALYZER there)"),
    ("no tritonserver", "run 'tritonkit install server' on that node, or set TRITONKIT_SERVER_BIN there"),
    ("cannot reach", "open the endpoint's port to that node (its firewall, or the Service it is behind)"),
)


def _alive_nodes(ray: Any) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def _node_line(node: Mapping[str, Any]) -> str:
    totals = node.get("Resources") or {}
    shown = ", ".join(f"{k} {v:g}" for k, v in sorted(totals.items())
                      if k in ("CPU", "GPU") or not (k.startswith("node:") or k in ("memory", "object_store_memory")))
    return f"{str(node['NodeID'])[:8]} ({node.get('NodeManagerAddress', '?')}): {shown or 'no resources'}"


def check_nodes(ray: Any, need: NodeResources, *, address: str, need_server: bool, why: str,
                endpoints: Sequence[str] = (), count: int = 1) -> list[NodeInfo]:
    """The alive nodes that have ``need`` (at least ``count`` of them), each probed; ``ClusterError``
    naming what is missing and where — no such node, or a node without tritonkit, perf_analyzer,
    tritonserver (``need_server``) or a route to one of ``endpoints`` (``host:port``). ``why``
    says what the work is (for the message)."""
    alive = _alive_nodes(ray)
    eligible = [n for n in alive if need.fits(n.get("Resources") or {})]
    if len(eligible) < count:
        have = "; ".join(_node_line(n) for n in alive) or "none alive"
        asked = f"{count} nodes" if count > 1 else "a node"
        raise ClusterError(f"the Ray cluster at {address} has {len(eligible) or 'no'} node(s) with {need.describe()} "
                           f"but {why} needs {asked} with it (its nodes: {have})",
                           hint="add nodes with those resources (ray start --num-gpus N / --resources), or ask for "
                                "what the cluster has with --node-resources")
    probe = ray.remote(make_probe())
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    refs = {
        probe.options(num_cpus=0, max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote(need_server, list(endpoints)): n
        for n in eligible
    }
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    infos: list[NodeInfo] = []
    for ref, node in refs.items():
        where = f"node {str(node['NodeID'])[:8]} ({node.get('NodeManagerAddress', '?')})"
        try:
            facts = ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
        except ray.exceptions.GetTimeoutError as exc:
            raise ClusterError(f"{where} did not answer its check within {PROBE_TIMEOUT_S:g} s",
                               hint="is the node overloaded or its raylet stuck? 'ray status' on the head") from exc
        except ray.exceptions.RayError as exc:
            raise ClusterError(f"{where} could not run its check: {str(exc).splitlines()[0][:300]}",
                               hint="check that the node runs the same Python and Ray as this machine") from exc
        infos.append(NodeInfo.from_dict({**facts, "address": node.get("NodeManagerAddress", ""),
                                         "resources": node.get("Resources") or {}}))
    lacking = [info for info in infos if info.problems]
    if lacking:
        text = " ".join(p for info in lacking for p in info.problems)
        fixes = [fix for needle, fix in _FIXES if needle in text]
        raise ClusterError("; ".join(f"node {info.name()} {', and '.join(info.problems)}" for info in lacking),
                           hint="; ".join(fixes) or "fix those nodes, or keep this work off them")
    return infos


def driver_node_id(ray: Any) -> str:
    """The Ray node id of the node this driver is attached to."""
    return str(ray.get_runtime_context().get_node_id())
