"""A real Ray cluster of a few one-CPU nodes on loopback, owned by the test that starts it.

Each node is one ``ray start --block`` process (``python -m ray.scripts.scripts``, so its workers run
this checkout's interpreter and import this checkout's tritonkit), started in its own session with
its own temporary folder. Everything Ray starts for a node (gcs_server, raylet, agents, workers)
stays in that node's process group, and every process it starts, down to a remote tritonserver and
perf_analyzer, inherits ``TRITONKIT_TEST_CLUSTER=<root>`` in its environment and ``TMPDIR`` inside
the cluster's folder. :meth:`LocalRayCluster.stop` stops exactly those groups (SIGTERM, then SIGKILL)
and :meth:`LocalRayCluster.leftovers` finds any process still carrying the marker, whoever its parent
is now: a test asserts there is none. ``ray stop`` is never used (it stops every Ray on the machine).

Ports: the GCS, the Ray client server, the dashboard and the dashboard agent would otherwise take
fixed defaults (6379, 10001, 8265, 52365) that another cluster on the same machine may hold; each
node gets free ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tritonkit.server.children import spawn, stop_group

__all__ = ["LOAD_PROCESS_NAMES", "MARKER_ENV", "LocalRayCluster", "RayNode", "free_port", "load_processes",
           "describe_processes", "processes_marked", "python_without_tritonkit"]

#: The environment variable every process of a test cluster carries (its value: the cluster's folder).
MARKER_ENV = "TRITONKIT_TEST_CLUSTER"
#: The smallest object store Ray accepts (75 MiB) with some room: the machine's /dev/shm is shared.
OBJECT_STORE_BYTES = 200 * 1024 * 1024
_STARTED_LINE = "Ray runtime started"


def free_port() -> int:
    """A TCP port nothing listens on right now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def processes_marked(value: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment holds ``MARKER_ENV=value``."""
    needle = f"{MARKER_ENV}={value}".encode()
    found: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
            if state == "Z":
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(entry.name), command))
    return found


def describe_processes(found: list[tuple[int, str]]) -> str:
    """``pid (state, parent, group, age): command`` per process, for an assertion message."""
    lines = []
    for pid, command in found:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
            ticks = os.sysconf("SC_CLK_TCK")
            uptime = float(Path("/proc/uptime").read_text().split()[0])
            age = uptime - int(fields[19]) / ticks
            lines.append(f"{pid} ({fields[0]}, parent {fields[1]}, group {fields[2]}, {age:.0f} s old): {command[:300]}")
        except (OSError, IndexError, ValueError):
            lines.append(f"{pid} (gone): {command[:300]}")
    return "\n".join(lines)


#: What a remote sweep or load test starts on a node: none may outlive the run.
LOAD_PROCESS_NAMES = ("tritonserver", "perf_analyzer", "triton_python_backend_stub")


def load_processes(value: str, *, wait_s: float = 0.0) -> list[tuple[int, str]]:
    """The marked processes (see :func:`processes_marked`) that are servers, stubs or perf_analyzer;
    with ``wait_s``, asked again until there are none or that time has passed."""
    deadline = time.monotonic() + wait_s
    while True:
        found = [(pid, command) for pid, command in processes_marked(value)
                 if any(name in command for name in LOAD_PROCESS_NAMES)]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.3)


def python_without_tritonkit(folder: Path) -> str:
    """An interpreter with Ray and the rest of this environment's packages but no tritonkit: a venv of
    this Python whose one ``.pth`` line adds the package folders that hold Ray. A line of a ``.pth``
    file only adds a folder; the ``.pth`` files inside it (an editable tritonkit's) are not run."""
    import ray

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    site = next(folder.glob("lib/python3*/site-packages"))
    (site / "ray_only.pth").write_text(str(Path(ray.__file__).parents[1]) + "\n")
    python = folder / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import ray, importlib.util; "
                            "print(importlib.util.find_spec('tritonkit') is None)"],
                           capture_output=True, text=True, timeout=120, cwd=str(folder))
    if probe.stdout.strip() != "True":
        raise RuntimeError(f"{python} still imports tritonkit (or not ray): {probe.stdout} {probe.stderr}")
    return str(python)


