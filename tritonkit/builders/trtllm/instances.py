"""How many preprocessing and postprocessing instances the engine repository gets, and why.

Every instance is a python-backend stub process that loads the tokenizer. Upstream's advice
(tensorrtllm_backend docs/model_config.md) is that the count "should ideally match the max batch
size … however it will also consume more CPU memory … setting ``instance_count`` to 5 works well
across a variety of workloads", and its README example uses 1. Matching the max batch size is
too heavy where that batch is large: Llama-3-8B on an H100-80GB derives a Triton max batch of 328,
which would start 656 stubs, each loading the tokenizer (the bundled server had not loaded them
after 120 s). So the count is derived from the machine that serves:

* at most half the CPU cores each (preprocessing and postprocessing share them, and the engine's
  own threads and the server's frontends need the rest);
* at most what a quarter of the memory holds at :data:`STUB_BYTES` per stub (both models);
* at most :data:`MAX_TOKENIZER_INSTANCES`: a tokenizer call is tens of microseconds, so a few
  instances keep up with a GPU's token rate (upstream's "5 works well"), and more only add
  start-up time and memory;
* never more than the max batch size (more could never be busy at once), never less than 1.

``--tokenizer-instances`` overrides it (build on one machine, serve on another: give the serving
machine's figure), and ``tritonkit perf sweep REPO postprocessing --target ensemble --instances
1,2,4,8`` measures it (the sweep loads each count and keeps the one that carries the most load).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["MAX_TOKENIZER_INSTANCES", "STUB_BYTES", "TokenizerInstances", "derive_tokenizer_instances",
           "machine_memory_bytes"]

#: Upper bound on instances per tokenizer model (see the module docstring).
MAX_TOKENIZER_INSTANCES = 8
#: Memory one python stub with a loaded tokenizer takes (interpreter, numpy, tokenizers, the
#: tokenizer's tables: a Llama-3 tokenizer.json alone is ~9 MB on disk, several times that loaded).
STUB_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class TokenizerInstances:
    """The instance count of preprocessing and of postprocessing (each), and the reason."""

    count: int
    why: str


def machine_memory_bytes() -> int | None:
    """This machine's physical memory (``None`` where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def derive_tokenizer_instances(max_batch_size: int, *, given: int | None = None, cpu_count: int | None = None,
                               memory_bytes: int | None = None) -> TokenizerInstances:
    """The count for ``max_batch_size`` on a machine of ``cpu_count`` cores and ``memory_bytes``
    (default: this machine's), or ``given`` as is (``--tokenizer-instances``)."""
    if given is not None:
        return TokenizerInstances(given, "given (--tokenizer-instances)")
    cores = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    memory = memory_bytes if memory_bytes is not None else machine_memory_bytes()
    by_cores = max(1, cores // 2)
    limits = [(by_cores, f"half of {cores} CPU cores")]
    if memory is not None:
        by_memory = max(1, memory // 4 // (2 * STUB_BYTES))
        limits.append((by_memory, f"a quarter of {memory / 2**30:.0f} GiB at {STUB_BYTES // 2**20} MiB per stub, "
                                  "pre + post"))
    limits.append((MAX_TOKENIZER_INSTANCES, f"the bound {MAX_TOKENIZER_INSTANCES} (upstream: 5 works well)"))
    limits.append((max(1, max_batch_size), f"the max batch size {max_batch_size}"))
    count, binding = min(limits, key=lambda item: item[0])
    return TokenizerInstances(count, f"{binding} (of: " + ", ".join(f"{n} by {what}" for n, what in limits)
                              + "); tune with perf sweep … postprocessing --target ensemble")
