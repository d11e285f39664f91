"""What else the host did during a step, read from the real ``/proc``: the process listening on a
port, a process tree, a real CPU burner counted as the server's and as another process's load,
and the warnings a busy machine or a saturated perf_analyzer give."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tritonkit.perf.measure.machine import (
    MachineSampler,
    busy_warning,
    generator_warning,
    listening_pid,
    process_tree,
)
from tritonkit.perf.measure.result import MachineLoad

BURN = "import time\nend = time.monotonic() + 30\nwhile time.monotonic() < end: pass\n"


@pytest.fixture
def burner() -> Iterator[subprocess.Popen[bytes]]:
    """A child of this test that burns one core for up to 30 s; stopped by its pid."""
    proc = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_the_process_listening_on_a_loopback_port_is_found_and_a_remote_url_is_not_looked_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert listening_pid(f"127.0.0.1:{port}") == os.getpid()
        assert listening_pid(f"localhost:{port}") == os.getpid()
    assert listening_pid(f"127.0.0.1:{port}") is None  # closed: nobody listens
    assert listening_pid(f"10.1.2.3:{port}") is None  # not this host: not looked for


def test_a_process_tree_holds_the_children_started_below_its_root(burner: subprocess.Popen[bytes]) -> None:
    tree = process_tree(os.getpid())
    assert os.getpid() in tree and burner.pid in tree
    assert process_tree(burner.pid) == {burner.pid}


def test_the_sampler_counts_the_servers_tree_apart_from_the_other_processes(burner: subprocess.Popen[bytes]) -> None:
    """The burner stands for the server here (its pid is given as the server's): its core is
    counted as the server's, never as other processes' load. Timing tolerance: on a loaded host
    the burner still gets a tenth of a core over a second."""
    sampler = MachineSampler(server_pid=burner.pid)
    sampler.begin()
    time.sleep(1.0)
    load = sampler.end(0.0)
    assert load.server_cores is not None and load.server_cores > 0.1
    assert load.other_cores is not None and load.other_cores >= 0.0
    assert load.other_cores + load.server_cores <= load.cores + 0.2  # never more than the host has
    assert load.generator_cores == 0.0 and not load.generator_limited

    alone = MachineSampler(server_pid=None)  # the burner is then just another process
    alone.begin()
    time.sleep(1.0)
    seen = alone.end(0.0)
    assert seen.server_cores is None and seen.other_cores is not None and seen.other_cores > 0.1
    assert any("not on this host" in note for note in seen.notes)


def test_perf_analyzer_saying_it_could_not_keep_up_marks_it_the_limit() -> None:
    sampler = MachineSampler()
    sampler.begin()
    load = sampler.end(0.01, console="[WARNING] Perf Analyzer is not able to keep up with the desired load.")
    assert load.generator_limited and "could not keep up" in (generator_warning(load) or "")


def test_a_busy_machine_and_a_saturated_generator_are_warned_about_and_a_quiet_one_is_not() -> None:
    busy = MachineLoad(cores=2, other_cores=1.3, generator_cores=0.2)
    assert "busy: other processes used 1.30 of its 2 core(s) (65%)" in (busy_warning(busy) or "")
    assert busy_warning(MachineLoad(cores=2, other_cores=0.2)) is None and busy_warning(None) is None
    saturated = MachineLoad(cores=2, other_cores=0.0, generator_cores=0.95, generator_limited=True)
    assert "perf_analyzer may have been the limit: it used 0.95 core(s)" in (generator_warning(saturated) or "")
    assert generator_warning(MachineLoad(cores=2, generator_cores=0.3)) is None