@dataclass
class RayNode:
    """One node: its ``ray start --block`` process (the leader of its process group) and folder."""

    name: str
    folder: Path
    proc: subprocess.Popen[bytes]
    log: Path
    ip: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def raylet_pid(self) -> int | None:
        """The pid of this node's raylet (a child of the ``ray start`` process), if it runs."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                command = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            pgid = int(stat.rsplit(")", 1)[-1].split()[2])
            if pgid == self.pid and command.endswith("/raylet"):
                return int(entry.name)
        return None


class LocalRayCluster:
    """A head and ``workers`` worker nodes of ``cpus`` CPUs each (the head ``head_cpus``: 0 keeps work
    off it, so that a worker can be lost without the driver's own node), under ``root``; see the
    module docstring.

    ``start()`` returns once every node said "Ray runtime started"; ``stop()`` is safe to call twice
    and on a cluster that failed half-way. ``node_env`` adds environment variables to one node
    (by index: 0 the head) — e.g. a node whose perf_analyzer is missing.
    """

    def __init__(self, root: Path, *, workers: int = 1, cpus: int = 1, head_cpus: int | None = None,
                 node_env: dict[int, dict[str, str]] | None = None,
                 python: dict[int, str] | None = None,
                 start_timeout_s: float = 120.0) -> None:
        self.root = root
        self.workers = workers
        self.cpus = cpus
        self.head_cpus = cpus if head_cpus is None else head_cpus
        self.node_env = dict(node_env or {})
        self.python = dict(python or {})
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.nodes: list[RayNode] = []

    @property
    def address(self) -> str:
        """The GCS address a driver passes to ``ray.init`` (``--cluster``)."""
        return f"127.0.0.1:{self.port}"

    def _env(self, index: int, folder: Path) -> dict[str, str]:
        tmp = folder / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", MARKER_ENV: str(self.root), "TMPDIR": str(tmp)}
        env.pop("RAY_ADDRESS", None)
        env.update(self.node_env.get(index, {}))
        return env

    def _start_node(self, index: int) -> RayNode:
        name = f"n{index}"  # short: Ray's socket paths live below it
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        python = self.python.get(index, sys.executable)
        # The head at 127.0.0.1 (Ray reports it under the machine's address), each worker at its own
        # loopback address (127.0.0.2, …): a driver on this machine then attaches to the head's
        # raylet alone, and a worker node can be lost without taking the driver with it.
        ip = "127.0.0.1" if index == 0 else f"127.0.0.{index + 1}"
        argv = [python, "-m", "ray.scripts.scripts", "start", "--block", "--node-ip-address", ip,
                "--num-cpus", str(self.head_cpus if index == 0 else self.cpus), "--disable-usage-stats", "--temp-dir", str(folder / "r"),
                "--object-store-memory", str(OBJECT_STORE_BYTES),
                "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
                "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port())]
        if index == 0:
            argv += ["--head", "--port", str(self.port), "--include-dashboard", "false",
                     "--dashboard-port", str(free_port()), "--ray-client-server-port", str(free_port())]
        else:
            argv += ["--address", self.address]
        log = folder / "ray-start.log"
        env = self._env(index, folder)
        with open(log, "wb") as out:
            # Its own session (stopped as one group) and dead with this process; Ray's own reaper
            # takes the node's processes down when the ``ray start --block`` leader dies.
            proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                         cwd=str(folder), death_signal=signal.SIGTERM)
        node = RayNode(name, folder, proc, log, ip=ip, env=env)
        self.nodes.append(node)
        return node

    def _wait_started(self, node: RayNode, deadline: float) -> None:
        while time.monotonic() < deadline:
            text = node.log.read_text(errors="replace") if node.log.exists() else ""
            if _STARTED_LINE in text:
                return
            if node.proc.poll() is not None:
                raise RuntimeError(f"ray start for {node.name} exited ({node.proc.returncode}):\n{text[-3000:]}")
            time.sleep(0.3)
        raise RuntimeError(f"ray start for {node.name} did not start within {self.start_timeout_s:g} s:\n"
                           + node.log.read_text(errors="replace")[-3000:])

    def start(self) -> LocalRayCluster:
        """Start the head, then the workers (all at once); stop what started if any fails."""
        deadline = time.monotonic() + self.start_timeout_s
        try:
            self._wait_started(self._start_node(0), deadline)
            added = [self._start_node(i) for i in range(1, self.workers + 1)]
            for node in added:
                self._wait_started(node, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def add_node(self, env: dict[str, str] | None = None, python: str | None = None) -> RayNode:
        """One more worker node (``env``: extra environment for it), started and joined."""
        index = len(self.nodes)
        if env:
            self.node_env[index] = env
        if python:
            self.python[index] = python
        node = self._start_node(index)
        self._wait_started(node, time.monotonic() + self.start_timeout_s)
        return node

    def node_at(self, address: str) -> RayNode:
        """The worker node Ray knows under ``address`` (127.0.0.2, …)."""
        return next(n for n in self.nodes if n.ip == address)

    def kill_raylet(self, node: RayNode) -> int:
        """SIGKILL ``node``'s raylet (a node lost mid-run, as when its machine dies); its pid."""
        pid = node.raylet_pid()
        if pid is None:
            raise RuntimeError(f"{node.name} has no raylet running")
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop every node this cluster started, workers first: SIGTERM to each node's process group,
        ``grace_s`` for its leader, then SIGKILL to whatever is left of the group; then wait until no
        process of the groups remains (at most 30 s)."""
        for node in reversed(self.nodes):
            stop_group(node.proc, grace_s)
        deadline = time.monotonic() + 30.0
        groups = {node.pid for node in self.nodes}
        while time.monotonic() < deadline and self._in_groups(groups):
            for pgid in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
            time.sleep(0.2)

    @staticmethod
    def _in_groups(groups: set[int]) -> list[int]:
        alive = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) in groups:
                alive.append(int(entry.name))
        return alive

    def leftovers(self, wait_s: float = 20.0) -> list[tuple[int, str]]:
        """Processes still carrying this cluster's marker after up to ``wait_s`` (children that die
        with their parent take a moment): none should be left once a run ends or the cluster stops."""
        deadline = time.monotonic() + wait_s
        while True:
            found = processes_marked(str(self.root))
            if not found or time.monotonic() >= deadline:
                return found
            time.sleep(0.3)

    def describe(self) -> str:
        """The nodes and their logs' tails (for an assertion message)."""
        return json.dumps({n.name: n.log.read_text(errors="replace")[-800:] for n in self.nodes}, indent=1)
