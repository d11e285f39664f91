"""Child processes that die with the Python process that started them, however it dies.

A child started with :func:`spawn` runs in its own session (so stopping it can signal its whole
process group) and is told by the kernel to receive ``death_signal`` when its parent goes away
(Linux ``prctl(PR_SET_PDEATHSIG)``), so a SIGKILL of the toolkit leaves no tritonserver or
perf_analyzer behind under PID 1.

The kernel sends the signal when the *thread* that forked the child ends, not the process.
Children are therefore forked from one long-lived daemon thread (the spawner), which lives
exactly as long as the process: a server started from a worker thread that later exits
(``asyncio.to_thread``, a thread pool) keeps running.

The signal is set by util-linux's ``setpriv --pdeathsig`` in front of the command, so the fork
runs no Python code in the child: a Python ``preexec_fn`` forks the whole interpreter, and with
gRPC's threads running (a client in the same process) such a child was seen to crash with
SIGSEGV before it could exec. Where ``setpriv`` is missing, :func:`die_with_parent` does the same
from a ``preexec_fn``.

The signal reaches the child itself, not its group: the python-backend stubs tritonserver starts
depend on the server to stop them, and a server killed outright (SIGKILL — as Ray kills the children
of a worker whose node died) leaves them running (2.51's stub says "Non-graceful termination
detected" and hangs). So each process that spawns children also starts one small *reaper*,
detached (nobody's child but init's: a supervisor that kills a dead process's children must not
take it too), which is told every group as it starts and ends, and when this process dies and their
pipe closes, stops each group still open (SIGTERM, up to 5 s, SIGKILL).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

__all__ = ["die_with_parent", "spawn", "stop_group"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    prctl: Callable[..., int] = libc.prctl
    return prctl


_PRCTL = _load_prctl()


def die_with_parent(death_signal: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive ``death_signal`` when its parent dies.

    Checks for a parent that died between ``fork`` and ``prctl`` (the child would then already
    belong to PID 1 or a subreaper) and exits at once in that case. A no-op off Linux.
    """
    parent_pid = os.getpid()

    def _preexec() -> None:
        if _PRCTL is None:
            return
        _PRCTL(_PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)

    return _preexec


def _setpriv() -> str | None:
    """util-linux ``setpriv`` when it is there and knows ``--pdeathsig`` (util-linux 2.33 and later)."""
    global _SETPRIV_CHECKED, _SETPRIV
    if not _SETPRIV_CHECKED:
        path = shutil.which("setpriv") if _PRCTL is not None else None
        if path is not None:
            try:
                help_text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                help_text = ""
            if "--pdeathsig" not in help_text:
                path = None
        _SETPRIV, _SETPRIV_CHECKED = path, True
    return _SETPRIV


_SETPRIV: str | None = None
_SETPRIV_CHECKED = False


# ---- the spawner thread ---------------------------------------------------------------------
_Request = tuple[Callable[[], "subprocess.Popen[bytes]"], "Future[subprocess.Popen[bytes]]"]
_requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
_spawner: threading.Thread | None = None
_spawner_lock = threading.Lock()


def _spawner_loop() -> None:
    while True:
        make, future = _requests.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(make())
        except BaseException as exc:  # handed to the caller's thread
            future.set_exception(exc)


def _ensure_spawner() -> None:
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawner_loop, name="tritonkit-spawner", daemon=True)
            _spawner.start()


def spawn(
    argv: Sequence[str],
    *,
    death_signal: int = signal.SIGKILL,
    **popen_kwargs: Any,
) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, start_new_session=True, **popen_kwargs)``, tied to this process's life.

    ``death_signal`` is what the child gets when this process dies: SIGTERM for a child that
    cleans up after itself (tritonserver releases its shared memory and stubs on SIGTERM),
    SIGKILL for one that need not.
    """
    if "preexec_fn" in popen_kwargs or "start_new_session" in popen_kwargs:
        raise TypeError("spawn() sets preexec_fn and start_new_session itself")
    setpriv = _setpriv()
    if setpriv is not None:
        # setpriv sets the signal, then execs the command in the same process (same pid).
        command = [setpriv, f"--pdeathsig={signal.Signals(death_signal).name}", "--", *argv]

        def make() -> subprocess.Popen[bytes]:
            return subprocess.Popen(command, start_new_session=True, **popen_kwargs)
    else:
        preexec = die_with_parent(death_signal)

        def make() -> subprocess.Popen[bytes]:
            return subprocess.Popen(list(argv), start_new_session=True, preexec_fn=preexec, **popen_kwargs)  # noqa: PLW1509

    _ensure_spawner()
    future: Future[subprocess.Popen[bytes]] = Future()
    _requests.put((make, future))
    proc = future.result()
    _tell_reaper("+", proc.pid)
    return proc


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Stop a child started by :func:`spawn` and everything in its process group.

    SIGTERM to the group, up to ``grace_s`` for the leader to exit, then SIGKILL to whatever is
    left of the group (children that outlive their leader, such as python-backend stubs), and
    reap the leader. Safe to call on a child that has already exited.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    _tell_reaper("-", proc.pid)


# ---- the reaper of process groups (see the module docstring) ---------------------------------
_REAPER = r"""
import os, signal, sys, time
fd = int(sys.argv[1])
if os.fork():
    os._exit(0)  # the starter exits at once: the reaper itself is nobody's child but init's
os.setsid()
for sig in (signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
groups, pending = set(), b""
with os.fdopen(fd, "rb", buffering=0) as pipe:
    while True:
        chunk = pipe.read(4096)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            op, _, pgid = line.partition(b" ")
            (groups.add if op == b"+" else groups.discard)(int(pgid))

def alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False

for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 1.0)):
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        groups = {g for g in groups if alive(g)}
        if not groups:
            sys.exit(0)
        time.sleep(0.1)
"""
_reaper_fd: int | None = None
_reaper_lock = threading.Lock()


def _tell_reaper(op: str, pgid: int) -> None:
    """Tell the reaper a group started (``+``) or was stopped (``-``); it is started on first use.
    Best effort: without it, a group's leader still dies with this process."""
    global _reaper_fd
    with _reaper_lock:
        if _reaper_fd is None:
            if op == "-":
                return
            read_fd, write_fd = os.pipe()  # both close on exec: only the reaper gets the read end
            try:
                starter = subprocess.Popen([sys.executable, "-c", _REAPER, str(read_fd)], pass_fds=(read_fd,),
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
                starter.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                os.close(write_fd)
                return
            finally:
                os.close(read_fd)
            _reaper_fd = write_fd
        with contextlib.suppress(OSError):
            os.write(_reaper_fd, f"{op} {pgid}\n".encode())
