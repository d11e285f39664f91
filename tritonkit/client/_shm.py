"""System shared memory for large tensors: one segment per request, always removed.

A request whose tensors are large enough gets one segment holding all of them
(inputs, and the outputs whose size the config fixes), registered with the
server for the duration of that one call. The caller's I/O layer does the two
RPCs (register, unregister); everything local lives here.

Order of clean-up, on success, error and cancellation alike: the local segment
is destroyed first (``shm_unlink``, nothing left in ``/dev/shm``; the server's
own mapping stays valid until it unregisters), then the registration is
dropped. The server refuses that unregister while the request still runs
(after a deadline or a cancellation the server keeps going) and for a moment
after the response; such regions go to the client's ``ShmJanitor``, which
unregisters them when the request really ended.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.utils.shared_memory as tshm
from tritonclient.utils import triton_to_np_dtype

from tritonkit._dial import dial_for
from tritonkit.client._errors import shm_refusal, status_of
from tritonkit.errors import SharedMemoryRefusedError, ShmUnusable

__all__ = [
    "SEGMENT_PREFIX",
    "Segment",
    "SharedMemoryMode",
    "ShmCall",
    "ShmInput",
    "ShmOutput",
    "ShmJanitor",
    "ShmPlan",
    "new_region_name",
    "shared_memory_refusal",
]

SharedMemoryMode = Literal["auto", "always", "never"]

log = logging.getLogger("tritonkit.client")

#: Every segment this package creates is named ``/dev/shm/tritonkit-<pid>-<random>``.
SEGMENT_PREFIX = "tritonkit-"
_ALIGN_BYTES = 64
# Statuses of an unregister that mean "no answer" rather than "still in use".
_SERVER_GONE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# How a call ended when the server may still be running it (and so holds its region).
_STILL_RUNNING = (
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNAVAILABLE,
    None,
)
# tritonclient keeps a module-global table of open segments; guard it across threads.
_LOCK = threading.Lock()


def new_region_name() -> str:
    """A region name unique to this process and call (also the /dev/shm file name)."""
    return f"{SEGMENT_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:16]}"


def _aligned(offset: int) -> int:
    return (offset + _ALIGN_BYTES - 1) // _ALIGN_BYTES * _ALIGN_BYTES


def shared_memory_refusal(url: str, *, timeout_s: float = 5.0) -> SharedMemoryRefusedError | None:
    """Whether the server at ``url`` (gRPC ``host:port``) takes client shared memory: a one-byte
    region of this process is registered there and dropped again. The server's refusal when it
    refuses client shared memory by policy (Triton 2.68+ without ``--allow-client-shm=true``);
    ``None`` when it took the region, or failed otherwise (the caller meets that failure itself).
    """
    plan = ShmPlan(new_region_name())
    segment = Segment(plan)
    dial = dial_for(url)
    client = dial.tritonclient(url)
    try:
        try:
            client.register_system_shared_memory(plan.region, plan.key, 1, client_timeout=timeout_s,
                                                 headers=dial.header_map)
        except Exception as exc:  # noqa: BLE001 - only the policy refusal is ours to name
            return shm_refusal(exc, url=url)
        with contextlib.suppress(Exception):
            client.unregister_system_shared_memory(plan.region, client_timeout=timeout_s)
        return None
    finally:
        segment.destroy()
        client.close()


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


class ShmCall:
    """One call through a segment: the local segment, and what the server may still hold of it.

    The client's I/O registers ``plan``, sends the request, and at the end calls
    ``release_local()`` (in a ``finally``); when that says the server may hold
    the registration, the client drops it at once if ``answered``, else hands it
    to its ``ShmJanitor``.
    """

    __slots__ = ("answered", "may_be_registered", "plan", "segment")

    def __init__(self, plan: ShmPlan) -> None:
        self.plan = plan
        self.segment = Segment(plan)
        #: True from the moment the registration may be sent: a call cut short (deadline,
        #: Ctrl-C, cancellation) cannot know whether it landed.
        self.may_be_registered = True
        #: True once the server answered the inference call: it is done with the region.
        self.answered = False

    def refused(self) -> ShmUnusable:
        """The server refused the registration outright: nothing to drop; send in-band instead."""
        self.may_be_registered = False
        return ShmUnusable()

    def ended(self, exc: BaseException | None) -> None:
        """The inference call returned (``exc`` None) or failed with ``exc``."""
        self.answered = exc is None or status_of(exc) not in _STILL_RUNNING

    def release_local(self) -> bool:
        """Destroy the local segment (it must never outlive the call); True when the server may hold it."""
        self.segment.destroy()
        return self.may_be_registered


class ShmJanitor:
    """Unregisters the regions a server still held when their call ended; outlives its client.

    After a deadline or a cancellation the server keeps executing the request,
    and refuses to unregister its region until it is done ("region is currently
    in use"). The janitor's thread, with its own connection, tries again with
    backoff until the server lets go, or is gone (unreachable for
    ``unreachable_give_up_s``: its registrations went with it), or
    ``give_up_after_s`` passed. ``close()`` of a client waits for it, bounded;
    what is left then is finished by the thread after the client is gone, and
    at interpreter exit (bounded again, see ``_wait_all_at_exit``).
    """

    def __init__(
        self,
        url: str,
        client_kwargs: dict[str, Any],
        *,
        give_up_after_s: float = 600.0,
        unreachable_give_up_s: float = 30.0,
    ) -> None:
        self.url = url
        self._client_kwargs = client_kwargs
        self.give_up_after_s = give_up_after_s
        self.unreachable_give_up_s = unreachable_give_up_s
        self._cond = threading.Condition()
        self._pending: dict[str, float] = {}  # region -> when it was handed over (monotonic)
        self._running = False
        _JANITORS.add(self)

    def add(self, region: str) -> None:
        """Unregister ``region`` as soon as the server lets go of it."""
        with self._cond:
            self._pending.setdefault(region, time.monotonic())
            if not self._running:
                self._running = True
                threading.Thread(
                    target=self._run, name=f"tritonkit-shm-janitor-{self.url}", daemon=True
                ).start()
            self._cond.notify_all()

    def pending(self) -> list[str]:
        """Regions still registered on the server, as far as the janitor knows."""
        with self._cond:
            return sorted(self._pending)

    def wait(self, timeout_s: float) -> bool:
        """Block until every region was released (True) or ``timeout_s`` passed (False)."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while self._pending:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _run(self) -> None:
        # Its own client: the owner may be closed (or closing) while this runs.
        tc = grpcclient.InferenceServerClient(self.url, **self._client_kwargs)
        delay_s = 0.01
        unreachable_since: float | None = None
        try:
            while True:
                with self._cond:
                    names = list(self._pending)
                    if not names:
                        self._running = False
                        self._cond.notify_all()
                        return
                for name in names:
                    released = False
                    try:
                        tc.unregister_system_shared_memory(name, client_timeout=2.0)
                        released = True
                        unreachable_since = None
                    except Exception as exc:  # noqa: BLE001 - any failure: try again later
                        now = time.monotonic()
                        if status_of(exc) in _SERVER_GONE:
                            unreachable_since = unreachable_since or now
                            released = now - unreachable_since >= self.unreachable_give_up_s
                        else:
                            unreachable_since = None
                        with self._cond:
                            handed_at = self._pending.get(name, now)
                        if not released and now - handed_at >= self.give_up_after_s:
                            log.warning(
                                "server %s still holds shared memory region %s after %.0f s; giving up on it",
                                self.url,
                                name,
                                self.give_up_after_s,
                            )
                            released = True
                    if released:
                        with self._cond:
                            self._pending.pop(name, None)
                            self._cond.notify_all()
                        delay_s = 0.01
                with self._cond:
                    if self._pending:
                        self._cond.wait(delay_s)
                delay_s = min(delay_s * 2, 0.5)
        finally:
            with self._cond:
                self._running = False
                self._cond.notify_all()
            tc.close()


#: Every janitor of this process, for the bounded wait at interpreter exit.
_JANITORS: weakref.WeakSet[ShmJanitor] = weakref.WeakSet()
#: How long interpreter exit waits, in all, for regions still held by servers.
EXIT_WAIT_S = 5.0


@atexit.register
def _wait_all_at_exit() -> None:
    end = time.monotonic() + EXIT_WAIT_S
    for janitor in list(_JANITORS):
        janitor.wait(max(0.0, end - time.monotonic()))
