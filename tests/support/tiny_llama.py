"""Make a tiny Llama-architecture model and its tokenizer on the spot (random weights, a BPE tokenizer
trained here; nothing from a model hub), for a real engine to serve in tests and benchmarks.

Run with the engine's own Python (it needs ``torch``, ``transformers`` and ``tokenizers``, which the
engine's environment has): ``.venv-vllm/bin/python tests/support/tiny_llama.py OUT [--hidden 64
--layers 2]``. OUT then holds ``config.json``, ``model.safetensors``, ``generation_config.json``,
``tokenizer.json`` (+ ``tokenizer_config.json`` with a chat template) — what vLLM's
``--model OUT`` loads, and what ``tritonkit perf run --tokenizer OUT`` counts with.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

#: A chat template (Jinja, as transformers reads it): each message's role and text, then the
#: assistant's turn. vLLM's /v1/chat/completions refuses a tokenizer without one.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
SPECIAL = ["<unk>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]


def _corpus(seed: int, words: int = 4000) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 8))) for _ in range(600)]
    return [" ".join(rng.choice(vocab) for _ in range(20)) for _ in range(words // 20)]


def make(out: Path, *, hidden: int, layers: int, vocab: int, seed: int, max_positions: int) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_corpus(seed), trainers.BpeTrainer(vocab_size=vocab, special_tokens=SPECIAL,
                                                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=hidden, intermediate_size=hidden * 2,
                         num_hidden_layers=layers, num_attention_heads=max(1, hidden // 32),
                         num_key_value_heads=max(1, hidden // 32), max_position_embeddings=max_positions,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, tie_word_embeddings=True,
                         torch_dtype="float32")
    LlamaForCausalLM(config).save_pretrained(out, safe_serialization=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-positions", type=int, default=2048)
    args = parser.parse_args()
    make(args.out, hidden=args.hidden, layers=args.layers, vocab=args.vocab, seed=args.seed,
         max_positions=args.max_positions)


if __name__ == "__main__":
    main()
