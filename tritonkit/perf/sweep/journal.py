"""What a sweep by URL changes on a server it did not start, and putting it back.

Before the first load, the config each swept model is served with (``get_model_config``: the
config as the server completed it) is written to ``<sweep folder>/journal.json`` (atomically),
with the server's URL and version. However the sweep ends — its result, an error, Ctrl-C,
SIGTERM, the server restarted under it — each model is reloaded with its journaled config (in
place: never unloaded), watched for a second to stay READY with it, and the journal is closed
(``status``: ``restored``, or ``applied`` when ``--apply`` left the winner loaded on purpose). A sweep killed
with SIGKILL leaves the journal ``open``: the next sweep by URL into the same folder puts the
models back before anything else, and ``perf sweep --url URL --restore --out DIR`` does only that.
Nothing is ever written on the server's machine: the journal lives in the sweep folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import atomic_write, read_json
from tritonkit.errors import ConfigError, ModelNotReadyError, ServerError, TritonKitError
from tritonkit.server.remote import RemoteServer

__all__ = ["JOURNAL_NAME", "STATUS_APPLIED", "STATUS_OPEN", "STATUS_RESTORED", "Journal", "restore",
           "signals_held"]

JOURNAL_NAME = "journal.json"
STATUS_OPEN = "open"
STATUS_RESTORED = "restored"
STATUS_APPLIED = "applied"


def _utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def config_dict(config: mc.ModelConfig) -> dict[str, Any]:
    """``config`` as JSON-ready data (protobuf's JSON mapping, field names as in ``config.pbtxt``)."""
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


def config_from(data: dict[str, Any], where: Path) -> mc.ModelConfig:
    config = mc.ModelConfig()
    try:
        json_format.ParseDict(data, config)
    except (json_format.ParseError, OverflowError, RecursionError) as exc:  # OverflowError: an infinite count
        raise ConfigError(f"{where}: a journaled config does not parse as a ModelConfig: {exc}",
                          hint="the journal was edited or damaged; put the model back by hand (load its "
                               "repository config) and delete the journal") from exc
    return config


@dataclass
class Journal:
    """The served configs a sweep by URL must put back (``configs``: model → served config)."""

    path: Path
    url: str
    server_version: str
    configs: dict[str, dict[str, Any]]
    status: str = STATUS_OPEN
    started_utc: str = field(default_factory=_utc)
    pid: int = field(default_factory=os.getpid)
    closed_utc: str | None = None
    note: str = ""

    @classmethod
    def begin(cls, folder: Path, server: RemoteServer, configs: dict[str, mc.ModelConfig]) -> Journal:
        """Write a new open journal of ``configs`` into ``folder`` (before anything is loaded)."""
        journal = cls(path=Path(folder) / JOURNAL_NAME, url=server.grpc_url, server_version=server.version(),
                      configs={model: config_dict(config) for model, config in configs.items()})
        journal.write()
        return journal

    @classmethod
    def read(cls, folder: Path) -> Journal | None:
        """The journal in ``folder``, or ``None`` when there is none; a damaged one is a ``ConfigError``."""
        path = Path(folder) / JOURNAL_NAME
        if not path.exists():
            return None
        data = read_json(path, what="sweep journal", hint="it names the configs to put back on the server; "
                         "restore the model by hand (load its repository config), then delete the file")
        try:
            return cls(path=path, url=str(data["url"]), server_version=str(data.get("server_version", "")),
                       configs={str(k): dict(v) for k, v in data["configs"].items()}, status=str(data["status"]),
                       started_utc=str(data.get("started_utc", "")), pid=int(data.get("pid", 0)),
                       closed_utc=data.get("closed_utc"), note=str(data.get("note", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{path} is not a sweep journal (missing or malformed {exc})",
                              hint="restore the model by hand (load its repository config), then delete the file") \
                from exc

    @property
    def open(self) -> bool:
        return self.status == STATUS_OPEN

    def config(self, model: str) -> mc.ModelConfig:
        return config_from(self.configs[model], self.path)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "server_version": self.server_version, "status": self.status,
                "started_utc": self.started_utc, "pid": self.pid, "closed_utc": self.closed_utc,
                "note": self.note, "configs": self.configs}

    def write(self) -> None:
        atomic_write(self.path, json.dumps(self.to_dict(), indent=2) + "\n")

    def close(self, status: str, note: str) -> None:
        """Mark the journal ``status`` (``restored`` / ``applied``) with ``note``, on disk."""
        self.status, self.note, self.closed_utc = status, note, _utc()
        self.write()


#: The repository index's states of a model between two others: a load or unload under way.
_MOVING = frozenset({"LOADING", "UNLOADING"})
#: How long a restore waits for a load under way (one the interrupted sweep sent and no longer waits for).
SETTLE_TIMEOUT_S = 120.0


def _settle(server: RemoteServer, models: list[str], timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Wait until the server loads or unloads none of ``models``.

    An interrupted sweep stops waiting for the load it sent, but the server goes on with it: loaded
    back over it, a model can be replaced by it (or left unavailable) after the restore checked it.
    So a restore lets such a load finish first, and checks what is served once nothing moves."""
    deadline = time.monotonic() + timeout_s
    while any(row.name in models and row.state in _MOVING for row in server.admin.index()):
        if time.monotonic() >= deadline:
            raise ServerError(f"tritonserver at {server.grpc_url} is still loading or unloading "
                              f"{', '.join(models)} after {timeout_s:.0f} s",
                              hint="wait for the load to end, then run the restore again")
        time.sleep(0.1)


#: How long a restored model must stay READY with its journaled config before the restore is done.
SETTLE_WINDOW_S = 1.0


def _serves(server: RemoteServer, model: str, config: mc.ModelConfig) -> bool:
    try:
        return server.admin.model_ready(model) and server.admin.model_config(model) == config
    except ModelNotReadyError:
        return False


def _unsettled(server: RemoteServer, configs: dict[str, mc.ModelConfig], window_s: float) -> list[str]:
    """The models not READY with their config at some point of a ``window_s`` watch ([]: all stayed so)."""
    deadline = time.monotonic() + window_s
    while True:
        wrong = [model for model, config in configs.items() if not _serves(server, model, config)]
        if wrong or time.monotonic() >= deadline:
            return wrong
        time.sleep(0.1)


def restore(server: RemoteServer, journal: Journal, say: Callable[[str], None],
            window_s: float = SETTLE_WINDOW_S) -> list[str]:
    """Reload each journaled model with its journaled config (in place, never an unload: its other
    clients are served throughout), after any load still under way (sent by the interrupted sweep,
    :func:`_settle`); then watch for ``window_s`` that each stays READY with it, and close the
    journal as restored. A model that changes in the window (a late load) is loaded back once more
    and watched again; still not right, it is a ``ServerError`` naming it (the journal stays open)."""
    with signals_held():
        configs = {model: journal.config(model) for model in journal.configs}
        for attempt in range(2):
            _settle(server, list(configs))
            for model, config in configs.items():
                server.load_model(model, config=config)
            wrong = _unsettled(server, configs, window_s)
            if not wrong:
                break
            if not attempt:
                say(f"{', '.join(wrong)} changed on {server.grpc_url} after it was loaded back (a load the sweep "
                    "sent ended late): loading it back once more")
        if wrong:
            journal.note = f"{', '.join(wrong)} not READY with the journaled config for {window_s:g} s, loaded back twice"
            journal.write()
            raise ServerError(f"tritonserver at {server.grpc_url}: {journal.note} ({journal.path})",
                              hint="compare the served config with the journal's, then run the restore again")
        models = ", ".join(journal.configs)
        journal.close(STATUS_RESTORED, f"{models} loaded again with the served config of {journal.started_utc}")
    say(f"restored: {models} on {server.grpc_url} loaded again with the config it served before the sweep, "
        f"READY with it for {window_s:g} s (journal {journal.path})")
    return list(journal.configs)


def restore_failed_hint(journal: Journal) -> str:
    """What to run once the server answers again, to put the journaled models back."""
    return (f"when the server answers again, run `tritonkit perf sweep --url {journal.url} --restore --out "
            f"{journal.path.parent}` to load the journaled config back")


def try_restore(server: RemoteServer, journal: Journal, say: Callable[[str], None]) -> TritonKitError | None:
    """:func:`restore`, its failure returned rather than raised (the sweep's own error comes first)."""
    try:
        restore(server, journal, say)
    except TritonKitError as exc:
        say(f"could not put {', '.join(journal.configs)} back: {exc.message}; the journal is kept open "
            f"({journal.path}): {restore_failed_hint(journal)}")
        return exc
    return None


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """Within the block, SIGINT and SIGTERM wait: a second Ctrl-C must not cut a restore in half.
    The block is given the list of those that came (to stop a wait early); one that came is raised
    as ``KeyboardInterrupt`` after the block. Off the main thread, nothing."""
    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return
    previous = {sig: signal.signal(sig, lambda signum, _frame: came.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield came
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if came:
        raise KeyboardInterrupt
