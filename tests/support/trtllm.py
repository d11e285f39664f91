"""TensorRT-LLM test helpers: HF configs of known models, a realistic engine config.json, and the
reference engine's expected text computed outside the server."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

import tritonkit.builders.trtllm.pymodels as pymodels

__all__ = ["LLAMA2_7B", "LLAMA3_8B", "engine_config_json", "expected_generation", "expected_text", "install_fake_gpu_toolchain",
           "prompt_ids", "tiny_lm", "write_engine", "write_hf_model"]

# Hugging Face config.json of the two models the derived parameters are checked on.
LLAMA3_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "intermediate_size": 14336,
    "vocab_size": 128256, "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}
LLAMA2_7B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_size": 4096, "intermediate_size": 11008,
    "vocab_size": 32000, "max_position_embeddings": 4096, "torch_dtype": "float16", "tie_word_embeddings": False,
}


def write_hf_model(folder: Path, config: dict[str, Any] = LLAMA3_8B) -> Path:
    """A HF model folder without weights: config.json and a real tokenizer (all the builder reads)."""
    from tritonkit.builders.trtllm import build_reference_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    build_reference_tokenizer(folder)
    return folder


def engine_config_json(*, version: str = "0.17.0.post1", max_batch_size: int = 16, max_input_len: int = 1024,
                       max_seq_len: int = 2048, max_num_tokens: int = 8192, tp: int = 1, pp: int = 1,
                       use_paged_context_fmha: bool = True, kv_cache_type: str | None = "PAGED") -> dict[str, Any]:
    """An engine config.json with the fields TensorRT-LLM 0.17's trtllm-build / LLM.save() write
    (copied in shape from a real engine folder: version, pretrained_config with mapping and
    quantization, build_config with plugin_config)."""
    build: dict[str, Any] = {
        "max_input_len": max_input_len, "max_seq_len": max_seq_len, "opt_batch_size": 8,
        "max_batch_size": max_batch_size, "max_beam_width": 1, "max_num_tokens": max_num_tokens,
        "opt_num_tokens": 16, "max_prompt_embedding_table_size": 0,
        "gather_context_logits": False, "gather_generation_logits": False, "strongly_typed": True,
        "force_num_profiles": None, "profiling_verbosity": "layer_names_only", "enable_debug_output": False,
        "max_draft_len": 0, "speculative_decoding_mode": 1, "use_refit": False, "input_timing_cache": None,
        "output_timing_cache": "model.cache",
        "lora_config": {"lora_dir": [], "lora_ckpt_source": "hf", "max_lora_rank": 64, "lora_target_modules": [],
                        "trtllm_modules_to_hf_modules": {}},
        "weight_sparsity": False, "weight_streaming": False,
        "plugin_config": {
            "dtype": "bfloat16", "bert_attention_plugin": "auto", "gpt_attention_plugin": "auto",
            "gemm_plugin": "bfloat16", "nccl_plugin": None if tp * pp == 1 else "bfloat16", "lora_plugin": None,
            "moe_plugin": "auto", "context_fmha": True, "paged_kv_cache": kv_cache_type == "PAGED",
            "remove_input_padding": True, "reduce_fusion": False, "tokens_per_block": 64,
            "use_paged_context_fmha": use_paged_context_fmha, "use_fp8_context_fmha": False,
            "multiple_profiles": False, "paged_state": False, "streamingllm": False, "use_fused_mlp": True,
        },
        "use_strip_plan": False, "max_encoder_input_len": 1024, "monitor_memory": False, "use_mrope": False,
    }
    if kv_cache_type is not None:
        build["kv_cache_type"] = kv_cache_type
    return {
        "version": version,
        "pretrained_config": {
            "architecture": "LlamaForCausalLM", "dtype": "bfloat16", "vocab_size": 128256, "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "hidden_act": "silu", "logits_dtype": "float32",
            "norm_epsilon": 1e-05, "position_embedding_type": "rope_gpt_neox", "num_key_value_heads": 8,
            "intermediate_size": 14336, "max_position_embeddings": 8192,
            "mapping": {"world_size": tp * pp, "gpus_per_node": 8, "cp_size": 1, "tp_size": tp, "pp_size": pp,
                        "moe_tp_size": tp, "moe_ep_size": 1, "auto_parallel": False},
            "quantization": {"quant_algo": None, "kv_cache_quant_algo": None, "group_size": 128,
                             "smoothquant_val": 0.5, "clamp_val": None, "has_zero_point": False,
                             "pre_quant_scale": False, "exclude_modules": None},
            "rotary_base": 500000.0, "tie_word_embeddings": False,
        },
        "build_config": build,
    }


def write_engine(folder: Path, **kwargs: Any) -> Path:
    """Write ``engine_config_json(**kwargs)`` as ``folder/config.json`` (no rank*.engine: nothing here loads it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(engine_config_json(**kwargs), indent=2))
    return folder


