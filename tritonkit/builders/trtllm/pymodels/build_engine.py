# mypy: ignore-errors
"""Build a TensorRT-LLM engine from a Hugging Face checkpoint with the LLM API, as a plan file says.

Written into the model repository by ``tritonkit build trtllm``; run it where ``tensorrt_llm`` and
the GPUs are (an NGC ``…-trtllm-python-py3`` container)::

    python3 build_engine.py engine_plan.json

The plan holds the HF model folder, the engine folder, the parallelism and every BuildConfig
value. After the build it writes ``tritonkit_build.json`` beside the engine with the TensorRT-LLM
version that built it; the engine's own ``config.json`` records it as ``version`` too.
"""

import json
import sys
from pathlib import Path


def main(plan_path):
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    import tensorrt_llm
    from tensorrt_llm import BuildConfig
    from tensorrt_llm.llmapi import QuantAlgo, QuantConfig

    try:  # TensorRT-LLM 1.x: the engine-building LLM moved; the top-level one is the PyTorch flow
        from tensorrt_llm._tensorrt_engine import LLM
    except ImportError:
        from tensorrt_llm import LLM

    p = plan["params"]
    build_config = BuildConfig(max_batch_size=p["max_batch_size"], max_input_len=p["max_input_len"],
                               max_seq_len=p["max_seq_len"], max_num_tokens=p["max_num_tokens"],
                               max_beam_width=p["max_beam_width"])
    build_config.plugin_config.use_paged_context_fmha = p["use_paged_context_fmha"]
    quant = QuantConfig(
        quant_algo=getattr(QuantAlgo, p["quant_algo"]) if p["quant_algo"] else None,
        kv_cache_quant_algo=getattr(QuantAlgo, p["kv_cache_quant_algo"]) if p["kv_cache_quant_algo"] else None,
    )
    llm = LLM(model=plan["hf_model"], dtype=p["dtype"], tensor_parallel_size=p["tp_size"],
              pipeline_parallel_size=p["pp_size"], build_config=build_config, quant_config=quant)
    engine_dir = Path(plan["engine_dir"])
    llm.save(str(engine_dir))
    record = {"tensorrt_llm_version": tensorrt_llm.__version__, "plan": plan}
    (engine_dir / "tritonkit_build.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"engine written to {engine_dir} by TensorRT-LLM {tensorrt_llm.__version__}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_engine.py engine_plan.json")
    sys.exit(main(sys.argv[1]))
