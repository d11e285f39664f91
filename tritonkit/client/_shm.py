"""System shared memory for large tensors: one segment per request, always removed.

A request whose tensors are large enough gets one segment holding all of them
(inputs, and the outputs whose size the config fixes), registered with the
server for the duration of that one call. The caller's I/O layer does the two
RPCs (register, unregister); everything local lives here.

Order of clean-up, on success, error and cancellation alike: the local segment
is destroyed first (``shm_unlink``, nothing left in ``/dev/shm``; the server's
own mapping stays valid until it unregisters), then the registration is
dropped. The server can refuse that unregister for a moment after the
response ("region is currently in use": it releases the request after sending
the reply); such names are retried later (see ``PendingUnregister``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import tritonclient.utils.shared_memory as tshm
from tritonclient.utils import triton_to_np_dtype

__all__ = [
    "SEGMENT_PREFIX",
    "PendingUnregister",
    "Segment",
    "SharedMemoryMode",
    "ShmInput",
    "ShmOutput",
    "ShmPlan",
    "is_local_url",
    "new_region_name",
]

SharedMemoryMode = Literal["auto", "always", "never"]

#: Every segment this package creates is named ``/dev/shm/tritonkit-<pid>-<random>``.
SEGMENT_PREFIX = "tritonkit-"
_ALIGN_BYTES = 64
# tritonclient keeps a module-global table of open segments; guard it across threads.
_LOCK = threading.Lock()


def new_region_name() -> str:
    """A region name unique to this process and call (also the /dev/shm file name)."""
    return f"{SEGMENT_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:16]}"


def is_local_url(url: str) -> bool:
    """True when ``host:port`` names this machine (loopback or its own host name)."""
    if url.startswith("["):
        host = url[1 : url.find("]")]
    elif url.count(":") == 1:
        host = url.split(":", 1)[0]
    else:
        host = url  # a bare name, or a bare IPv6 address
    if host in ("localhost", socket.gethostname()):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _aligned(offset: int) -> int:
    return (offset + _ALIGN_BYTES - 1) // _ALIGN_BYTES * _ALIGN_BYTES


@dataclass(frozen=True)
class ShmInput:
    """An input tensor carried in the segment at ``offset``."""

    name: str
    array: np.ndarray[Any, Any]
    offset: int
    byte_size: int


@dataclass(frozen=True)
class ShmOutput:
    """An output the server writes into the segment at ``offset`` (at most ``byte_size``)."""

    name: str
    datatype: str
    offset: int
    byte_size: int


@dataclass
class ShmPlan:
    """Where each large tensor of one request goes in its segment."""

    region: str
    inputs: list[ShmInput] = field(default_factory=list)
    outputs: list[ShmOutput] = field(default_factory=list)
    byte_size: int = 0

    @property
    def key(self) -> str:
        """The POSIX shared memory key (``/`` + region name)."""
        return "/" + self.region

    def add_input(self, name: str, array: np.ndarray[Any, Any]) -> ShmInput:
        """Reserve room for ``array``; return where it goes."""
        item = ShmInput(name, array, _aligned(self.byte_size), int(array.nbytes))
        self.inputs.append(item)
        self.byte_size = item.offset + item.byte_size
        return item

    def add_output(self, name: str, datatype: str, byte_size: int) -> ShmOutput:
        """Reserve ``byte_size`` bytes for an output; return where it goes."""
        item = ShmOutput(name, datatype, _aligned(self.byte_size), byte_size)
        self.outputs.append(item)
        self.byte_size = item.offset + item.byte_size
        return item


class Segment:
    """The local side of one request's segment: created and filled, read, destroyed once."""

    def __init__(self, plan: ShmPlan) -> None:
        self.plan = plan
        with _LOCK:
            self._handle: Any = tshm.create_shared_memory_region(
                plan.region, plan.key, max(plan.byte_size, 1), create_only=True
            )
        try:
            for item in plan.inputs:
                tshm.set_shared_memory_region(self._handle, [item.array], offset=item.offset)
        except BaseException:
            self.destroy()
            raise

    def read_output(self, item: ShmOutput, shape: list[int]) -> np.ndarray[Any, Any]:
        """Copy output ``item`` of ``shape`` out of the segment (the segment is about to go)."""
        view = tshm.get_contents_as_numpy(
            self._handle, triton_to_np_dtype(item.datatype), shape, offset=item.offset
        )
        try:
            return np.array(view, copy=True)
        finally:
            # The view pins the mapping: it must be gone before destroy() can close it.
            del view

    def destroy(self) -> None:
        """Unmap and unlink the segment. Idempotent; never raises for an already-gone file."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        with _LOCK, contextlib.suppress(FileNotFoundError):
            tshm.destroy_shared_memory_region(handle)


class PendingUnregister:
    """Region names the server has not yet let go of; retried before the next use and at close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: list[str] = []

    def add(self, name: str) -> None:
        """Remember ``name`` for a later unregister."""
        with self._lock:
            self._names.append(name)

    def discard(self, name: str) -> None:
        """Forget ``name`` (it was unregistered, or never registered)."""
        with self._lock:
            if name in self._names:
                self._names.remove(name)

    def take(self) -> list[str]:
        """All names waiting, removed from the list (put back with ``add`` if still refused)."""
        with self._lock:
            names, self._names = self._names, []
        return names

    def __len__(self) -> int:
        with self._lock:
            return len(self._names)