def tiny_lm(repo: Path) -> Any:
    """The reference engine's model, built here from the engine's config.json (same seed, same weights)."""
    engine = json.loads((repo / "tensorrt_llm" / "1" / "engine" / "config.json").read_text())["reference"]
    return _tiny_lm_class()(int(engine["vocab_size"]), hidden_size=int(engine["hidden_size"]),
                            seed=int(engine["seed"]), allowed=list(engine["allowed_token_ids"]))


def _tiny_lm_class() -> Any:
    path = Path(pymodels.__file__).parent / "tiny_lm.py"
    spec = importlib.util.spec_from_file_location("tk_test_tiny_lm", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TinyLM


def expected_text(repo: Path, prompt: str, max_tokens: int) -> str:
    """What the reference engine must stream for ``prompt``: its tokenizer and its seeded model, run here."""
    return expected_generation(repo, prompt, max_tokens)[0]


def prompt_ids(repo: Path, prompt: str) -> list[int]:
    """What preprocessing must make of ``prompt``: its tokens, after the BOS id when the tokenizer's
    config says ``add_bos_token`` (the reference tokenizer does, like Llama's)."""
    folder = repo / "preprocessing" / "1" / "tokenizer"
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    ids = tokenizer.encode(prompt, add_special_tokens=False).ids
    return [tokenizer.token_to_id(settings["bos_token"]), *ids] if settings.get("add_bos_token") else ids


def expected_generation(repo: Path, prompt: str, max_tokens: int) -> tuple[str, list[float]]:
    """The reference engine's text and per-token log-probabilities for ``prompt``, computed here."""
    engine = json.loads((repo / "tensorrt_llm" / "1" / "engine" / "config.json").read_text())["reference"]
    tokenizer = Tokenizer.from_file(str(repo / "preprocessing" / "1" / "tokenizer" / "tokenizer.json"))
    lm = _tiny_lm_class()(int(engine["vocab_size"]), hidden_size=int(engine["hidden_size"]),
                          seed=int(engine["seed"]), allowed=list(engine["allowed_token_ids"]))
    tokens, log_probs = lm.generate(prompt_ids(repo, prompt), max_tokens)
    return str(tokenizer.decode(tokens)), [float(x) for x in log_probs]


# A stand-in for the tensorrt_llm wheel: the LLM API surface build_engine.py uses. LLM.save() writes
# the engine config.json TensorRT-LLM would, from the values it was given.
_FAKE_TRTLLM = '''
import json
from pathlib import Path

__version__ = "0.17.0.post1"


class _Plugin:
    use_paged_context_fmha = False


class BuildConfig:
    def __init__(self, **kwargs):
        self.values = kwargs
        self.plugin_config = _Plugin()


class LLM:
    def __init__(self, model, dtype, tensor_parallel_size, pipeline_parallel_size, build_config, quant_config):
        self.args = dict(model=model, dtype=dtype, tp=tensor_parallel_size, pp=pipeline_parallel_size,
                         quant=quant_config.quant_algo, kv_quant=quant_config.kv_cache_quant_algo)
        self.build_config = build_config

    def save(self, engine_dir):
        folder = Path(engine_dir)
        folder.mkdir(parents=True, exist_ok=True)
        tp, pp = self.args["tp"], self.args["pp"]
        build = dict(self.build_config.values, kv_cache_type="PAGED",
                     plugin_config={"use_paged_context_fmha": self.build_config.plugin_config.use_paged_context_fmha})
        config = {"version": __version__,
                  "pretrained_config": {"dtype": self.args["dtype"], "mapping": {"world_size": tp * pp,
                                        "tp_size": tp, "pp_size": pp},
                                        "quantization": {"quant_algo": self.args["quant"],
                                                         "kv_cache_quant_algo": self.args["kv_quant"]}},
                  "build_config": build, "llm_args": {"model": self.args["model"]}}
        (folder / "config.json").write_text(json.dumps(config))
'''
_FAKE_LLMAPI = '''
class QuantAlgo:
    FP8 = "FP8"
    W8A16 = "W8A16"
    W4A16_AWQ = "W4A16_AWQ"
    W8A8_SQ_PER_CHANNEL = "W8A8_SQ_PER_CHANNEL"
    INT8 = "INT8"


class QuantConfig:
    def __init__(self, quant_algo=None, kv_cache_quant_algo=None):
        self.quant_algo = quant_algo
        self.kv_cache_quant_algo = kv_cache_quant_algo
'''


def install_fake_gpu_toolchain(root: Path) -> tuple[Path, Path]:
    """A fake ``tensorrt_llm`` package (with dist-info, so its version is found) and a fake
    ``nvidia-smi`` listing one GPU; returns (site folder, bin folder) to put on PYTHONPATH / PATH."""
    site = root / "site"
    package = site / "tensorrt_llm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(_FAKE_TRTLLM)
    (package / "llmapi.py").write_text(_FAKE_LLMAPI)
    dist = site / "tensorrt_llm-0.17.0.post1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorrt_llm\nVersion: 0.17.0.post1\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-fake)'\n"
                   "echo 'GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-fake2)'\n")
    smi.chmod(0o755)
    return site, bin_dir
