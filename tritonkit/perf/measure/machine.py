"""What else the load generator's host was doing during a step, read from ``/proc``.

A build server runs other jobs beside the one measuring: their CPU time is taken from the server
and perf_analyzer alike, and shows up as noise (windows that disagree, runs that differ). So each
step records, in cores:

* **other processes**: the host's busy CPU time over the step (``/proc/stat``'s first line: user,
  nice, system, irq, softirq and steal — time the hypervisor gave to other guests) less
  perf_analyzer's and the server's;
* **perf_analyzer**: its own CPU time (``/proc/<pid>/stat``, every thread);
* **the server**: the CPU time of the process listening on the server's port and every process
  below it (the python-backend stubs are its children), when the server is on this host
  (a loopback URL) and its process can be found (``/proc/net/tcp*``, then ``/proc/<pid>/fd``).

A step is **busy** when other processes used more than :data:`BUSY_SHARE` of the host's cores;
perf_analyzer is the **limit** when it used :data:`GENERATOR_LIMIT_CORES` of a core or more, or
printed that it could not keep up with the load it was asked for (its own check of the time it
spends in itself, and of delayed requests at a request rate: ``Report`` / ``ReportClientSideStats``
in triton-inference-server/perf_analyzer ``src/inference_profiler.cc``, read at main 263c5f6e).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tritonkit.perf.measure.metrics import host_cpu_count, is_loopback, process_stat
from tritonkit.perf.measure.result import MachineLoad

__all__ = [
    "BUSY_SHARE",
    "GENERATOR_LIMIT_CORES",
    "KEEP_UP_MARKERS",
    "MachineSampler",
    "busy_warning",
    "generator_warning",
    "listening_pid",
    "process_tree",
]

#: Other processes above this share of the host's cores make a step "busy" (a warning).
BUSY_SHARE = 0.25
#: perf_analyzer at or above this many cores is taken to be the limit of what it can offer.
GENERATOR_LIMIT_CORES = 0.9
#: What perf_analyzer prints when it could not keep up (see the module docstring).
KEEP_UP_MARKERS = ("Perf Analyzer is not able to keep up", "Perf Analyzer was not able to keep up")

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's "st" column


def _busy_s() -> float | None:
    """The host's busy CPU seconds since boot, all cores (``/proc/stat``, first line)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields_ = fh.readline().split()
    except OSError:
        return None
    if not fields_ or fields_[0] != "cpu":
        return None
    # user nice system idle iowait irq softirq steal (guest time is already inside user/nice)
    values = [int(v) for v in fields_[1:9]]
    values += [0] * (8 - len(values))
    user, nice, system, _idle, _iowait, irq, softirq, steal = values
    return (user + nice + system + irq + softirq + steal) / _TICKS


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def process_tree(root: int) -> set[int]:
    """``root`` and every live process below it."""
    parents: dict[int, int] = {}
    for pid in _pids():
        stat = process_stat(pid)
        if stat is not None:
            parents[pid] = stat[0]
    tree = {root} if root in parents else set()
    grew = True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in tree and pid not in tree}
        tree |= found
        grew = bool(found)
    return tree


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == _LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes


def listening_pid(url: str) -> int | None:
    """The process listening on ``url``'s port on this host (``None``: not a loopback URL, not
    found, or not ours to see)."""
    if not is_loopback(url):
        return None
    port = urlsplit(url if "://" in url else "//" + url).port
    inodes = _listening_inodes(port) if port else set()
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for pid in _pids():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    return pid
            except OSError:
                continue
    return None


def _tree_cpu_s(pids: set[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        stat = process_stat(pid)
        if stat is not None:
            found[pid] = stat[1]
    return found


@dataclass
class MachineSampler:
    """The host's CPU over one perf_analyzer run: :meth:`begin` as it starts, :meth:`end` (given
    perf_analyzer's own CPU seconds over the run) as it ends. ``server_pid``: the server's
    process (see :func:`listening_pid`), ``None`` when unknown."""

    server_pid: int | None = None
    cores: int = field(default_factory=host_cpu_count)
    _wall0: float = 0.0
    _busy0: float | None = None
    _server0: dict[int, float] = field(default_factory=dict)

    def begin(self) -> None:
        self._wall0 = time.monotonic()
        self._busy0 = _busy_s()
        self._server0 = _tree_cpu_s(process_tree(self.server_pid)) if self.server_pid else {}

    def end(self, generator_cpu_s: float | None, *, console: str = "") -> MachineLoad:
        """What the host did since :meth:`begin`; ``console`` is perf_analyzer's output (read for
        its own "could not keep up")."""
        wall = time.monotonic() - self._wall0
        busy1 = _busy_s()
        notes: list[str] = []
        server_cores: float | None = None
        server_s = 0.0
        if self.server_pid is not None:
            now = _tree_cpu_s(process_tree(self.server_pid) | set(self._server0))
            # A process started during the step (a stub) spent all of its time in it.
            server_s = sum(cpu - self._server0.get(pid, 0.0) for pid, cpu in now.items())
            server_cores = server_s / wall if wall > 0 else None
            notes.append(f"server: pid {self.server_pid} and its children")
        else:
            notes.append("server: not on this host or not found; counted with the other processes")
        generator_cores = generator_cpu_s / wall if generator_cpu_s is not None and wall > 0 else None
        other_cores: float | None = None
        if busy1 is not None and self._busy0 is not None and wall > 0:
            other_s = (busy1 - self._busy0) - (generator_cpu_s or 0.0) - server_s
            other_cores = max(0.0, other_s / wall)
        else:
            notes.append("host CPU unknown: /proc/stat not readable")
        said = next((marker for marker in KEEP_UP_MARKERS if marker in console), None)
        if said:
            notes.append(f"perf_analyzer said: {said}")
        limited = bool(said) or (generator_cores is not None and generator_cores >= GENERATOR_LIMIT_CORES)
        return MachineLoad(cores=self.cores, other_cores=_round(other_cores), generator_cores=_round(generator_cores),
                           server_cores=_round(server_cores), generator_limited=limited, notes=notes)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def busy_warning(load: MachineLoad | None) -> str | None:
    """The warning for a step measured while other processes used more than :data:`BUSY_SHARE` of
    the host's cores; ``None`` otherwise."""
    share = load.other_share if load is not None else None
    if load is None or share is None or share <= BUSY_SHARE:
        return None
    return (f"the machine was busy: other processes used {load.other_cores:.2f} of its {load.cores} core(s) "
            f"({share:.0%}) during this step; its figures carry that noise (measure on a quieter machine, "
            "or repeat the run: --repeat N)")


def generator_warning(load: MachineLoad | None) -> str | None:
    """The warning for a step where perf_analyzer itself was the limit (see :class:`MachineLoad`)."""
    if load is None or not load.generator_limited:
        return None
    used = f"{load.generator_cores:.2f} core(s)" if load.generator_cores is not None else "its CPU"
    return (f"perf_analyzer may have been the limit: it used {used}"
            + ("; it said it could not keep up with the load" if any("said" in n for n in load.notes) else "")
            + " (run it on another machine, or lower the load)")
