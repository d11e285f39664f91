"""Pre/postprocessing instances: derived from the serving machine with a stated bound, not the max batch.

Upstream (tensorrtllm_backend docs/model_config.md): matching the max batch size "will also consume more
CPU memory … setting instance_count to 5 works well across a variety of workloads". Llama-3-8B on an
H100-80GB derives a Triton max batch of 328: 656 tokenizer stubs would not finish loading.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.trtllm import write_hf_model
from tritonkit.builders.trtllm import build_trtllm, derive_tokenizer_instances
from tritonkit.builders.trtllm.instances import MAX_TOKENIZER_INSTANCES
from tritonkit.repository import read_config

GIB = 2**30


def test_a_large_server_is_held_to_the_bound_and_says_which_limit_bound() -> None:
    found = derive_tokenizer_instances(328, cpu_count=112, memory_bytes=2048 * GIB)
    assert found.count == MAX_TOKENIZER_INSTANCES == 8
    assert found.why.startswith("the bound 8") and "56 by half of 112 CPU cores" in found.why


def test_cores_memory_and_the_batch_each_bind_where_they_are_lowest() -> None:
    assert derive_tokenizer_instances(328, cpu_count=2, memory_bytes=24 * GIB).count == 1
    assert derive_tokenizer_instances(328, cpu_count=64, memory_bytes=4 * GIB).count == 2  # 1 GiB / 512 MiB
    assert derive_tokenizer_instances(3, cpu_count=64, memory_bytes=512 * GIB).count == 3
    given = derive_tokenizer_instances(328, given=20, cpu_count=2)
    assert (given.count, given.why) == (20, "given (--tokenizer-instances)")


def test_llama_3_8b_on_h100_no_longer_gets_328_instances_each(tmp_path: Path) -> None:
    hf = write_hf_model(tmp_path / "hf")
    result = build_trtllm(hf, repo=tmp_path / "r", engine="tensorrtllm", run_build=False)
    assert result.plan is not None and result.plan.params.max_batch_size == 328
    expected = derive_tokenizer_instances(328).count
    for name in ("preprocessing", "postprocessing"):
        assert read_config(tmp_path / "r" / name / "config.pbtxt").instance_group[0].count == expected <= 8
    assert result.tokenizer_instances is not None and "preprocessing / postprocessing instances" in result.summary()
    assert "perf sweep" in result.summary()
